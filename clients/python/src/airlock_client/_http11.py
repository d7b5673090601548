"""HTTP/1.1 on the daemon's Unix socket for the clients' request/answer calls.

``httpx`` spends ~0.9 ms of Python per request (building the request and URL, its connection
pool, h11's parser, the response model): several times what a trivial execution takes in
the daemon. These calls need none of it: one host, no TLS, no redirects, no cookies, bodies
that are JSON. So both clients make them here, on kept connections (``UnixHttp`` blocking,
``AsyncUnixHttp`` on asyncio, one parser for both: ``AnswerParser``), and keep ``httpx`` for
the NDJSON streams and for an ``http_client`` the caller hands them.

What it does not do, on purpose: retry. A request whose connection fails is reported, never
sent again (``POST /v1/executions`` would run the program twice). A kept connection the
daemon has closed while it sat idle is noticed before it is used (as httpcore does) and
replaced.
"""

from __future__ import annotations

import asyncio
import json as jsonlib
import select
import socket
import struct
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

import httpx

from .errors import AirlockConnectionError, AirlockProtocolError, AirlockTransportError

MAX_HEAD_BYTES = 64 * 1024
"""An answer's status line and headers; the daemon's are a few hundred bytes."""

MAX_BODY_BYTES = 256 * 1024 * 1024
"""An answer's body, past any response the daemon's own limits allow."""

MAX_IDLE_CONNECTIONS = 8
"""Kept connections per client: as many as make requests at once, up to this."""

READ_SIZE = 65536


class Answer:
    """A whole answer: the parts of ``httpx.Response`` that ``_wire`` reads."""

    __slots__ = ("content", "headers", "status_code")

    def __init__(self, status_code: int, headers: dict[str, str], content: bytes) -> None:
        self.status_code = status_code
        self.headers = headers  # names in lower case
        self.content = content

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return jsonlib.loads(self.content)


