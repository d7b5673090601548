"""Where the daemon's socket is, found the way the ``airlock`` CLI finds it."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["SYSTEM_SOCKET", "default_socket_path", "resolve_socket_path"]

SYSTEM_SOCKET = "/run/airlock/airlock.sock"
"""The system daemon's socket (``airlockd.socket``, ``RuntimeDirectory=airlock``)."""


def _user_socket_path() -> str | None:
    if os.geteuid() == 0:
        return SYSTEM_SOCKET
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return str(Path(runtime) / "airlock" / "airlock.sock")
    return None


def default_socket_path() -> str:
    """The socket a client uses when none is given (``supervisor/src/daemon/socket_path.rs``):
    the user's own daemon if its socket exists (``$XDG_RUNTIME_DIR/airlock/airlock.sock``,
    ``/run/airlock/airlock.sock`` for root), else the system daemon's if it exists, else the
    user default (so a connection error names it)."""
    user = _user_socket_path()
    if user is not None and os.path.exists(user):
        return user
    if os.path.exists(SYSTEM_SOCKET):
        return SYSTEM_SOCKET
    return user if user is not None else SYSTEM_SOCKET


def resolve_socket_path(socket: str | os.PathLike[str] | None = None) -> str:
    """``socket`` if given, else ``$AIRLOCK_SOCKET``, else ``default_socket_path()``."""
    if socket is not None:
        return os.fspath(socket)
    env = os.environ.get("AIRLOCK_SOCKET")
    if env:
        return env
    return default_socket_path()
