"""What the sub-commands' declarations share: the types of their arguments (intervals,
durations, bounded counts) with their bounds, and the shape of a handler."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TypeAlias

from .. import _maintenance as maintenance
from ..errors import SessionJournalError

Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""A group of sub-commands, to which each module adds its own (`add_parser`)."""

Handler: TypeAlias = Callable[[str, argparse.Namespace], int]
"""What runs a sub-command (`set_defaults(handler=...)`): given the database URL (checked) and
the parsed arguments, it returns the exit code."""

MIN_INTERVAL_S = 0.01
"""The shortest `events --follow --interval`: 10 ms (shorter is a busy loop on the database)."""


MAX_INTERVAL_S = 3600.0
"""The longest `events --follow --interval`: one hour."""


MAX_EVENTS_LIMIT = 1_000_000_000
"""The largest `events --limit` (the events are read in pages of `MAX_PAGE`)."""


def seconds(low: float, high: float) -> Callable[[str], float]:
    """An argument of seconds from `low` to `high` (NaN and text refused)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        # `not a <= x <= b` is also true for NaN, which compares false to everything.
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"must be a number of seconds from {low:g} to {high:g}, got {text!r}"
            )
        return value

    return parse


def duration(text: str) -> int:
    """`--older-than`: a duration in milliseconds (`30d`, `12h`, ...)."""
    try:
        return maintenance.parse_duration_ms(text)
    except SessionJournalError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def bounded_int(maximum: int, *, minimum: int = 1) -> Callable[[str], int]:
    """An argument of an integer from `minimum` to `maximum`."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(
                f"must be an integer from {minimum} to {maximum}, got {text!r}"
            )
        return value

    return parse
