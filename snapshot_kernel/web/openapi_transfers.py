"""The routes of the OpenAPI document that move bytes: files (``/files``) and state archives
(export and import)."""

from ..files import FILE_PATTERN, PATH_PATTERN
from .vocabulary import (BODY_ERRORS, FILE_ERRORS, TEXT, TIMESTAMP, header, json_reply, mapping,
                         nullable, obj, operation, ref)


# The patterns are exactly what the server takes before it touches the disk (a 400 past
# them). What they cannot say: a name of more than 255 bytes in UTF-8 (most file systems'
# limit) names no file to read, list or delete (404), and cannot be written (400).
PATH_LIMITS = ("relative to the working directory, '/' between directories; not absolute, "
               "no '..' segment, no NUL; a name in it is at most 255 bytes in UTF-8")
FILE_PATH = {"type": "string", "minLength": 1, "pattern": PATH_PATTERN,
             "description": PATH_LIMITS}
FILE_NAME = {"type": "string", "minLength": 1, "pattern": FILE_PATTERN,
             "description": PATH_LIMITS + "; ends in the file's name, not '/' or '.'"}


def file_path(description, schema=FILE_PATH):
    return {"name": "path", "in": "path", "required": True, "description": description,
            "schema": schema}


def file_paths(max_file):
    path = [file_path("the file")]
    listing = json_reply("The directory's entries.", ref("FileListing"))
    stored = json_reply("Stored.", ref("FileStored"))
    write = operation(
        "write_file", "files", "Store the body as the file, making the directories it needs; "
        "an existing file is replaced whole.", stored, *FILE_ERRORS, "503", "507",
        *BODY_ERRORS, parameters=[file_path("the file", FILE_NAME)], requestBody={"required": False, "content": {
            "application/octet-stream": {"schema": {"description": "the file's bytes; none "
                                                                   "stores an empty file"}}}},
        description=f"Streamed to disk, never held in memory; up to --max-file ({max_file} "
                    "bytes on this server: more is a 413 and nothing is stored). Sent "
                    "chunked, the body is cut off at the limit. Counts towards --max-running.")
    raw = {"description": "The file's bytes, with the media type its name suggests.",
           "content": {"*/*": {"schema": {"description": "the file's bytes"}}},
           "headers": {"Content-Length": header("bytes")}}
    return {
        "/files/": {"get": operation(
            "list_files", "files", "List the working directory.", listing, *FILE_ERRORS)},
        "/files/{path}/": {
            "get": operation("list_directory", "files", "List a directory below the working "
                             "directory.", listing, *FILE_ERRORS,
                             parameters=[file_path("the directory")]),
            "delete": operation("delete_directory", "files", "Delete an empty directory "
                                "(a file or a symbolic link there is a 409).",
                                json_reply("Deleted.", ref("Deleted")), *FILE_ERRORS,
                                parameters=[file_path("the directory")])},
        "/files/{path}": {
            "get": operation("read_file", "files", "A file's bytes, streamed.", raw,
                             *FILE_ERRORS, "503", parameters=path,
                             description="Counts towards --max-running until it is sent."),
            "put": write,
            "delete": operation("delete_file", "files", "Delete a file, a symbolic link "
                                "(never what it points to) or an empty directory.",
                                json_reply("Deleted.", ref("Deleted")), *FILE_ERRORS,
                                parameters=path)},
    }
ARCHIVE = "application/x-tar"


def export_state(state):
    archive = {"description": "The archive: meta.json, buffers/*.npy, state.pickle, "
                              "checksums.json (a sha256 per member).",
               "content": {ARCHIVE: {"schema": {"type": "string",
                                                "contentMediaType": ARCHIVE}}},
               "headers": {"Content-Length": header("bytes: known before the first"),
                           "Content-Disposition": header("attachment; <name>.tar")}}
    return operation(
        "export_state", "states", "A state as an archive that PUT /states/<name> loads on any "
        "server of the same CPython minor version: its values (lineage flattened), cells' "
        "functions and classes, large arrays, metadata and checksums.", archive, "404",
        parameters=state, description="Streamed. Names whose objects cannot be pickled are "
        "left out; meta.json lists them under `lost`, and the import's reply too.")


def import_state(state, max_import):
    body = {"type": "string", "contentMediaType": ARCHIVE}
    op = operation(
        "import_state", "states", "Recreate the state an archive from GET "
        "/states/<name>/export holds, as a new root state named <name>; cells on it give what "
        "they give on the original.", json_reply("Imported.", ref("Imported")),
        "409", "422", "499", *BODY_ERRORS, parameters=state,
        requestBody={"required": True, "content": {ARCHIVE: {"schema": body},
                                                    "application/octet-stream": {
                                                        "schema": body}}},
        description=f"Read as it arrives (a Content-Length, or chunked), at most {max_import} "
                    "bytes (--max-import; 413 past it). Refused, storing nothing: 400 for a "
                    "body that is not an archive, or a truncated or damaged one (a checksum "
                    "that does not match); 409 for a name that exists; 422 for a state this "
                    "server cannot load (the message says which version differs).")
    # Its own 400: any bytes of the media type match the body's schema, which cannot say
    # "an archive that export made", so this refusal of a schema-valid body is declared here.
    op["responses"]["400"] = json_reply(
        "The body is not a state archive (a tar file that GET /states/<name>/export gives), "
        "or a truncated or damaged one (a checksum does not match); or the name, a header "
        "or the HTTP itself is malformed. Nothing was stored.", ref("Error"))
    return op


def imported():
    return obj({
        "imported": {**TEXT, "description": "the new state's name"},
        "lost": mapping(TEXT, "names the archive left out (their objects could not be "
                              "pickled), and why; or, unless --in-memory, that could not be "
                              "saved"),
        "original": obj({"name": TEXT, "parent": nullable(TEXT), "timestamp": TIMESTAMP,
                         "python_version": TEXT, "snapshot_kernel": TEXT,
                         "libraries": mapping(TEXT, "library: version")},
                        description="the state on the server it was exported from"),
    }, description="A root state: its parent is null, its code the cell that made the original.")
