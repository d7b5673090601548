"""The agent loop with a scripted model (no network) against a real airlockd.

The model writes a program with a typical mistake (a wrong argument name), reads Airlock's
error from the tool message, takes the right property name from the hint, and fixes its own
program with it; nothing of the fix is written in advance.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from agent_loop import EXECUTE_TOOL, OpenAICompatibleModel, run_agent
from airlock_client import Client


@pytest.fixture
def client() -> Iterator[Client]:
    with Client(os.environ["AIRLOCK_SOCKET"]) as c:
        yield c


def _literal_keys(text: str) -> list[str]:
    """The property names of an object literal's text (`{ a: 1, b: "x" }` → a, b)."""
    return re.findall(r"([A-Za-z_$][\w$]*)\??\s*:", text)


class ScriptedModel:
    """Plays a model: first a program with a mistake, then the fix read from the error, then
    the answer from the result."""

    def __init__(self, first_program: str) -> None:
        self.first_program = first_program
        self.programs: list[str] = []
        self.read_hints: list[str] = []
        self.renamed: list[tuple[str, str]] = []
        self.tools_seen: list[Any] = []

    def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> dict[str, Any]:
        self.tools_seen = tools
        last = messages[-1]
        if last["role"] == "user":
            return self._execute(self.first_program)
        assert last["role"] == "tool"
        answer = json.loads(last["content"])
        if answer["status"] == "ok":
            return {"role": "assistant", "content": f"The tool answered: {answer['result']}"}
        return self._execute(self._fix(self.programs[-1], answer["error"]))

    def _fix(self, program: str, error: dict[str, Any]) -> str:
        """Renames the argument the hint does not know to the one it expects, on the line the
        error points at."""
        hint = error["hint"]
        self.read_hints.append(hint)
        m = re.search(r"tools\.\w+\.\w+\(\{ (.*) \}\)", hint)
        assert m is not None, f"no signature in the hint: {hint!r}"
        expected = _literal_keys("{ " + m.group(1) + " }")
        lines = program.split("\n")
        index = error["line"] - 1
        call = lines[index][error["column"] - 1 :]
        used = _literal_keys(call[call.index("{") : call.index("}") + 1])
        wrong = [k for k in used if k not in expected]
        missing = [k for k in expected if k not in used]
        assert len(wrong) == 1 and len(missing) == 1, (used, expected)
        self.renamed.append((wrong[0], missing[0]))
        lines[index] = re.sub(
            rf"\b{re.escape(wrong[0])}(\s*:)", rf"{missing[0]}\1", lines[index], count=1
        )
        return "\n".join(lines)

    def _execute(self, code: str) -> dict[str, Any]:
        self.programs.append(code)
        n = len(self.programs)
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{n}",
                    "type": "function",
                    "function": {"name": "execute", "arguments": json.dumps({"code": code})},
                }
            ],
        }


