"""The example's test runs against a real airlockd whose socket is $AIRLOCK_SOCKET (skipped
without it): `AIRLOCK_SOCKET=/path/to/airlock.sock python3 -m pytest clients/python examples -q`.
The client is imported from clients/python/src (no install needed)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
for path in (HERE.parent / "clients" / "python" / "src", HERE):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))


@pytest.fixture(autouse=True)
def _needs_daemon() -> None:
    if not os.environ.get("AIRLOCK_SOCKET"):
        pytest.skip(
            "AIRLOCK_SOCKET is not set: the agent loop's test needs a running airlockd with the "
            "`everything` namespace; run `AIRLOCK_SOCKET=/path/to/airlock.sock python3 -m pytest "
            "clients/python examples -q` (see clients/python/README.md)"
        )
