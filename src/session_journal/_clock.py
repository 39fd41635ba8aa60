"""The wall clock of stored events (a leaf module: no I/O, no database)."""

from __future__ import annotations

import time


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch: the `recorded_at_ms` of controller and relay
    events, and the timestamps inside relay observations."""
    return time.time_ns() // 1_000_000