def encode_request(
    method: str,
    path: str,
    json: Any = None,
    params: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> bytes:
    """The request's bytes, head and body."""
    target = path
    if params:
        target += "?" + urlencode({k: _query_value(v) for k, v in params.items()})
    head = f"{method} {target} HTTP/1.1\r\nhost: airlock\r\n"
    for name, value in (headers or {}).items():
        head += f"{name}: {value}\r\n"
    body = b""
    if json is not None:
        # json.dumps with its defaults: the only call its cached encoder serves.
        body = jsonlib.dumps(json).encode()
    # The daemon answers a POST without this type 415, also one without a body (`resume`).
    if json is not None or method == "POST":
        head += "content-type: application/json\r\n"
    if body or method in ("POST", "PUT", "PATCH"):
        head += f"content-length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


def _query_value(value: Any) -> str:
    # As httpx writes a query value.
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return ""
    return str(value)


class AnswerParser:
    """One answer, parsed from the bytes fed to it as they arrive (no I/O of its own).

    ``feed`` what was received, then ask ``done``; at the end of the connection ask
    ``at_eof``. ``answer`` and ``reusable`` (whether the connection can carry another
    request) are set once it is done."""

    def __init__(self, method: str) -> None:
        self._method = method
        self._buf = bytearray()
        self._status = 0
        self._headers: dict[str, str] | None = None
        self._length: int | None = None  # a content-length body's
        self._chunked = False
        self._body = bytearray()  # a chunked body so far
        self.answer: Answer | None = None
        self.reusable = False

    def feed(self, data: bytes) -> None:
        self._buf += data

    def done(self) -> bool:
        if self.answer is not None:
            return True
        if self._headers is None and not self._parse_head():
            return False
        if self._chunked:
            return self._parse_chunks()
        if self._length is None:
            if len(self._buf) > MAX_BODY_BYTES:
                raise AirlockProtocolError(f"airlockd's answer is over {MAX_BODY_BYTES} bytes")
            return False  # the body runs to the end of the connection
        if len(self._buf) < self._length:
            return False
        if len(self._buf) > self._length:
            raise AirlockProtocolError("airlockd sent more than its answer's content-length")
        self._finish(bytes(self._buf))
        return True

    def at_eof(self) -> None:
        """The connection ended: fine for a body that runs to its end, else an error."""
        if self.answer is None and self._headers is not None and self._length is None and not self._chunked:
            self._finish(bytes(self._buf))  # such a body ends with the connection
        elif not self.done():
            raise AirlockTransportError("airlockd closed the connection before its answer was complete")

    def _finish(self, content: bytes) -> None:
        assert self._headers is not None
        self.answer = Answer(self._status, self._headers, content)

    def _parse_head(self) -> bool:
        buf = self._buf
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > MAX_HEAD_BYTES:
                raise AirlockProtocolError(f"airlockd's answer has a head over {MAX_HEAD_BYTES} bytes")
            return False
        lines = buf[:end].decode("latin-1").split("\r\n")
        del buf[: end + 4]
        status_line = lines[0].split(" ", 2)
        if (
            len(status_line) < 2
            or not status_line[0].startswith("HTTP/1.")
            or not status_line[1].isdigit()
        ):
            raise AirlockProtocolError(f"airlockd answered with a status line {lines[0][:100]!r}")
        status = int(status_line[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                raise AirlockProtocolError(f"airlockd answered with a header line {line[:100]!r}")
            name = name.strip().lower()
            value = value.strip()
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        self._status, self._headers = status, headers
        self.reusable = "close" not in headers.get("connection", "").lower()
        if self._method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            self._length = 0
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            self._chunked = True
        elif (length := headers.get("content-length")) is not None:
            if not length.isdigit() or int(length) > MAX_BODY_BYTES:
                raise AirlockProtocolError(f"airlockd answered with content-length {length[:30]!r}")
            self._length = int(length)
        else:
            self.reusable = False  # the body runs to the end of the connection
        return True

    def _parse_chunks(self) -> bool:
        buf = self._buf
        while True:
            eol = buf.find(b"\r\n")
            if eol < 0:
                if len(buf) > MAX_HEAD_BYTES:
                    raise AirlockProtocolError("a chunk size line of airlockd's answer is too long")
                return False
            size_text = bytes(buf[:eol]).split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise AirlockProtocolError(f"airlockd sent a chunk size {size_text[:30]!r}") from None
            if size == 0:
                # Trailers (none expected), then the blank line that ends the body.
                rest = buf.find(b"\r\n\r\n", eol)
                if rest < 0:
                    if len(buf) > MAX_HEAD_BYTES:
                        raise AirlockProtocolError("airlockd's answer has trailers that are too long")
                    return False
                if rest + 4 != len(buf):
                    raise AirlockProtocolError("airlockd sent more than its chunked answer")
                self._finish(bytes(self._body))
                return True
            if len(self._body) + size > MAX_BODY_BYTES:
                raise AirlockProtocolError(f"airlockd's answer is over {MAX_BODY_BYTES} bytes")
            if len(buf) < eol + 2 + size + 2:
                return False
            start = eol + 2
            if buf[start + size : start + size + 2] != b"\r\n":
                raise AirlockProtocolError("a chunk of airlockd's answer does not end with CRLF")
            self._body += buf[start : start + size]
            del buf[: start + size + 2]


def _timeouts(
    timeout: httpx.Timeout | float | None,
) -> tuple[float | None, float | None, float | None]:
    """(connect, write, read) in seconds, ``None`` for no limit."""
    if isinstance(timeout, httpx.Timeout):
        return timeout.connect, timeout.write, timeout.read
    return timeout, timeout, timeout


def _timeval(seconds: float | None) -> bytes:
    """A ``struct timeval`` for ``SO_SNDTIMEO``/``SO_RCVTIMEO``; all zero means no limit."""
    if seconds is None:
        return struct.pack("ll", 0, 0)
    micros = max(1, round(seconds * 1e6))  # a limit of 0 would mean none
    return struct.pack("ll", micros // 1_000_000, micros % 1_000_000)


def _timed_out(path: str) -> AirlockTransportError:
    return AirlockTransportError(
        f"airlockd at {path} did not take the request or answer it within the client's "
        "timeout (raise it: Client(timeout=...))"
    )


def _failed(path: str, error: OSError) -> AirlockTransportError:
    return AirlockTransportError(f"talking to airlockd at {path}: {error!r}")


class UnixHttp:
    """Kept HTTP/1.1 connections to one Unix socket, blocking; safe to share between threads
    (each request takes a connection of its own)."""

    def __init__(self, path: str, timeout: httpx.Timeout | float | None) -> None:
        self.path = path
        self._connect_timeout, self._write_timeout, self._read_timeout = _timeouts(timeout)
        self._idle: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for sock in idle:
            sock.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        request = encode_request(method, path, json, params, headers)
        sock = self._take()
        parser = AnswerParser(method)
        try:
            sock.sendall(request)
            while not parser.done():
                chunk = sock.recv(READ_SIZE)
                if not chunk:
                    parser.at_eof()
                    break
                parser.feed(chunk)
        except BlockingIOError as e:  # SO_SNDTIMEO or SO_RCVTIMEO ran out
            sock.close()
            raise _timed_out(self.path) from e
        except OSError as e:
            sock.close()
            raise _failed(self.path, e) from e
        except BaseException:
            sock.close()
            raise
        self._give_back(sock, parser.reusable)
        assert parser.answer is not None
        return parser.answer

    def _take(self) -> socket.socket:
        with self._lock:
            if self._closed:
                raise AirlockTransportError("the client is closed")
            idle = self._idle
            while idle:
                sock = idle.pop()
                if _quiet(sock):
                    return sock
                sock.close()
        # Blocking, with the write and read timeouts set in the kernel (`SO_SNDTIMEO`,
        # `SO_RCVTIMEO`) once: Python's own socket timeouts would cost a `poll` before every
        # send and receive.
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self._connect_timeout)
            sock.connect(self.path)
            sock.settimeout(None)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, _timeval(self._write_timeout))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _timeval(self._read_timeout))
        except OSError as e:
            sock.close()
            raise AirlockConnectionError(self.path, e) from e
        return sock

    def _give_back(self, sock: socket.socket, reusable: bool) -> None:
        if reusable:
            with self._lock:
                if not self._closed and len(self._idle) < MAX_IDLE_CONNECTIONS:
                    self._idle.append(sock)
                    return
        sock.close()


class AsyncUnixHttp:
    """``UnixHttp`` on asyncio: kept connections, each request on one of its own. Bound to
    the event loop of its first request (as an ``httpx.AsyncClient`` is)."""

    def __init__(self, path: str, timeout: httpx.Timeout | float | None) -> None:
        self.path = path
        self._connect_timeout, self._write_timeout, self._read_timeout = _timeouts(timeout)
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self._closed = False

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for _, writer in idle:
            writer.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        request = encode_request(method, path, json, params, headers)
        reader, writer = await self._take()
        parser = AnswerParser(method)
        try:
            writer.write(request)
            # A request that did not fit in the socket's buffer at once (only a large one).
            if writer.transport.get_write_buffer_size():
                await asyncio.wait_for(writer.drain(), self._write_timeout)
            while not parser.done():
                if self._read_timeout is None:
                    chunk = await reader.read(READ_SIZE)
                else:
                    chunk = await asyncio.wait_for(reader.read(READ_SIZE), self._read_timeout)
                if not chunk:
                    parser.at_eof()
                    break
                parser.feed(chunk)
        except asyncio.TimeoutError as e:
            writer.close()
            raise _timed_out(self.path) from e
        except OSError as e:
            writer.close()
            raise _failed(self.path, e) from e
        except BaseException:
            # A cancelled request leaves its connection mid-answer: not reusable.
            writer.close()
            raise
        if parser.reusable and not self._closed and len(self._idle) < MAX_IDLE_CONNECTIONS:
            self._idle.append((reader, writer))
        else:
            writer.close()
        assert parser.answer is not None
        return parser.answer

    async def _take(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._closed:
            raise AirlockTransportError("the client is closed")
        while self._idle:
            reader, writer = self._idle.pop()
            # Closed while it sat idle: the loop saw it (at_eof), or the close is still in
            # the socket, unread, when the loop has not run since (as a blocking client
            # driving a loop of its own per call leaves it).
            if not reader.at_eof() and not writer.is_closing() and _quiet(writer.get_extra_info("socket")):
                return reader, writer
            writer.close()
        try:
            connecting = asyncio.open_unix_connection(self.path, limit=READ_SIZE)
            if self._connect_timeout is None:
                return await connecting
            return await asyncio.wait_for(connecting, self._connect_timeout)
        except (OSError, asyncio.TimeoutError) as e:
            raise AirlockConnectionError(self.path, e) from e


def _quiet(sock: Any) -> bool:
    """Whether a kept connection can carry a request: nothing to read on its socket now,
    neither the daemon's close nor bytes it sent unasked (either makes it readable)."""
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    return not poller.poll(0)
