"""The OpenAPI 3.1 document of the HTTP API, served at GET /openapi.json."""


def document():
    """The OpenAPI document (being written: see the issue)."""
    return {"openapi": "3.1.0", "info": {"title": "snapshot-kernel", "version": "0.1.0"},
            "paths": {}}
