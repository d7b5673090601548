"""The clients' own HTTP/1.1 connections (``_http11``): kept and reused, shared by threads
and tasks, a connection the daemon closed while idle replaced, and never a request sent
twice. The faults come from a small server of this file on a Unix socket of its own; each
runs against the sync ``Client`` and the ``AsyncClient`` (its calls driven by asyncio.run
on one loop)."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from airlock_client import AsyncClient, Client
from airlock_client.errors import AirlockProtocolError, AirlockTransportError

OK_BODY = b'{"status":"ok","result":1}'


class FakeDaemon:
    """Accepts connections on a Unix socket; ``serve(conn, n)`` answers the connection's
    request number ``n`` (from 0) and returns whether to keep the connection open."""

    def __init__(self, path: str, serve: Callable[[socket.socket, int], bool]) -> None:
        self.path = path
        self.serve = serve
        self.requests = 0
        self.connections = 0
        self.closed = threading.Semaphore(0)  # released as each connection is closed
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(8)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._connection, args=(conn,), daemon=True).start()

    def _connection(self, conn: socket.socket) -> None:
        with conn:
            n = 0
            while _read_request(conn):
                self.requests += 1
                if not self.serve(conn, n):
                    break
                n += 1
        self.closed.release()

    def close(self) -> None:
        self.listener.close()


def _read_request(conn: socket.socket) -> bool:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return False
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        body += conn.recv(65536)
    return True


def _answer(conn: socket.socket, body: bytes = OK_BODY, extra: str = "") -> None:
    conn.sendall(
        f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{extra}"
        f"content-length: {len(body)}\r\n\r\n".encode()
        + body
    )


class SyncOrAsync:
    """``execute`` on a ``Client`` or on an ``AsyncClient`` (on one event loop of its own)."""

    def __init__(self, path: str, use_async: bool, **kw: Any) -> None:
        self.loop = asyncio.new_event_loop() if use_async else None
        self.client: Any = AsyncClient(path, **kw) if use_async else Client(path, **kw)

    def execute(self, code: str) -> Any:
        if self.loop is None:
            return self.client.execute(code)
        return self.loop.run_until_complete(self.client.execute(code))

    def close(self) -> None:
        if self.loop is None:
            self.client.close()
        else:
            self.loop.run_until_complete(self.client.aclose())
            self.loop.close()


@pytest.fixture(params=["sync", "async"])
def fake(
    request: pytest.FixtureRequest, tmp_path: os.PathLike[str]
) -> Iterator[Callable[..., tuple[FakeDaemon, SyncOrAsync]]]:
    made: list[tuple[FakeDaemon, SyncOrAsync]] = []

    def make(serve: Callable[[socket.socket, int], bool], **kw: Any) -> tuple[FakeDaemon, SyncOrAsync]:
        daemon = FakeDaemon(os.path.join(tmp_path, f"fake{len(made)}.sock"), serve)
        client = SyncOrAsync(daemon.path, request.param == "async", **kw)
        made.append((daemon, client))
        return daemon, client

    yield make
    for daemon, client in made:
        client.close()
        daemon.close()


def test_one_connection_carries_every_request(fake) -> None:
    def serve(conn: socket.socket, n: int) -> bool:
        _answer(conn)
        return True

    daemon, client = fake(serve)
    for _ in range(5):
        assert client.execute("1").status == "ok"
    assert (daemon.requests, daemon.connections) == (5, 1)


def test_a_connection_closed_while_idle_is_replaced(fake) -> None:
    # The daemon answers and then closes (a restart, an idle timeout): the next request must
    # go out on a new connection instead of failing on the dead one.
    def serve(conn: socket.socket, n: int) -> bool:
        _answer(conn)
        return False

    daemon, client = fake(serve)
    for _ in range(3):
        assert client.execute("1").status == "ok"
        # Closed before the next request is made (a close racing the next request cannot be
        # told from a failure, and is reported).
        assert daemon.closed.acquire(timeout=5)
    assert (daemon.requests, daemon.connections) == (3, 3)


def test_connection_close_is_honoured(fake) -> None:
    def serve(conn: socket.socket, n: int) -> bool:
        _answer(conn, extra="connection: close\r\n")
        return True  # the client must not wait for this server to close

    daemon, client = fake(serve)
    for _ in range(2):
        assert client.execute("1").status == "ok"
    assert daemon.connections == 2


def test_an_answer_cut_short_is_an_error_and_not_sent_again(fake) -> None:
    def serve(conn: socket.socket, n: int) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{\"status\"")
        return False

    daemon, client = fake(serve)
    with pytest.raises(AirlockTransportError, match="closed the connection"):
        client.execute("1")
    assert daemon.requests == 1  # a program must never run twice behind the caller's back
    # The client goes on with a new connection.
    daemon.serve = lambda conn, n: (_answer(conn), True)[1]
    assert client.execute("1").status == "ok"


def test_a_chunked_answer_is_read(fake) -> None:
    def serve(conn: socket.socket, n: int) -> bool:
        body = OK_BODY
        conn.sendall(
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
            + f"{5:x}\r\n".encode() + body[:5] + b"\r\n"
            + f"{len(body) - 5:x};ext=1\r\n".encode() + body[5:] + b"\r\n"
            + b"0\r\n\r\n"
        )
        return True

    daemon, client = fake(serve)
    assert client.execute("1").result == 1
    assert client.execute("1").result == 1
    assert daemon.connections == 1


def test_a_garbled_answer_is_a_protocol_error(fake) -> None:
    def serve(conn: socket.socket, n: int) -> bool:
        conn.sendall(b"SMTP ready\r\n\r\n")
        return True

    _, client = fake(serve)
    with pytest.raises(AirlockProtocolError, match="status line"):
        client.execute("1")


def test_a_daemon_that_does_not_answer_runs_into_the_timeout(fake) -> None:
    answered = threading.Event()

    def serve(conn: socket.socket, n: int) -> bool:
        answered.wait(5)  # not before the client has given up
        return False

    _, client = fake(serve, timeout=0.2)
    started = time.monotonic()
    with pytest.raises(AirlockTransportError, match="within the client's timeout"):
        client.execute("1")
    answered.set()
    assert 0.15 < time.monotonic() - started < 3


def test_threads_share_one_client(client: Client) -> None:
    # Each request takes a connection of its own: 32 executions from 8 threads at once.
    def run(i: int) -> object:
        return client.execute(f"{i} * 2").result

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(run, range(32)))
    assert results == [i * 2 for i in range(32)]


def test_tasks_share_one_async_client(sock: str) -> None:
    async def main() -> list[object]:
        async with AsyncClient(sock) as c:
            answers = await asyncio.gather(*(c.execute(f"{i} * 2") for i in range(32)))
            # The connections are kept: a second round opens none.
            kept = len(c._lean._idle) if c._lean is not None else 0
            assert 0 < kept <= 8
            await asyncio.gather(*(c.execute("1") for _ in range(kept)))
            assert len(c._lean._idle) == kept
            return [a.result for a in answers]

    assert asyncio.run(main()) == [i * 2 for i in range(32)]
