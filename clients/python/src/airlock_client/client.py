"""The sync ``Client`` and the ``AsyncClient``: the same methods, one blocking, one async.

Both speak HTTP/1.1 + JSON to ``airlockd`` over its Unix socket: requests with a whole answer
on lean kept connections of their own (``_http11``), NDJSON streams through ``httpx``. A
program that fails is an answer, not an exception (``response.status == "error"``); a
request the daemon refuses raises ``AirlockApiError`` with its ``code``, ``message`` and
``hint``.
"""

from __future__ import annotations

import contextlib
import inspect
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from typing import (
    Any,
    Union,
)
from urllib.parse import quote

import httpx

from . import _wire
from ._http11 import AsyncUnixHttp, UnixHttp
from ._wire import (
    NDJSON,
    Answered,
    ClientResultsLike,
    ClientToolLike,
    DeterminismLike,
    decode_event,
    decode_json,
    decode_response,
    execution_body,
    execution_path,
)
from .errors import AirlockConnectionError, AirlockProtocolError, AirlockTransportError
from .socket_path import resolve_socket_path
from .types import (
    JSON,
    Attempt,
    ClientResult,
    ClientTool,
    Decision,
    ExecutionEvent,
    ExecutionResponse,
    ExecutionRow,
    PendingApproval,
    PendingCall,
    ResultEvent,
    RetryResult,
    SdkTree,
    SearchResults,
    SessionDetail,
    SessionInfo,
    ToolList,
)

__all__ = ["AsyncClient", "AsyncFix", "AsyncToolHandler", "Client", "Fix", "ToolHandler"]

Fix = Callable[[ExecutionResponse], str | None]
"""The retry loop's callback: given a failed response, the next program (``None``: give up)."""
AsyncFix = Callable[[ExecutionResponse], str | None | Awaitable[str | None]]

ToolHandler = Callable[[JSON], JSON]
"""A client tool's implementation: its arguments in, its value out (raise to fail the call)."""
AsyncToolHandler = Callable[[JSON], JSON | Awaitable[JSON]]

SocketPath = Union[str, "os.PathLike[str]", None]


def _wrap_transport(socket_path: str, error: httpx.TransportError) -> AirlockTransportError:
    if isinstance(error, httpx.ConnectError):
        return AirlockConnectionError(socket_path, error)
    return AirlockTransportError(f"talking to airlockd at {socket_path}: {error!r}")


def _tools_for(handlers: Mapping[str, Any]) -> list[ClientTool]:
    """Declarations for handlers given without ``client_tools``: the name, and the
    docstring's first line as the description (arguments unchecked: any object)."""
    tools = []
    for name, handler in handlers.items():
        doc = inspect.getdoc(handler) or ""
        tools.append(ClientTool(name=name, description=doc.split("\n", 1)[0]))
    return tools


def _no_handler(call: PendingCall) -> ClientResult:
    return ClientResult.failure(call.id, f"the client has no handler for tools.client.{call.tool}")


def _handler_failed(call: PendingCall, error: Exception) -> ClientResult:
    return ClientResult.failure(call.id, f"{type(error).__name__}: {error}")


