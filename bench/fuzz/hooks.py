"""Schemathesis hooks for `npm run fuzz` (loaded through SCHEMATHESIS_HOOKS).

engram_envelope: every JSON body is Engram's envelope — `{"data": ...}` on 2xx, and
`{"error": {"code", "message"}}` otherwise — and every error status carries a JSON body.
The OpenAPI document itself (/v1/openapi.json) is the one JSON answer served bare.

map_path_parameters: most generated cases get real ids (created by scripts/fuzz.mjs and passed in
ENGRAM_FUZZ_FIXTURES) instead of random ones, which would only ever reach the 404 branch.
"""

import json
import os
import zlib

import schemathesis

BARE = {"/v1/openapi.json"}

FIXTURES = json.loads(os.environ.get("ENGRAM_FUZZ_FIXTURES", "{}"))

# Which fixture list a path parameter takes, by the path segment before it (then by its own name).
BY_SEGMENT = {
    "memories": "memories",
    "hubs": "hubs",
    "members": "members",
    "invites": "invites",
    "ownership-transfer": "transfers",
    "topics": "topics",
    "configs": "configs",
    "api-keys": "apiKeys",
    "notifications": "notifications",
}
BY_NAME = {"token": "tokens", "memory_id": "memories"}


def _fixture_kind(path, name):
    if name in BY_NAME:
        return BY_NAME[name]
    segments = path.strip("/").split("/")
    marker = "{" + name + "}"
    at = segments.index(marker) if marker in segments else 0
    return BY_SEGMENT.get(segments[at - 1]) if at > 0 else None


@schemathesis.hook
def map_path_parameters(ctx, path_parameters):
    """Three of four cases use fixture ids; the choice is a hash of the drawn values (deterministic)."""
    if not path_parameters or not FIXTURES:
        return path_parameters
    digest = zlib.crc32(json.dumps(path_parameters, sort_keys=True, default=str).encode())
    if digest % 4 == 0:
        return path_parameters
    k = (digest // 4) % 3
    mapped = dict(path_parameters)
    for name in path_parameters:
        kind = _fixture_kind(ctx.operation.path, name)
        ids = FIXTURES.get(kind) if kind else None
        if ids:
            mapped[name] = ids[k % len(ids)]
    return mapped


def _header(response, name):
    value = response.headers.get(name) or response.headers.get(name.title())
    if isinstance(value, list):
        value = value[0] if value else None
    return value or ""


@schemathesis.check
def engram_envelope(ctx, response, case):
    """Every JSON response is the {data} or {error} envelope; every error is JSON."""
    if case.path in BARE and response.status_code < 400:
        return None
    content_type = _header(response, "content-type").split(";")[0].strip().lower()
    if response.status_code >= 400 and content_type != "application/json":
        raise AssertionError(f"error status {response.status_code} without a JSON envelope (Content-Type: {content_type or 'none'})")
    if content_type != "application/json":
        return None
    try:
        body = json.loads(response.content)
    except ValueError as exc:
        raise AssertionError(f"Content-Type is JSON but the body does not parse: {exc}") from exc
    if not isinstance(body, dict):
        raise AssertionError("the body is not a JSON object")
    if response.status_code < 400:
        if set(body) != {"data"}:
            raise AssertionError(f"a success body must be exactly {{data}}, got keys {sorted(body)}")
    else:
        error = body.get("error")
        if set(body) != {"error"} or not isinstance(error, dict) or not isinstance(error.get("code"), str) or not isinstance(error.get("message"), str):
            raise AssertionError(f"an error body must be {{error: {{code, message}}}}, got {json.dumps(body)[:300]}")
    return None