@pytest.mark.parametrize(
    ("first_program", "renamed", "answer"),
    [
        (
            'const said = await tools.everything.echo({ text: "code mode works" });\nsaid',
            ("text", "message"),
            "Echo: code mode works",
        ),
        (
            "const before = 1;\nconst sum = await tools.everything.get_sum({ first: 19, b: 23 });\nsum",
            ("first", "a"),
            "The sum of 19 and 23 is 42.",
        ),
    ],
)
def test_agent_fixes_its_program_from_airlocks_error(
    client: Client, first_program: str, renamed: tuple[str, str], answer: str
) -> None:
    model = ScriptedModel(first_program)
    outcome = run_agent(
        model, client, "Use the everything tools and tell me what they say.", max_turns=5
    )

    assert outcome.answer == f"The tool answered: {answer}"
    assert outcome.turns == 3
    assert [m["role"] for m in outcome.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert model.tools_seen == [EXECUTE_TOOL]

    # The first program failed before running, and its tool message carried the hint.
    first, second = outcome.executions
    assert first.status == "error"
    assert first.error is not None and first.error.kind == "contract"
    first_tool_message = json.loads(outcome.messages[3]["content"])
    assert outcome.messages[3]["tool_call_id"] == outcome.messages[2]["tool_calls"][0]["id"]
    assert first_tool_message["error"]["hint"] == first.error.hint
    assert first_tool_message["error"]["excerpt"] == first.error.excerpt
    assert model.read_hints == [first.error.hint]

    # The second program is the first with the one property the hint named.
    assert model.renamed == [renamed]
    wrong, right = renamed
    assert first.error.hint is not None and f"{right}:" in first.error.hint
    assert model.programs[0] == first_program
    assert model.programs[1] == first_program.replace(f"{wrong}:", f"{right}:", 1)
    assert second.status == "ok"
    assert second.result == answer
    assert json.loads(outcome.messages[5]["content"]) == {"status": "ok", "result": answer}

    # Both ran in the run's one session.
    assert outcome.session is not None and first.session == second.session == outcome.session
    client.delete_session(outcome.session)


def test_system_prompt_lists_the_tools_search_found(client: Client) -> None:
    model = ScriptedModel("1")
    outcome = run_agent(model, client, "add two numbers", max_turns=2)
    system = outcome.messages[0]["content"]
    assert "tools.everything.get_sum({ a: number, b: number })" in system
    assert "# Tools" in system  # the SDK's README


def test_runtime_error_reaches_the_model_with_its_explanation(client: Client) -> None:
    class OneShot:
        def __init__(self) -> None:
            self.calls = 0

        def complete(
            self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
        ) -> dict[str, Any]:
            self.calls += 1
            if self.calls == 1:
                code = "const s = await tools.everything.get_sum({ a: 1, b: 2 });\ns.result.value"
                return {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {
                                "name": "execute",
                                "arguments": json.dumps({"code": code}),
                            },
                        }
                    ],
                }
            return {"role": "assistant", "content": "done"}

    outcome = run_agent(OneShot(), client, "sum", max_turns=3, instructions="test")
    content = json.loads(outcome.messages[3]["content"])
    assert content["status"] == "error"
    assert "a string" in content["error"]["explanation"]
    assert content["error"]["line"] == 2
    assert content["tool_calls"] == [
        {
            "tool": "everything.get_sum",
            "args": {"a": 1, "b": 2},
            "outcome": "ok",
            "result": "The sum of 1 and 2 is 3.",
        }
    ]
    assert outcome.answer == "done"
    if outcome.session:
        client.delete_session(outcome.session)


def test_max_turns_stops_a_model_that_never_answers(client: Client) -> None:
    class Looping:
        def complete(
            self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
        ) -> dict[str, Any]:
            return {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{len(messages)}",
                        "type": "function",
                        "function": {"name": "execute", "arguments": '{"code": "1 + 1"}'},
                    }
                ],
            }

    outcome = run_agent(Looping(), client, "loop", max_turns=2, instructions="test")
    assert outcome.answer is None
    assert outcome.turns == 2
    assert [e.result for e in outcome.executions] == [2, 2]
    if outcome.session:
        client.delete_session(outcome.session)


def test_openai_compatible_model_request_shape() -> None:
    """The HTTP shape only, against a stub transport (no network)."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(
            200, json={"choices": [{"message": {"role": "assistant", "content": "hi"}}]}
        )

    model = OpenAICompatibleModel(
        "https://llm.example/v1/",
        "key-123",
        "some-model",
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )
    reply = model.complete([{"role": "user", "content": "x"}], [EXECUTE_TOOL])
    assert reply == {"role": "assistant", "content": "hi"}
    request = seen[0]
    assert request.method == "POST"
    assert str(request.url) == "https://llm.example/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer key-123"
    body = json.loads(request.content)
    assert body["model"] == "some-model"
    assert body["messages"] == [{"role": "user", "content": "x"}]
    assert body["tools"][0]["function"]["name"] == "execute"
    assert body["tools"][0]["function"]["parameters"]["required"] == ["code"]
