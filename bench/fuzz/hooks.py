"""Schemathesis hooks for `npm run fuzz` (loaded through SCHEMATHESIS_HOOKS).

engram_envelope: every JSON body is Engram's envelope — `{"data": ...}` on 2xx, and
`{"error": {"code", "message"}}` otherwise — and every error status carries a JSON body.
The OpenAPI document itself (/v1/openapi.json) is the one JSON answer served bare.
"""

import json

import schemathesis

BARE = {"/v1/openapi.json"}


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