class Client:
    """A blocking client of ``airlockd``.

    ``socket`` defaults to ``$AIRLOCK_SOCKET``, else the user's daemon
    (``$XDG_RUNTIME_DIR/airlock/airlock.sock``; ``/run/airlock/airlock.sock`` for root), else
    the system daemon's. Use it as a context manager, or call ``close()``.
    """

    def __init__(
        self,
        socket: SocketPath = None,
        *,
        timeout: httpx.Timeout | float | None = _wire.DEFAULT_TIMEOUT,
        http_client: httpx.Client | None = None,
    ) -> None:
        self.socket_path = resolve_socket_path(socket)
        # Requests with a whole answer go through the lean connections of `_http11` (httpx
        # costs ~0.9 ms of Python per request); NDJSON streams, and every request when the
        # caller hands in an `http_client`, through httpx.
        self._lean = None if http_client else UnixHttp(self.socket_path, timeout)
        self._http = http_client or httpx.Client(
            transport=httpx.HTTPTransport(uds=self.socket_path),
            base_url=_wire.BASE_URL,
            timeout=timeout,
        )

    def close(self) -> None:
        if self._lean is not None:
            self._lean.close()
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- plumbing ------------------------------------------------------------------------

    def _send(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Answered:
        if self._lean is not None:
            return self._lean.request(method, path, json=json, params=params, headers=headers)
        try:
            return self._http.request(
                method,
                path,
                json=json,
                params=params,
                headers=_wire.request_headers(method, headers),
            )
        except httpx.TransportError as e:
            raise _wrap_transport(self.socket_path, e) from e

    def _json(self, method: str, path: str, **kw: Any) -> Any:
        return decode_json(self._send(method, path, **kw))

    def _response(self, method: str, path: str, **kw: Any) -> ExecutionResponse:
        return decode_response(self._send(method, path, **kw))

    def _events(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        require_result: bool = True,
    ) -> Iterator[ExecutionEvent]:
        """NDJSON events as they arrive, up to the ``result`` event. Leaving the iteration
        early closes the connection (for a streamed execution, that cancels it)."""
        try:
            with self._http.stream(
                method, path, json=json, params=params, headers={"accept": NDJSON}
            ) as resp:
                if not resp.is_success:
                    resp.read()
                    raise _wire.api_error(resp)
                for line in resp.iter_lines():
                    event = decode_event(line)
                    if event is None:
                        continue
                    yield event
                    if isinstance(event, ResultEvent):
                        return
        except httpx.TransportError as e:
            raise _wrap_transport(self.socket_path, e) from e
        if require_result:
            raise AirlockProtocolError("the event stream ended without a result event")

    # --- executions ----------------------------------------------------------------------

    def execute(
        self,
        code: str,
        *,
        language: str | None = None,
        timeout_ms: int | None = None,
        session: str | None = None,
        replay: str | None = None,
        client_tools: Sequence[ClientToolLike] | None = None,
        client_results: ClientResultsLike | None = None,
        determinism: DeterminismLike | None = None,
    ) -> ExecutionResponse:
        """Runs a program and waits for its response (``POST /v1/executions``).

        ``language`` is ``"typescript"`` (the daemon's default), ``"javascript"`` or
        ``"python"``. ``session="new"`` starts a session (the response's ``session`` is its id); a session
        id re-runs in it, answering calls it recorded from its journal. ``client_tools`` are
        tools the program calls as ``tools.client.<name>``: when it needs their results the
        response is ``waiting`` with ``pending_calls`` (answer with ``submit_results``).
        """
        body = execution_body(
            code,
            language=language,
            timeout_ms=timeout_ms,
            session=session,
            replay=replay,
            client_tools=client_tools,
            client_results=client_results,
            determinism=determinism,
        )
        return self._response("POST", "/v1/executions", json=body)

    def stream(
        self,
        code: str,
        *,
        language: str | None = None,
        timeout_ms: int | None = None,
        session: str | None = None,
        replay: str | None = None,
        client_tools: Sequence[ClientToolLike] | None = None,
        client_results: ClientResultsLike | None = None,
        determinism: DeterminismLike | None = None,
    ) -> Iterator[ExecutionEvent]:
        """Runs a program and yields its events as they happen (``started``, ``console``,
        ``progress``, ``tool_call_started``, ``tool_progress``, ``tool_call_finished``), the
        last a ``ResultEvent`` with the whole response. Stopping early cancels the program."""
        body = execution_body(
            code,
            language=language,
            timeout_ms=timeout_ms,
            session=session,
            replay=replay,
            client_tools=client_tools,
            client_results=client_results,
            determinism=determinism,
        )
        return self._events("POST", "/v1/executions", json=body)

    def submit(
        self,
        code: str,
        *,
        language: str | None = None,
        timeout_ms: int | None = None,
        session: str | None = None,
        replay: str | None = None,
        client_tools: Sequence[ClientToolLike] | None = None,
        client_results: ClientResultsLike | None = None,
        determinism: DeterminismLike | None = None,
    ) -> str:
        """Starts a program detached (``"wait": false``) and returns its id at once. It runs
        in a session (a new one unless ``session`` names one) whether or not anyone follows
        it: ``status``, ``events`` and ``wait`` do."""
        body = execution_body(
            code,
            language=language,
            timeout_ms=timeout_ms,
            session=session,
            replay=replay,
            client_tools=client_tools,
            client_results=client_results,
            determinism=determinism,
            wait=False,
        )
        data = self._json("POST", "/v1/executions", json=body)
        return str(data["id"])

    def status(self, execution_id: str) -> ExecutionResponse:
        """``GET /v1/executions/<id>``: a detached execution so far (``queued``/``running``
        with the output and calls so far), or the response it ended with."""
        return self._response("GET", execution_path(execution_id))

    def events(
        self, execution_id: str, after: int = 0, follow: bool = True
    ) -> Iterator[ExecutionEvent]:
        """``GET /v1/executions/<id>/events``: a detached execution's events after number
        ``after`` (each has its ``seq``), following it to its ``result`` event; with
        ``follow=False`` only those there now."""
        params: dict[str, Any] = {"after": after}
        if not follow:
            params["follow"] = "false"
        return self._events(
            "GET", execution_path(execution_id, "/events"), params=params, require_result=follow
        )

    def wait(self, execution_id: str, after: int = 0) -> ExecutionResponse:
        """Follows a detached execution to its end and returns its response."""
        for event in self.events(execution_id, after=after, follow=True):
            if isinstance(event, ResultEvent):
                return event.response
        return self.status(execution_id)  # pragma: no cover - events() requires the result

    def cancel(self, execution_id: str) -> str:
        """``DELETE /v1/executions/<id>``: stops a running execution (``"cancelling"``; it
        then ends ``cancelled``) or a waiting one at once (``"cancelled"``)."""
        data = self._json("DELETE", execution_path(execution_id))
        return str(data.get("status", ""))

    def resume(self, execution_id: str) -> ExecutionResponse:
        """``POST /v1/executions/<id>/resume``: runs an ``interrupted`` execution again in its
        session, everything recorded replayed."""
        return self._response("POST", execution_path(execution_id, "/resume"))

    def submit_results(self, execution_id: str, results: ClientResultsLike) -> ExecutionResponse:
        """``POST /v1/executions/<id>/results``: answers a waiting execution's client calls
        (``[ClientResult.success(id, value), ClientResult.failure(id, message)]``, or
        ``{call_id: value}``) and returns its next response: ``ok``, ``error``, or
        ``waiting`` again."""
        body = {"results": _wire.results_json(results)}
        return self._response("POST", execution_path(execution_id, "/results"), json=body)

    def executions(self, status: str | None = None) -> list[ExecutionRow]:
        """``GET /v1/executions?status=``: the caller's executions the journal keeps."""
        params = {"status": status} if status is not None else None
        data = self._json("GET", "/v1/executions", params=params)
        return [ExecutionRow.from_json(e) for e in data.get("executions", [])]

    # --- helpers agents need ---------------------------------------------------------------

    def run_with_retries(
        self,
        code: str,
        fix: Fix,
        *,
        max_attempts: int = 3,
        session: str | None = "new",
        **kw: Any,
    ) -> RetryResult:
        """The loop of ``docs/agent-api.md`` (Sessions): run ``code``; while it fails
        (``error`` or ``timeout``), ask ``fix(response)`` for the next program (``None`` gives
        up) and run that **in the same session**, so the tool calls that already succeeded
        are answered from the journal instead of made again. ``kw`` goes to ``execute``."""
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        attempts: list[Attempt] = []
        current = code
        while True:
            response = self.execute(current, session=session, **kw)
            attempts.append(Attempt(code=current, response=response))
            if response.session:
                session = response.session
            if response.status not in _wire.RETRY_STATUSES or len(attempts) >= max_attempts:
                break
            fixed = fix(response)
            if fixed is None:
                break
            current = fixed
        return RetryResult(response=response, attempts=attempts)

    def run_with_client_tools(
        self,
        code: str,
        handlers: Mapping[str, ToolHandler],
        *,
        client_tools: Sequence[ClientToolLike] | None = None,
        max_rounds: int = 32,
        **kw: Any,
    ) -> ExecutionResponse:
        """Runs ``code`` with client tools answered here: while the execution waits, each
        pending call goes to ``handlers[tool](args)`` (an exception fails that call) and the
        results are sent back. ``client_tools`` defaults to one declaration per handler."""
        tools = list(client_tools) if client_tools is not None else _tools_for(handlers)
        response = self.execute(code, client_tools=tools, **kw)
        rounds = 0
        while response.waiting and response.pending_calls and rounds < max_rounds:
            results: list[ClientResult] = []
            for call in response.pending_calls:
                handler = handlers.get(call.tool)
                if handler is None:
                    results.append(_no_handler(call))
                    continue
                try:
                    results.append(ClientResult.success(call.id, handler(call.args)))
                except Exception as e:  # noqa: BLE001 - the program gets it as a ToolError
                    results.append(_handler_failed(call, e))
            response = self.submit_results(response.id, results)
            rounds += 1
        return response

    # --- discovery -------------------------------------------------------------------------

    def sdk(self) -> SdkTree:
        """``GET /v1/sdk``: the TypeScript SDK's files (start with ``README.md``)."""
        return SdkTree.from_json(self._json("GET", "/v1/sdk"))

    def sdk_file(self, path: str) -> str:
        """``GET /v1/sdk/<path>``: one SDK file as text."""
        resp = self._send("GET", "/v1/sdk/" + quote(path, safe="/"))
        if not resp.is_success:
            raise _wire.api_error(resp)
        return resp.text

    def client_sdk(self, client_tools: Sequence[ClientToolLike]) -> dict[str, str]:
        """``POST /v1/sdk``: the SDK files that change for these client tools, by path."""
        body = {"client_tools": [_wire.tool_json(t) for t in client_tools]}
        data = self._json("POST", "/v1/sdk", json=body)
        return {str(k): str(v) for k, v in data.get("files", {}).items()}

    def search_tools(self, query: str, limit: int = 10) -> SearchResults:
        """``GET /v1/tools/search``: tools ranked for ``query``, each with its signature."""
        data = self._json("GET", "/v1/tools/search", params={"q": query, "limit": limit})
        return SearchResults.from_json(data)

    def tools(self) -> ToolList:
        """``GET /v1/tools``: the raw definitions of the caller's tools."""
        return ToolList.from_json(self._json("GET", "/v1/tools"))

    def health(self) -> dict[str, Any]:
        """``GET /v1/health``: status, version, policy, pool, journal (a plain dict)."""
        data = self._json("GET", "/v1/health")
        return dict(data)

    # --- approvals and sessions --------------------------------------------------------------

    def approvals(self) -> list[PendingApproval]:
        """``GET /v1/approvals``: the calls waiting for a decision that the caller may see."""
        data = self._json("GET", "/v1/approvals")
        return [PendingApproval.from_json(a) for a in data.get("approvals", [])]

    def decide(self, approval_id: str, approve: bool, *, reason: str | None = None) -> Decision:
        """``POST /v1/approvals/<id>`` with ``{"decision": "approve"|"deny", "reason"?}``."""
        path = "/v1/approvals/" + quote(approval_id, safe="")
        return Decision.from_json(
            self._json("POST", path, json=_wire.decision_body(approve, reason))
        )

    def sessions(self) -> list[SessionInfo]:
        """``GET /v1/sessions``: the caller's sessions, most recently used first."""
        data = self._json("GET", "/v1/sessions")
        return [SessionInfo.from_json(s) for s in data.get("sessions", [])]

    def session(self, session_id: str) -> SessionDetail:
        """``GET /v1/sessions/<id>``: the session, its recorded calls and executions."""
        data = self._json("GET", "/v1/sessions/" + quote(session_id, safe=""))
        return SessionDetail.from_json(data)

    def delete_session(self, session_id: str) -> None:
        """``DELETE /v1/sessions/<id>`` (``409 conflict`` while one of its executions runs)."""
        self._json("DELETE", "/v1/sessions/" + quote(session_id, safe=""))


class AsyncClient:
    """The ``Client``'s methods as coroutines (``stream`` and ``events`` are async
    iterators). Use it as an async context manager, or ``await client.aclose()``."""

    def __init__(
        self,
        socket: SocketPath = None,
        *,
        timeout: httpx.Timeout | float | None = _wire.DEFAULT_TIMEOUT,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.socket_path = resolve_socket_path(socket)
        # As in `Client`: whole answers through `_http11`, streams through httpx.
        self._lean = None if http_client else AsyncUnixHttp(self.socket_path, timeout)
        self._http = http_client or httpx.AsyncClient(
            transport=httpx.AsyncHTTPTransport(uds=self.socket_path),
            base_url=_wire.BASE_URL,
            timeout=timeout,
        )

    async def aclose(self) -> None:
        if self._lean is not None:
            await self._lean.aclose()
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # --- plumbing ------------------------------------------------------------------------

    async def _send(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Answered:
        if self._lean is not None:
            return await self._lean.request(method, path, json=json, params=params, headers=headers)
        try:
            return await self._http.request(
                method,
                path,
                json=json,
                params=params,
                headers=_wire.request_headers(method, headers),
            )
        except httpx.TransportError as e:
            raise _wrap_transport(self.socket_path, e) from e

    async def _json(self, method: str, path: str, **kw: Any) -> Any:
        return decode_json(await self._send(method, path, **kw))

    async def _response(self, method: str, path: str, **kw: Any) -> ExecutionResponse:
        return decode_response(await self._send(method, path, **kw))

    async def _events(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        require_result: bool = True,
    ) -> AsyncIterator[ExecutionEvent]:
        try:
            async with self._http.stream(
                method, path, json=json, params=params, headers={"accept": NDJSON}
            ) as resp:
                if not resp.is_success:
                    await resp.aread()
                    raise _wire.api_error(resp)
                async for line in resp.aiter_lines():
                    event = decode_event(line)
                    if event is None:
                        continue
                    yield event
                    if isinstance(event, ResultEvent):
                        return
        except httpx.TransportError as e:
            raise _wrap_transport(self.socket_path, e) from e
        if require_result:
            raise AirlockProtocolError("the event stream ended without a result event")

    # --- executions ----------------------------------------------------------------------

    async def execute(
        self,
        code: str,
        *,
        language: str | None = None,
        timeout_ms: int | None = None,
        session: str | None = None,
        replay: str | None = None,
        client_tools: Sequence[ClientToolLike] | None = None,
        client_results: ClientResultsLike | None = None,
        determinism: DeterminismLike | None = None,
    ) -> ExecutionResponse:
        """See ``Client.execute``."""
        body = execution_body(
            code,
            language=language,
            timeout_ms=timeout_ms,
            session=session,
            replay=replay,
            client_tools=client_tools,
            client_results=client_results,
            determinism=determinism,
        )
        return await self._response("POST", "/v1/executions", json=body)

    def stream(
        self,
        code: str,
        *,
        language: str | None = None,
        timeout_ms: int | None = None,
        session: str | None = None,
        replay: str | None = None,
        client_tools: Sequence[ClientToolLike] | None = None,
        client_results: ClientResultsLike | None = None,
        determinism: DeterminismLike | None = None,
    ) -> AsyncIterator[ExecutionEvent]:
        """See ``Client.stream``: ``async for event in client.stream(code)``. To stop early,
        wrap it in ``contextlib.aclosing`` so the connection (and the program) ends at once."""
        body = execution_body(
            code,
            language=language,
            timeout_ms=timeout_ms,
            session=session,
            replay=replay,
            client_tools=client_tools,
            client_results=client_results,
            determinism=determinism,
        )
        return self._events("POST", "/v1/executions", json=body)

    async def submit(
        self,
        code: str,
        *,
        language: str | None = None,
        timeout_ms: int | None = None,
        session: str | None = None,
        replay: str | None = None,
        client_tools: Sequence[ClientToolLike] | None = None,
        client_results: ClientResultsLike | None = None,
        determinism: DeterminismLike | None = None,
    ) -> str:
        """See ``Client.submit``."""
        body = execution_body(
            code,
            language=language,
            timeout_ms=timeout_ms,
            session=session,
            replay=replay,
            client_tools=client_tools,
            client_results=client_results,
            determinism=determinism,
            wait=False,
        )
        data = await self._json("POST", "/v1/executions", json=body)
        return str(data["id"])

    async def status(self, execution_id: str) -> ExecutionResponse:
        """See ``Client.status``."""
        return await self._response("GET", execution_path(execution_id))

    def events(
        self, execution_id: str, after: int = 0, follow: bool = True
    ) -> AsyncIterator[ExecutionEvent]:
        """See ``Client.events``."""
        params: dict[str, Any] = {"after": after}
        if not follow:
            params["follow"] = "false"
        return self._events(
            "GET", execution_path(execution_id, "/events"), params=params, require_result=follow
        )

    async def wait(self, execution_id: str, after: int = 0) -> ExecutionResponse:
        """See ``Client.wait``."""
        async with contextlib.aclosing(self.events(execution_id, after=after)) as events:  # type: ignore[type-var]
            async for event in events:
                if isinstance(event, ResultEvent):
                    return event.response
        return await self.status(execution_id)  # pragma: no cover

    async def cancel(self, execution_id: str) -> str:
        """See ``Client.cancel``."""
        data = await self._json("DELETE", execution_path(execution_id))
        return str(data.get("status", ""))

    async def resume(self, execution_id: str) -> ExecutionResponse:
        """See ``Client.resume``."""
        return await self._response("POST", execution_path(execution_id, "/resume"))

    async def submit_results(
        self, execution_id: str, results: ClientResultsLike
    ) -> ExecutionResponse:
        """See ``Client.submit_results``."""
        body = {"results": _wire.results_json(results)}
        return await self._response("POST", execution_path(execution_id, "/results"), json=body)

    async def executions(self, status: str | None = None) -> list[ExecutionRow]:
        """See ``Client.executions``."""
        params = {"status": status} if status is not None else None
        data = await self._json("GET", "/v1/executions", params=params)
        return [ExecutionRow.from_json(e) for e in data.get("executions", [])]

    # --- helpers agents need ---------------------------------------------------------------

    async def run_with_retries(
        self,
        code: str,
        fix: AsyncFix,
        *,
        max_attempts: int = 3,
        session: str | None = "new",
        **kw: Any,
    ) -> RetryResult:
        """See ``Client.run_with_retries``; ``fix`` may be a plain function or a coroutine
        function."""
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        attempts: list[Attempt] = []
        current = code
        while True:
            response = await self.execute(current, session=session, **kw)
            attempts.append(Attempt(code=current, response=response))
            if response.session:
                session = response.session
            if response.status not in _wire.RETRY_STATUSES or len(attempts) >= max_attempts:
                break
            fixed = fix(response)
            if inspect.isawaitable(fixed):
                fixed = await fixed
            if fixed is None:
                break
            current = fixed
        return RetryResult(response=response, attempts=attempts)

    async def run_with_client_tools(
        self,
        code: str,
        handlers: Mapping[str, AsyncToolHandler],
        *,
        client_tools: Sequence[ClientToolLike] | None = None,
        max_rounds: int = 32,
        **kw: Any,
    ) -> ExecutionResponse:
        """See ``Client.run_with_client_tools``; handlers may be coroutine functions."""
        tools = list(client_tools) if client_tools is not None else _tools_for(handlers)
        response = await self.execute(code, client_tools=tools, **kw)
        rounds = 0
        while response.waiting and response.pending_calls and rounds < max_rounds:
            results: list[ClientResult] = []
            for call in response.pending_calls:
                handler = handlers.get(call.tool)
                if handler is None:
                    results.append(_no_handler(call))
                    continue
                try:
                    value = handler(call.args)
                    if inspect.isawaitable(value):
                        value = await value
                    results.append(ClientResult.success(call.id, value))
                except Exception as e:  # noqa: BLE001 - the program gets it as a ToolError
                    results.append(_handler_failed(call, e))
            response = await self.submit_results(response.id, results)
            rounds += 1
        return response

    # --- discovery -------------------------------------------------------------------------

    async def sdk(self) -> SdkTree:
        """See ``Client.sdk``."""
        return SdkTree.from_json(await self._json("GET", "/v1/sdk"))

    async def sdk_file(self, path: str) -> str:
        """See ``Client.sdk_file``."""
        resp = await self._send("GET", "/v1/sdk/" + quote(path, safe="/"))
        if not resp.is_success:
            raise _wire.api_error(resp)
        return resp.text

    async def client_sdk(self, client_tools: Sequence[ClientToolLike]) -> dict[str, str]:
        """See ``Client.client_sdk``."""
        body = {"client_tools": [_wire.tool_json(t) for t in client_tools]}
        data = await self._json("POST", "/v1/sdk", json=body)
        return {str(k): str(v) for k, v in data.get("files", {}).items()}

    async def search_tools(self, query: str, limit: int = 10) -> SearchResults:
        """See ``Client.search_tools``."""
        data = await self._json("GET", "/v1/tools/search", params={"q": query, "limit": limit})
        return SearchResults.from_json(data)

    async def tools(self) -> ToolList:
        """See ``Client.tools``."""
        return ToolList.from_json(await self._json("GET", "/v1/tools"))

    async def health(self) -> dict[str, Any]:
        """See ``Client.health``."""
        return dict(await self._json("GET", "/v1/health"))

    # --- approvals and sessions --------------------------------------------------------------

    async def approvals(self) -> list[PendingApproval]:
        """See ``Client.approvals``."""
        data = await self._json("GET", "/v1/approvals")
        return [PendingApproval.from_json(a) for a in data.get("approvals", [])]

    async def decide(
        self, approval_id: str, approve: bool, *, reason: str | None = None
    ) -> Decision:
        """See ``Client.decide``."""
        path = "/v1/approvals/" + quote(approval_id, safe="")
        data = await self._json("POST", path, json=_wire.decision_body(approve, reason))
        return Decision.from_json(data)

    async def sessions(self) -> list[SessionInfo]:
        """See ``Client.sessions``."""
        data = await self._json("GET", "/v1/sessions")
        return [SessionInfo.from_json(s) for s in data.get("sessions", [])]

    async def session(self, session_id: str) -> SessionDetail:
        """See ``Client.session``."""
        data = await self._json("GET", "/v1/sessions/" + quote(session_id, safe=""))
        return SessionDetail.from_json(data)

    async def delete_session(self, session_id: str) -> None:
        """See ``Client.delete_session``."""
        await self._json("DELETE", "/v1/sessions/" + quote(session_id, safe=""))
