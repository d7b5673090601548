"""The client's tests run against a real airlockd whose socket is $AIRLOCK_SOCKET.

Without it every test here is skipped. To run them:

    airlockd --config policy.toml --socket /tmp/airlock.sock &   # a policy with `everything`
    AIRLOCK_SOCKET=/tmp/airlock.sock python3 -m pytest clients/python examples -q

The daemon must admit the user running the tests and configure the namespace `everything`
(the npm MCP server @modelcontextprotocol/server-everything); the tests declare their
client-owned tools themselves. The package is imported from ../src (no install needed).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

from airlock_client import Client

HOW_TO_RUN = (
    "AIRLOCK_SOCKET is not set: these tests need a running airlockd with the `everything` "
    "namespace; run `AIRLOCK_SOCKET=/path/to/airlock.sock python3 -m pytest clients/python "
    "examples -q` (see clients/python/README.md)"
)


def socket_path() -> str:
    path = os.environ.get("AIRLOCK_SOCKET")
    if not path:
        pytest.skip(HOW_TO_RUN)
    return path


@pytest.fixture(autouse=True)
def _needs_daemon() -> None:
    socket_path()


@pytest.fixture
def sock() -> str:
    return socket_path()


@pytest.fixture
def client(sock: str) -> Iterator[Client]:
    with Client(sock) as c:
        yield c


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not os.environ.get("AIRLOCK_SOCKET"):
        terminalreporter.write_line(HOW_TO_RUN)
