"""Exceptions of the Airlock client.

A program that fails is not an exception: ``execute`` answers with ``status: "error"`` and
``response.error``. These are for requests the daemon refused or could not be made at all.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AirlockApiError",
    "AirlockConnectionError",
    "AirlockError",
    "AirlockProtocolError",
    "AirlockTransportError",
]


class AirlockError(Exception):
    """Base of every exception this package raises."""


class AirlockApiError(AirlockError):
    """The daemon answered a non-2xx status with ``{"error": {"code", "message", "hint"?}}``.

    ``code`` is the API's error code (``invalid_json``, ``not_found``, ``conflict``, ...), or
    ``"unknown"`` when the body was not an error body. ``retry_after`` is the ``Retry-After``
    header in seconds (``rate_limited``), when there is one.
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        hint: str | None = None,
        *,
        retry_after: float | None = None,
        body: Any = None,
    ) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.hint = hint
        self.retry_after = retry_after
        self.body = body
        text = f"airlockd answered {status} {code}: {message}"
        if hint:
            text += f" (hint: {hint})"
        super().__init__(text)


class AirlockTransportError(AirlockError):
    """The connection to the daemon failed while a request was made or its answer read (the
    ``httpx`` error is the ``__cause__``)."""


class AirlockConnectionError(AirlockTransportError):
    """The daemon's socket could not be reached."""

    def __init__(self, socket_path: str, cause: BaseException) -> None:
        self.socket_path = socket_path
        self.cause = cause
        text = f"cannot connect to airlockd at {socket_path}: {cause}"
        lowered = str(cause).lower()
        if "no such file" in lowered or "refused" in lowered:
            text += " (is airlockd running? start it with `airlockd`, or pass socket= / set AIRLOCK_SOCKET)"
        elif "permission" in lowered:
            text += " (the socket is mode 0660: are you in the daemon's group?)"
        super().__init__(text)


class AirlockProtocolError(AirlockError):
    """The daemon's answer could not be understood (not JSON, a stream without its result)."""
