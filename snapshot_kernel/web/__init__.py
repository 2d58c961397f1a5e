"""The HTTP edge besides ``main``: the Cheroot server (``server``), request checks
(``bodies``) and the OpenAPI document (``openapi``)."""
