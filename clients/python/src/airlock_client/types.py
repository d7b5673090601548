"""The JSON shapes of Airlock's agent API as typed dataclasses.

Each class mirrors a struct of ``supervisor/src/agent_api.rs`` (or a route's answer) and is
built with ``from_json``, which tolerates fields the daemon adds later (they stay in ``raw``)
and fields it leaves out (they get their documented defaults). Codes (``status``,
``error.kind``, a tool error's ``code``, a call's ``outcome``) are plain strings, compared
with their wire names: ``response.error.kind == "contract"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Union

__all__ = [
    "JSON",
    "Attempt",
    "CallOutcome",
    "ClientResult",
    "ClientTool",
    "Coercion",
    "ConsoleEvent",
    "Decision",
    "Determinism",
    "ExecutionError",
    "ExecutionErrorKind",
    "ExecutionEvent",
    "ExecutionResponse",
    "ExecutionRow",
    "ExecutionStats",
    "PeerInfo",
    "PendingApproval",
    "PendingCall",
    "ProgressEvent",
    "Redaction",
    "ResultEvent",
    "RetryResult",
    "SdkFile",
    "SdkTree",
    "SearchResult",
    "SearchResults",
    "SessionCall",
    "SessionDetail",
    "SessionInfo",
    "StartedEvent",
    "Status",
    "ToolCallFinishedEvent",
    "ToolCallRecord",
    "ToolCallStartedEvent",
    "ToolDefinition",
    "ToolError",
    "ToolErrorCode",
    "ToolList",
    "ToolProgressEvent",
    "Unavailable",
    "UnknownEvent",
    "parse_event",
]

JSON = Any
"""Any JSON value as ``json.loads`` returns it."""

Status = Literal[
    "ok",
    "error",
    "timeout",
    "cancelled",
    "waiting",
    "queued",
    "running",
    # Rows the journal keeps (GET /v1/executions?status=, an interrupted execution's status).
    "interrupted",
    "resumed",
    "expired",
]
"""``ExecutionResponse.status``: the first five end an execution (``cancelled`` only when it
was cancelled); ``queued``/``running`` describe a detached one in flight."""

ExecutionErrorKind = Literal[
    "contract",
    "syntax",
    "runtime",
    "timeout",
    "memory_limit",
    "stack_overflow",
    "result_not_json",
    "output_limit",
    "tool_call_limit",
    "deadlock",
    "cancelled",
    "sandbox_violation",
    "worker_crashed",
    "internal",
]

ToolErrorCode = Literal[
    "unknown_tool",
    "denied",
    "invalid_arguments",
    "invalid_schema",
    "upstream_error",
    "result_too_large",
    "tool_call_limit",
    "rate_limited",
    "server_unavailable",
    "timeout",
    "secret_in_result",
    "journal_unavailable",
    "flow_denied",
    "internal",
]

CallOutcome = Literal["ok", "error", "pending"]


def _opt_int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _opt_float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class ExecutionError:
    """Why an execution failed (``response.error``), with where in the submitted code.

    ``excerpt`` shows the code around ``line`` (the line marked ``>``, the column ``^``);
    ``hint`` says what to change; ``explanation`` (a ``TypeError`` about a tool's value) says
    where the value came from and what it really is.
    """

    kind: str
    message: str
    name: str | None = None
    line: int | None = None
    column: int | None = None
    stack: str | None = None
    excerpt: str | None = None
    hint: str | None = None
    explanation: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ExecutionError:
        return cls(
            kind=str(data.get("kind", "internal")),
            message=str(data.get("message", "")),
            name=_opt_str(data.get("name")),
            line=_opt_int(data.get("line")),
            column=_opt_int(data.get("column")),
            stack=_opt_str(data.get("stack")),
            excerpt=_opt_str(data.get("excerpt")),
            hint=_opt_str(data.get("hint")),
            explanation=_opt_str(data.get("explanation")),
            raw=dict(data),
        )

    def describe(self) -> str:
        """The error as a model should read it: kind, message, position, explanation, hint
        and excerpt, one per line (the parts the daemon gave)."""
        where = ""
        if self.line is not None:
            where = f" at line {self.line}" + (f", column {self.column}" if self.column else "")
        lines = [f"{self.kind} error{where}: {self.message}"]
        if self.explanation:
            lines.append(f"explanation: {self.explanation}")
        if self.hint:
            lines.append(f"hint: {self.hint}")
        if self.excerpt:
            lines.append("code:\n" + self.excerpt.rstrip("\n"))
        return "\n".join(lines)


@dataclass(frozen=True)
class ToolError:
    """A failed tool call as the trace records it (a ``ToolError`` in the program)."""

    code: str
    message: str
    hint: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ToolError:
        return cls(
            code=str(data.get("code", "internal")),
            message=str(data.get("message", "")),
            hint=_opt_str(data.get("hint")),
        )


@dataclass(frozen=True)
class Redaction:
    """One replacement made by the secret scanner: the rule and where, never the value."""

    rule: str
    place: str = "result"
    pointer: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Redaction:
        return cls(
            rule=str(data.get("rule", "")),
            place=str(data.get("place", "result")),
            pointer=_opt_str(data.get("pointer")),
        )


@dataclass(frozen=True)
class Coercion:
    """One value the daemon coerced to a tool's schema (the source's ``coerce = "safe"``).

    ``place`` is ``"arguments"`` or ``"result"``; ``pointer`` a JSON Pointer within it;
    ``to`` is missing (``has_to`` false) when the property was left out; ``rule`` names the
    rule (``number_from_string``, ``enum_case``, ...).
    """

    place: str
    pointer: str
    from_: JSON
    to: JSON = None
    has_to: bool = False
    rule: str = ""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Coercion:
        return cls(
            place=str(data.get("place", "arguments")),
            pointer=str(data.get("pointer", "")),
            from_=data.get("from"),
            to=data.get("to"),
            has_to="to" in data,
            rule=str(data.get("rule", "")),
        )


@dataclass(frozen=True)
class ToolCallRecord:
    """One tool call in an execution's trace (``response.tool_calls``).

    ``result`` is only there when the program failed (shortened; ``result_truncated`` says
    so); ``replayed`` means the session's journal answered it.
    """

    id: int
    tool: str
    args: JSON
    outcome: str
    duration_ms: float = 0.0
    started_ms: float = 0.0
    error: ToolError | None = None
    result: JSON = None
    has_result: bool = False
    result_truncated: bool = False
    replayed: bool = False
    divergence: str | None = None
    redactions: list[Redaction] = field(default_factory=list)
    coercions: list[Coercion] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ToolCallRecord:
        error = data.get("error")
        return cls(
            id=int(data.get("id", 0)),
            tool=str(data.get("tool", "")),
            args=data.get("args"),
            outcome=str(data.get("outcome", "")),
            duration_ms=_opt_float(data.get("duration_ms")) or 0.0,
            started_ms=_opt_float(data.get("started_ms")) or 0.0,
            error=ToolError.from_json(error) if isinstance(error, dict) else None,
            result=data.get("result"),
            has_result="result" in data,
            result_truncated=bool(data.get("result_truncated", False)),
            replayed=bool(data.get("replayed", False)),
            divergence=_opt_str(data.get("divergence")),
            redactions=[Redaction.from_json(r) for r in _list(data.get("redactions"))],
            coercions=[Coercion.from_json(c) for c in _list(data.get("coercions"))],
        )


@dataclass(frozen=True)
class PendingCall:
    """A client tool call a waiting execution needs answered (``response.pending_calls``)."""

    id: int
    tool: str
    args: JSON

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PendingCall:
        return cls(id=int(data.get("id", 0)), tool=str(data.get("tool", "")), args=data.get("args"))


@dataclass(frozen=True)
class PendingApproval:
    """A call that waits for a person's decision (``response.pending_approvals``,
    ``GET /v1/approvals``)."""

    id: str
    execution: str
    principal: str
    call: int
    tool: str
    args: JSON
    requested_ms: int = 0
    expires_ms: int = 0
    line: int | None = None
    excerpt: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PendingApproval:
        return cls(
            id=str(data.get("id", "")),
            execution=str(data.get("execution", "")),
            principal=str(data.get("principal", "")),
            call=int(data.get("call", 0)),
            tool=str(data.get("tool", "")),
            args=data.get("args"),
            requested_ms=_opt_int(data.get("requested_ms")) or 0,
            expires_ms=_opt_int(data.get("expires_ms")) or 0,
            line=_opt_int(data.get("line")),
            excerpt=_opt_str(data.get("excerpt")),
        )


@dataclass(frozen=True)
class Determinism:
    """The clock and seed a waiting execution ran with (the stateless form sends it back)."""

    clock_ms: int
    seed: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Determinism:
        return cls(clock_ms=int(data.get("clock_ms", 0)), seed=str(data.get("seed", "")))

    def to_json(self) -> dict[str, Any]:
        return {"clock_ms": self.clock_ms, "seed": self.seed}


@dataclass(frozen=True)
class ExecutionStats:
    queue_ms: float = 0.0
    spawn_ms: float = 0.0
    run_ms: float = 0.0
    total_ms: float = 0.0
    worker_from_pool: bool = False
    compile_us: int | None = None
    engine_run_us: int | None = None
    heap_used_bytes: int | None = None
    peak_rss_bytes: int | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ExecutionStats:
        return cls(
            queue_ms=_opt_float(data.get("queue_ms")) or 0.0,
            spawn_ms=_opt_float(data.get("spawn_ms")) or 0.0,
            run_ms=_opt_float(data.get("run_ms")) or 0.0,
            total_ms=_opt_float(data.get("total_ms")) or 0.0,
            worker_from_pool=bool(data.get("worker_from_pool", False)),
            compile_us=_opt_int(data.get("compile_us")),
            engine_run_us=_opt_int(data.get("engine_run_us")),
            heap_used_bytes=_opt_int(data.get("heap_used_bytes")),
            peak_rss_bytes=_opt_int(data.get("peak_rss_bytes")),
        )


@dataclass(frozen=True)
class PeerInfo:
    """Who the daemon saw on the socket (from the kernel)."""

    uid: int
    gid: int
    pid: int | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PeerInfo:
        return cls(
            uid=int(data.get("uid", -1)),
            gid=int(data.get("gid", -1)),
            pid=_opt_int(data.get("pid")),
        )


@dataclass(frozen=True)
class ExecutionResponse:
    """The answer to an execution: ``POST /v1/executions``, the ``result`` event of a stream,
    ``/results``, ``/resume``, and ``GET /v1/executions/<id>``.

    ``GET /v1/executions/<id>`` may answer with less than a whole response (an execution
    another connection waits for is only ``{id, status}``; one the journal knows by its row
    has the row's fields): missing fields get their defaults and ``raw`` has what came.
    """

    id: str
    status: str
    result: JSON = None
    stdout: str = ""
    stderr: str = ""
    error: ExecutionError | None = None
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    session: str | None = None
    replayed_calls: int = 0
    resumed_from: str | None = None
    pending_calls: list[PendingCall] = field(default_factory=list)
    pending_approvals: list[PendingApproval] = field(default_factory=list)
    determinism: Determinism | None = None
    stats: ExecutionStats = field(default_factory=ExecutionStats)
    peer: PeerInfo | None = None
    principal: str | None = None
    redactions: list[Redaction] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ExecutionResponse:
        error = data.get("error")
        determinism = data.get("determinism")
        peer = data.get("peer")
        return cls(
            id=str(data.get("id", "")),
            status=str(data.get("status", "")),
            result=data.get("result"),
            stdout=str(data.get("stdout") or ""),
            stderr=str(data.get("stderr") or ""),
            error=ExecutionError.from_json(error) if isinstance(error, dict) else None,
            tool_calls=[ToolCallRecord.from_json(c) for c in _list(data.get("tool_calls"))],
            session=_opt_str(data.get("session")),
            replayed_calls=_opt_int(data.get("replayed_calls")) or 0,
            resumed_from=_opt_str(data.get("resumed_from")),
            pending_calls=[PendingCall.from_json(c) for c in _list(data.get("pending_calls"))],
            pending_approvals=[
                PendingApproval.from_json(a) for a in _list(data.get("pending_approvals"))
            ],
            determinism=Determinism.from_json(determinism)
            if isinstance(determinism, dict)
            else None,
            stats=ExecutionStats.from_json(_dict(data.get("stats"))),
            peer=PeerInfo.from_json(peer) if isinstance(peer, dict) else None,
            principal=_opt_str(data.get("principal")),
            redactions=[Redaction.from_json(r) for r in _list(data.get("redactions"))],
            warnings=[str(w) for w in _list(data.get("warnings"))],
            raw=dict(data),
        )

    @property
    def ok(self) -> bool:
        """The program ran to its end (``status == "ok"``)."""
        return self.status == "ok"

    @property
    def failed(self) -> bool:
        """The program ended without a result: ``error``, ``timeout`` or ``cancelled``."""
        return self.status in ("error", "timeout", "cancelled")

    @property
    def waiting(self) -> bool:
        """The program waits for client tool results or approvals."""
        return self.status == "waiting"

    @property
    def finished(self) -> bool:
        """Nothing more will happen to it on its own (not queued, running or waiting)."""
        return self.status not in ("queued", "running", "waiting")


# --- Requests ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClientTool:
    """A tool the agent declares in its request and answers itself: the program calls it as
    ``tools.client.<name>(args)``."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"name": self.name, "description": self.description}
        if self.input_schema is not None:
            body["input_schema"] = self.input_schema
        return body


@dataclass(frozen=True)
class ClientResult:
    """The answer to one pending client call: ``ClientResult.success(id, value)`` or
    ``ClientResult.failure(id, message)`` (a ``ToolError`` in the program)."""

    id: int
    value: JSON = None
    error: str | None = None

    @classmethod
    def success(cls, call_id: int, value: JSON) -> ClientResult:
        return cls(id=call_id, value=value)

    @classmethod
    def failure(cls, call_id: int, message: str) -> ClientResult:
        return cls(id=call_id, error=message)

    def to_json(self) -> dict[str, Any]:
        if self.error is not None:
            return {"id": self.id, "error": {"message": self.error}}
        return {"id": self.id, "ok": self.value}


# --- Events --------------------------------------------------------------------------------


@dataclass(frozen=True)
class StartedEvent:
    """The first event: the execution's id (what ``cancel`` takes), and its session when it
    runs in one (what a client cut off from the stream runs again in)."""

    id: str
    seq: int | None = None
    session: str | None = None
    event: Literal["started"] = "started"


@dataclass(frozen=True)
class ConsoleEvent:
    """One ``console.*`` call: ``stream`` is ``stdout`` or ``stderr``, ``level`` the method."""

    stream: str
    level: str
    text: str
    seq: int | None = None
    event: Literal["console"] = "console"


@dataclass(frozen=True)
class ProgressEvent:
    """The program called ``progress(value)``."""

    value: JSON
    seq: int | None = None
    event: Literal["progress"] = "progress"


@dataclass(frozen=True)
class ToolCallStartedEvent:
    id: int
    tool: str
    seq: int | None = None
    event: Literal["tool_call_started"] = "tool_call_started"


@dataclass(frozen=True)
class ToolProgressEvent:
    """A progress notification of a tool call in flight (MCP ``notifications/progress``)."""

    id: int
    tool: str
    progress: float
    total: float | None = None
    message: str | None = None
    seq: int | None = None
    event: Literal["tool_progress"] = "tool_progress"


@dataclass(frozen=True)
class ToolCallFinishedEvent:
    id: int
    tool: str
    outcome: str
    duration_ms: float
    seq: int | None = None
    event: Literal["tool_call_finished"] = "tool_call_finished"


@dataclass(frozen=True)
class ResultEvent:
    """The last event: the whole response."""

    response: ExecutionResponse
    seq: int | None = None
    event: Literal["result"] = "result"


@dataclass(frozen=True)
class UnknownEvent:
    """An event this version of the client does not know (kept whole in ``data``)."""

    event: str
    data: dict[str, Any]
    seq: int | None = None


ExecutionEvent = Union[
    StartedEvent,
    ConsoleEvent,
    ProgressEvent,
    ToolCallStartedEvent,
    ToolProgressEvent,
    ToolCallFinishedEvent,
    ResultEvent,
    UnknownEvent,
]


def parse_event(data: Mapping[str, Any]) -> ExecutionEvent:
    """One NDJSON line (already decoded) as a typed event."""
    kind = data.get("event")
    seq = _opt_int(data.get("seq"))
    if kind == "started":
        session = data.get("session")
        return StartedEvent(
            id=str(data.get("id", "")),
            seq=seq,
            session=session if isinstance(session, str) else None,
        )
    if kind == "console":
        return ConsoleEvent(
            stream=str(data.get("stream", "stdout")),
            level=str(data.get("level", "log")),
            text=str(data.get("text", "")),
            seq=seq,
        )
    if kind == "progress":
        return ProgressEvent(value=data.get("value"), seq=seq)
    if kind == "tool_call_started":
        return ToolCallStartedEvent(
            id=int(data.get("id", 0)), tool=str(data.get("tool", "")), seq=seq
        )
    if kind == "tool_progress":
        return ToolProgressEvent(
            id=int(data.get("id", 0)),
            tool=str(data.get("tool", "")),
            progress=_opt_float(data.get("progress")) or 0.0,
            total=_opt_float(data.get("total")),
            message=_opt_str(data.get("message")),
            seq=seq,
        )
    if kind == "tool_call_finished":
        return ToolCallFinishedEvent(
            id=int(data.get("id", 0)),
            tool=str(data.get("tool", "")),
            outcome=str(data.get("outcome", "")),
            duration_ms=_opt_float(data.get("duration_ms")) or 0.0,
            seq=seq,
        )
    if kind == "result":
        body = {k: v for k, v in data.items() if k not in ("event", "seq")}
        return ResultEvent(response=ExecutionResponse.from_json(body), seq=seq)
    return UnknownEvent(event=str(kind), data=dict(data), seq=seq)


# --- Discovery, sessions, approvals --------------------------------------------------------


@dataclass(frozen=True)
class SdkFile:
    path: str
    bytes: int


@dataclass(frozen=True)
class Unavailable:
    """A source whose tools could not be listed (a server that does not start)."""

    namespace: str
    error: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Unavailable:
        return cls(namespace=str(data.get("namespace", "")), error=str(data.get("error", "")))


@dataclass(frozen=True)
class SdkTree:
    """``GET /v1/sdk``: the SDK's files, how many tools it describes, and the sources that
    could not be listed."""

    files: list[SdkFile]
    tools: int
    unavailable: list[Unavailable] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SdkTree:
        return cls(
            files=[
                SdkFile(path=str(f.get("path", "")), bytes=int(f.get("bytes", 0)))
                for f in _list(data.get("files"))
            ],
            tools=int(data.get("tools", 0)),
            unavailable=[Unavailable.from_json(u) for u in _list(data.get("unavailable"))],
        )

    @property
    def paths(self) -> list[str]:
        return [f.path for f in self.files]


@dataclass(frozen=True)
class SearchResult:
    """One hit of ``GET /v1/tools/search``: ``signature`` is the call as the program writes
    it, ending in the result type."""

    tool: str
    signature: str
    summary: str
    file: str
    score: float

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SearchResult:
        return cls(
            tool=str(data.get("tool", "")),
            signature=str(data.get("signature", "")),
            summary=str(data.get("summary", "")),
            file=str(data.get("file", "")),
            score=_opt_float(data.get("score")) or 0.0,
        )


@dataclass(frozen=True)
class SearchResults:
    query: str
    results: list[SearchResult]
    unavailable: list[Unavailable] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SearchResults:
        return cls(
            query=str(data.get("query", "")),
            results=[SearchResult.from_json(r) for r in _list(data.get("results"))],
            unavailable=[Unavailable.from_json(u) for u in _list(data.get("unavailable"))],
        )


@dataclass(frozen=True)
class ToolDefinition:
    """A raw tool definition (``GET /v1/tools``), as the SDK is built from it."""

    namespace: str
    name: str
    description: str
    input_schema: JSON

    @property
    def qualified_name(self) -> str:
        """``<namespace>.<name>``, as the trace names calls."""
        return f"{self.namespace}.{self.name}"


@dataclass(frozen=True)
class ToolList:
    tools: list[ToolDefinition]
    unavailable: list[Unavailable] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ToolList:
        return cls(
            tools=[
                ToolDefinition(
                    namespace=str(t.get("namespace", "")),
                    name=str(t.get("name", "")),
                    description=str(t.get("description") or ""),
                    input_schema=t.get("input_schema"),
                )
                for t in _list(data.get("tools"))
            ],
            unavailable=[Unavailable.from_json(u) for u in _list(data.get("unavailable"))],
        )

    def find(self, namespace: str, name: str) -> ToolDefinition | None:
        for tool in self.tools:
            if tool.namespace == namespace and tool.name == name:
                return tool
        return None


@dataclass(frozen=True)
class Decision:
    """The answer to ``POST /v1/approvals/<id>``: the execution's ``status`` now is
    ``running`` (it goes on), ``waiting`` (something else still holds it) or ``cancelled``."""

    id: str
    decision: str
    execution: str
    status: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Decision:
        return cls(
            id=str(data.get("id", "")),
            decision=str(data.get("decision", "")),
            execution=str(data.get("execution", "")),
            status=str(data.get("status", "")),
        )


@dataclass(frozen=True)
class SessionInfo:
    """One of the caller's sessions (``GET /v1/sessions``); times in ms since the epoch."""

    id: str
    created_ms: int
    used_ms: int
    bytes: int
    calls: int
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SessionInfo:
        return cls(
            id=str(data.get("id", "")),
            created_ms=_opt_int(data.get("created_ms")) or 0,
            used_ms=_opt_int(data.get("used_ms")) or 0,
            bytes=_opt_int(data.get("bytes")) or 0,
            calls=_opt_int(data.get("calls")) or 0,
            raw=dict(data),
        )


@dataclass(frozen=True)
class SessionCall:
    """A call a session's journal recorded: ``state`` is ``sent``, ``ok`` or ``failed``."""

    tool: str
    args_hash: str
    occurrence: int
    state: str
    bytes: int
    sends: int
    execution: str | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SessionCall:
        return cls(
            tool=str(data.get("tool", "")),
            args_hash=str(data.get("args_hash", "")),
            occurrence=_opt_int(data.get("occurrence")) or 0,
            state=str(data.get("state", "")),
            bytes=_opt_int(data.get("bytes")) or 0,
            sends=_opt_int(data.get("sends")) or 0,
            execution=_opt_str(data.get("execution")),
        )


@dataclass(frozen=True)
class ExecutionRow:
    """An execution the journal keeps (``GET /v1/executions``, a session's ``executions``)."""

    id: str
    session: str
    status: str
    language: str = "typescript"
    replay: str = "all"
    started_ms: int = 0
    finished_ms: int | None = None
    replayed_calls: int = 0
    live_calls: int = 0
    resumed_by: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ExecutionRow:
        return cls(
            id=str(data.get("id", "")),
            session=str(data.get("session", "")),
            status=str(data.get("status", "")),
            language=str(data.get("language", "typescript")),
            replay=str(data.get("replay", "all")),
            started_ms=_opt_int(data.get("started_ms")) or 0,
            finished_ms=_opt_int(data.get("finished_ms")),
            replayed_calls=_opt_int(data.get("replayed_calls")) or 0,
            live_calls=_opt_int(data.get("live_calls")) or 0,
            resumed_by=_opt_str(data.get("resumed_by")),
            raw=dict(data),
        )


@dataclass(frozen=True)
class SessionDetail:
    """``GET /v1/sessions/<id>``: the session, its recorded calls and its executions."""

    session: SessionInfo
    calls: list[SessionCall]
    executions: list[ExecutionRow]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SessionDetail:
        return cls(
            session=SessionInfo.from_json(_dict(data.get("session"))),
            calls=[SessionCall.from_json(c) for c in _list(data.get("calls"))],
            executions=[ExecutionRow.from_json(e) for e in _list(data.get("executions"))],
        )


# --- The retry loop ------------------------------------------------------------------------


@dataclass(frozen=True)
class Attempt:
    """One execution of the retry loop: the code sent and what it gave."""

    code: str
    response: ExecutionResponse


@dataclass(frozen=True)
class RetryResult:
    """What ``run_with_retries`` ends with: the last response and every attempt in order."""

    response: ExecutionResponse
    attempts: list[Attempt]

    @property
    def ok(self) -> bool:
        return self.response.ok

    @property
    def session(self) -> str | None:
        """The session the attempts ran in (the first response's)."""
        for attempt in self.attempts:
            if attempt.response.session:
                return attempt.response.session
        return None
