"""A Qdrant REST client in the standard library, for programs run inside our containers
(`python3 -c`): the Qdrant image carries no client, and the memory-service image's own
client would hide what the server answers. One `call` for the image test and the walk."""

from __future__ import annotations

# The program's first part; a test appends its own steps, which use `call` and print JSON.
CALL = '''
import json, ssl, sys, time, urllib.error, urllib.request
def call(base, path, key=None, body=None, method=None, cafile=None):
    """(status, parsed JSON or None); a transport failure: (its exception's name, None)."""
    request = urllib.request.Request(base + path, method=method or ("PUT" if body else "GET"))
    if body is not None:
        request.data = json.dumps(body).encode()
        request.add_header("Content-Type", "application/json")
    if key:
        request.add_header("api-key", key)
    context = ssl.create_default_context(cafile=cafile) if cafile else None
    try:
        with urllib.request.urlopen(request, timeout=30, context=context) as response:
            raw = response.read()
            is_json = response.headers.get_content_type() == "application/json"
            return response.status, json.loads(raw) if is_json else None
    except urllib.error.HTTPError as exc:
        return exc.code, None
    except Exception as exc:  # refused, reset, or plain HTTP to a TLS port (garbled status)
        return type(exc).__name__, None
'''


def program(steps: str) -> str:
    """`CALL` followed by a test's own steps."""
    return CALL + steps
