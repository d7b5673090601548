"""An agent loop with code mode as the model's only tool, over Airlock's Python client.

The model speaks the OpenAI-compatible chat-completions shape: it gets ``messages`` and one
tool, ``execute``, whose argument is a TypeScript program. Each program runs in airlockd's
sandbox, where it calls the real tools as ``tools.<namespace>.<tool>(args)``; the answer goes
back to the model as the ``role: "tool"`` message: the result and console output, or the
error with its line, an excerpt of the code and the daemon's hint, which is usually enough to
fix the program on the next turn. Every program of a run shares one Airlock session, so a
corrected program does not repeat the tool calls that already succeeded.

Run it against any OpenAI-compatible endpoint (OpenAI, vLLM, llama.cpp's server, Ollama...):

    AIRLOCK_SOCKET=/run/airlock/airlock.sock \\
    OPENAI_BASE_URL=https://api.openai.com/v1 OPENAI_API_KEY=sk-... MODEL=gpt-4.1-mini \\
    python3 examples/agent_loop.py "What is 17 + 25? Use the tools."

``examples/test_agent_loop.py`` drives the same loop with a scripted model (no network).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

# Run from a checkout without installing the client.
_SRC = Path(__file__).resolve().parents[1] / "clients" / "python" / "src"
if _SRC.is_dir() and str(_SRC) not in sys.path:
    sys.path.insert(0, str(_SRC))

import httpx
from airlock_client import AirlockApiError, Client, ExecutionResponse

Message = dict[str, Any]

EXECUTE_DESCRIPTION = """\
Run a TypeScript program in Airlock's sandbox and get back its result. This is your only \
tool: do the work in code, in as few programs as you can.

- The program's value is its last expression (or a top-level `return`); top-level `await` works.
- Call tools as `await tools.<namespace>.<tool>({ ...args })`: each takes one object and \
returns a promise. Run independent calls at once with `await Promise.all([...])`.
- A failed call throws a `ToolError` (`code`, `message`, `hint`). `console.log` output comes \
back to you. There is no fetch, file system, import, process or timer: only `tools`.
- To find tools: `await tools.airlock.search_tools({ query: "words" })` returns matching \
tools with their call signatures, and `await tools.airlock.read_sdk({ path: \
"servers/<namespace>/<tool>.ts" })` returns a tool's input and output types. If those are not \
available, use the tools listed in the instructions.
- If the program fails you get the error with its line, an excerpt of your code and a hint \
saying what to change. Fix the program and run it again: calls that already succeeded are \
answered from the session's record, not made twice."""

EXECUTE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "execute",
        "description": EXECUTE_DESCRIPTION,
        "parameters": {
            "type": "object",
            "properties": {
                "code": {
                    "type": "string",
                    "description": "The TypeScript program. Its last expression is the result.",
                }
            },
            "required": ["code"],
            "additionalProperties": False,
        },
    },
}
"""The model's one tool, in the chat-completions ``tools`` shape."""


class Model(Protocol):
    """A chat model: given the conversation and the tools, the next assistant message
    (``{"role": "assistant", "content": ..., "tool_calls": [...]}``)."""

    def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> Message: ...


class OpenAICompatibleModel:
    """``POST {base_url}/chat/completions`` with a bearer key, as OpenAI and compatible
    servers take it."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        model: str,
        *,
        timeout: float = 120.0,
        http_client: httpx.Client | None = None,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.model = model
        self.extra_body = extra_body or {}
        self._http = http_client or httpx.Client(timeout=timeout)

    def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> Message:
        body = {"model": self.model, "messages": messages, "tools": tools, **self.extra_body}
        resp = self._http.post(
            f"{self.base_url}/chat/completions",
            headers={"Authorization": f"Bearer {self.api_key}"},
            json=body,
        )
        if resp.status_code >= 400:
            raise RuntimeError(f"{self.base_url} answered {resp.status_code}: {resp.text[:500]}")
        message = resp.json()["choices"][0]["message"]
        return dict(message)


def tool_message_content(response: ExecutionResponse, *, max_chars: int = 8000) -> str:
    """What the model reads of an execution: JSON with the status and either the result and
    console output, or the error (kind, message, line, column, explanation, hint, excerpt)
    and what the program's tool calls did."""
    out: dict[str, Any] = {"status": response.status}
    if response.ok:
        out["result"] = response.result
    if response.stdout:
        out["stdout"] = response.stdout
    if response.stderr:
        out["stderr"] = response.stderr
    if response.error is not None:
        e = response.error
        out["error"] = {
            k: v
            for k, v in {
                "kind": e.kind,
                "message": e.message,
                "line": e.line,
                "column": e.column,
                "explanation": e.explanation,
                "hint": e.hint,
                "excerpt": e.excerpt,
            }.items()
            if v is not None
        }
    if response.failed and response.tool_calls:
        calls = []
        for c in response.tool_calls:
            call: dict[str, Any] = {"tool": c.tool, "args": c.args, "outcome": c.outcome}
            if c.error is not None:
                call["error"] = {
                    "code": c.error.code,
                    "message": c.error.message,
                    "hint": c.error.hint,
                }
            elif c.has_result:
                call["result"] = c.result
            calls.append(call)
        out["tool_calls"] = calls
    if response.waiting:
        out["waiting_for"] = [
            {"approval": a.id, "tool": a.tool} for a in response.pending_approvals
        ] or [{"client_call": p.id, "tool": p.tool} for p in response.pending_calls]
    if response.warnings:
        out["warnings"] = response.warnings
    text = json.dumps(out, ensure_ascii=False, indent=1)
    if len(text) > max_chars:
        text = text[: max_chars - 40] + "\n… (answer cut to fit the context)"
    return text


