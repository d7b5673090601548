"""What the sync and async clients share: request bodies, paths, and reading answers."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Union
from urllib.parse import quote

import httpx

from ._http11 import Answer
from .errors import AirlockApiError, AirlockProtocolError
from .types import (
    JSON,
    ClientResult,
    ClientTool,
    Determinism,
    ExecutionEvent,
    ExecutionResponse,
    parse_event,
)

BASE_URL = "http://airlock"
NDJSON = "application/x-ndjson"

DEFAULT_TIMEOUT = httpx.Timeout(connect=10.0, read=None, write=60.0, pool=60.0)
"""No read timeout: the daemon bounds every execution by its own ``timeout_ms``."""

ClientToolLike = Union[ClientTool, Mapping[str, Any]]
ClientResultLike = Union[ClientResult, Mapping[str, Any]]
ClientResultsLike = Union[Sequence[ClientResultLike], Mapping[int, JSON]]
DeterminismLike = Union[Determinism, Mapping[str, Any]]
Answered = Union[httpx.Response, Answer]
"""A whole answer, from httpx or from the clients' own connections (``_http11``)."""


def request_headers(method: str, headers: Mapping[str, str] | None) -> Mapping[str, str] | None:
    """``headers`` with ``content-type: application/json`` for a POST: the daemon answers a
    POST without that type 415, also one without a body (``resume``). httpx adds it itself
    only when it encodes a ``json`` body."""
    if method != "POST":
        return headers
    return {"content-type": "application/json", **(headers or {})}


def execution_path(execution_id: str, suffix: str = "") -> str:
    return f"/v1/executions/{quote(execution_id, safe='')}{suffix}"


def tool_json(tool: ClientToolLike) -> dict[str, Any]:
    return tool.to_json() if isinstance(tool, ClientTool) else dict(tool)


def results_json(results: ClientResultsLike) -> list[dict[str, Any]]:
    """Client results as the API takes them. A mapping is ``{call id: value}`` (every one a
    success); a sequence holds ``ClientResult``s or ready ``{"id", "ok"|"error"}`` dicts."""
    if isinstance(results, Mapping):
        return [{"id": int(k), "ok": v} for k, v in results.items()]
    out: list[dict[str, Any]] = []
    for r in results:
        out.append(r.to_json() if isinstance(r, ClientResult) else dict(r))
    return out


def execution_body(
    code: str,
    *,
    language: str | None = None,
    timeout_ms: int | None = None,
    session: str | None = None,
    replay: str | None = None,
    client_tools: Sequence[ClientToolLike] | None = None,
    client_results: ClientResultsLike | None = None,
    determinism: DeterminismLike | None = None,
    wait: bool | None = None,
) -> dict[str, Any]:
    """The ``POST /v1/executions`` body: only the fields given (the daemon rejects unknown
    ones, and its defaults apply to the rest)."""
    body: dict[str, Any] = {"code": code}
    if language is not None:
        body["language"] = language
    if timeout_ms is not None:
        body["timeout_ms"] = timeout_ms
    if session is not None:
        body["session"] = session
    if replay is not None:
        body["replay"] = replay
    if client_tools:
        body["client_tools"] = [tool_json(t) for t in client_tools]
    if client_results is not None:
        body["client_results"] = results_json(client_results)
    if determinism is not None:
        body["determinism"] = (
            determinism.to_json() if isinstance(determinism, Determinism) else dict(determinism)
        )
    if wait is not None:
        body["wait"] = wait
    return body


def api_error(response: Answered) -> AirlockApiError:
    """The error of a non-2xx answer whose body has been read."""
    retry_after: float | None = None
    header = response.headers.get("retry-after")
    if header is not None:
        try:
            retry_after = float(header)
        except ValueError:
            retry_after = None
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and "code" in error:
        return AirlockApiError(
            response.status_code,
            str(error.get("code")),
            str(error.get("message", "")),
            error.get("hint") if isinstance(error.get("hint"), str) else None,
            retry_after=retry_after,
            body=body,
        )
    return AirlockApiError(
        response.status_code,
        "unknown",
        response.text,
        None,
        retry_after=retry_after,
        body=body,
    )


def decode_json(response: Answered) -> Any:
    """The JSON body of a 2xx answer (raises ``AirlockApiError`` for any other status)."""
    if not response.is_success:
        raise api_error(response)
    try:
        return response.json()
    except ValueError as e:
        raise AirlockProtocolError(
            f"airlockd answered {response.status_code} with a body that is not JSON: {response.text[:200]!r}"
        ) from e


def decode_response(response: Answered) -> ExecutionResponse:
    data = decode_json(response)
    if not isinstance(data, dict):
        raise AirlockProtocolError(f"expected an execution response, got {type(data).__name__}")
    return ExecutionResponse.from_json(data)


def decode_event(line: str) -> ExecutionEvent | None:
    """One NDJSON line as an event (``None`` for a blank line)."""
    if not line.strip():
        return None
    try:
        data = json.loads(line)
    except ValueError as e:
        raise AirlockProtocolError(f"an event line is not JSON: {line[:200]!r}") from e
    if not isinstance(data, dict):
        raise AirlockProtocolError(f"an event line is not an object: {line[:200]!r}")
    return parse_event(data)


def decision_body(approve: bool, reason: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"decision": "approve" if approve else "deny"}
    if reason is not None:
        body["reason"] = reason
    return body


RETRY_STATUSES = ("error", "timeout")
"""The outcomes the retry loop hands to ``fix``: the program ran and failed. ``waiting``
needs answers, not a fix; ``cancelled`` was asked for."""