def system_prompt(client: Client, task: str, *, search_limit: int = 8) -> str:
    """The system message: the model's role, the SDK's entry point (``README.md``), and the
    tools Airlock's search ranks first for the task (``GET /v1/tools/search``), so the model
    starts with the right signatures. Code mode itself is taught by the tool's description."""
    parts = [
        (
            "You are an agent that works by writing TypeScript programs and running them with the "
            "`execute` tool. Answer the user in plain text once you have what you need."
        )
    ]
    try:
        parts.append("Airlock's SDK entry point:\n\n" + client.sdk_file("README.md"))
    except AirlockApiError:
        pass
    try:
        hits = client.search_tools(task, limit=search_limit).results
    except AirlockApiError:
        hits = []
    if hits:
        parts.append(
            "Tools that may fit the task (signature: summary):\n"
            + "\n".join(f"- {h.signature}: {h.summary}" for h in hits)
        )
    return "\n\n".join(parts)


@dataclass
class AgentResult:
    """How a run ended: the final ``answer`` (``None`` when ``max_turns`` ran out), the whole
    conversation, and every execution in order."""

    answer: str | None
    messages: list[Message]
    executions: list[ExecutionResponse] = field(default_factory=list)
    turns: int = 0
    session: str | None = None


def run_agent(
    model: Model,
    client: Client,
    task: str,
    max_turns: int = 8,
    *,
    session: str | None = "new",
    timeout_ms: int | None = None,
    instructions: str | None = None,
) -> AgentResult:
    """The loop: ask the model; run each ``execute`` call it makes in Airlock (all in one
    session); send each outcome back as a ``tool`` message; stop when it answers without a
    tool call, or after ``max_turns`` model calls."""
    messages: list[Message] = [
        {
            "role": "system",
            "content": instructions if instructions is not None else system_prompt(client, task),
        },
        {"role": "user", "content": task},
    ]
    result = AgentResult(answer=None, messages=messages, session=None)
    for _ in range(max_turns):
        reply = model.complete(messages, [EXECUTE_TOOL])
        result.turns += 1
        assistant: Message = {"role": "assistant", "content": reply.get("content")}
        tool_calls = reply.get("tool_calls") or []
        if tool_calls:
            assistant["tool_calls"] = tool_calls
        messages.append(assistant)
        if not tool_calls:
            result.answer = reply.get("content") or ""
            return result
        for call in tool_calls:
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call.get("id", ""),
                    "content": _run_call(client, call, result, session, timeout_ms),
                }
            )
    return result


def _run_call(
    client: Client,
    call: dict[str, Any],
    result: AgentResult,
    session: str | None,
    timeout_ms: int | None,
) -> str:
    function = call.get("function") or {}
    if function.get("name") != "execute":
        return json.dumps(
            {
                "status": "error",
                "error": {
                    "message": f"there is no tool `{function.get('name')}`; the only tool is `execute`"
                },
            }
        )
    try:
        args = json.loads(function.get("arguments") or "{}")
        code = args["code"]
        if not isinstance(code, str):
            raise TypeError("code must be a string")
    except (ValueError, KeyError, TypeError) as e:
        return json.dumps(
            {
                "status": "error",
                "error": {"message": f'the arguments must be JSON {{"code": "<program>"}}: {e}'},
            }
        )
    try:
        response = client.execute(code, session=result.session or session, timeout_ms=timeout_ms)
    except AirlockApiError as e:
        return json.dumps(
            {"status": "refused", "error": {"code": e.code, "message": e.message, "hint": e.hint}}
        )
    if response.session:
        result.session = response.session
    result.executions.append(response)
    return tool_message_content(response)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    model = OpenAICompatibleModel(
        base_url=os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1"),
        api_key=os.environ.get("OPENAI_API_KEY", ""),
        model=os.environ.get("MODEL", "gpt-4.1-mini"),
    )
    with Client() as client:
        outcome = run_agent(model, client, " ".join(argv[1:]))
    for e in outcome.executions:
        print(f"[{e.id} {e.status}] {len(e.tool_calls)} tool call(s)", file=sys.stderr)
    print(outcome.answer if outcome.answer is not None else "(no answer within max_turns)")
    return 0 if outcome.answer is not None else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
