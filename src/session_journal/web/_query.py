"""A request's query parameters, each checked against its bounds (`bad_request` naming it)."""

from __future__ import annotations

import math
import re
from typing import Any
from urllib.parse import parse_qsl

from pydantic import ValidationError

from session_journal import ApiEventFilter, InvalidRecord, SessionRecord

from ._problems import bad_request, not_found

MAX_SEQ = 2**63 - 1
_DIGITS = re.compile(r"[0-9]{1,19}")
_NO_FILTER = ApiEventFilter()


class Query:
    """The parameters of one request: every name must be one the route takes; only the ones
    named `repeatable` may be given more than once."""

    def __init__(
        self, query_string: bytes, allowed: frozenset[str], repeatable: frozenset[str] = frozenset()
    ) -> None:
        try:
            pairs = parse_qsl(
                query_string.decode("utf-8"),
                keep_blank_values=True,
                strict_parsing=False,
                errors="strict",
                max_num_fields=100,
            )
        except (UnicodeDecodeError, ValueError) as error:
            raise bad_request("query", f"the query string cannot be read ({error})") from None
        self.values: dict[str, list[str]] = {}
        for name, value in pairs:
            if name not in allowed:
                known = ", ".join(sorted(allowed)) or "none"
                raise bad_request(name, f"this route takes no such parameter (it takes: {known})")
            given = self.values.setdefault(name, [])
            if given and name not in repeatable:
                raise bad_request(name, "given more than once")
            given.append(value)

    def text(self, name: str) -> str | None:
        """The parameter as given, or `None`."""
        values = self.values.get(name)
        return None if values is None else values[0]

    def seq(self, name: str) -> int | None:
        """A non-negative integer of decimal digits (a seq, a position), or `None`."""
        value = self.text(name)
        if value is None:
            return None
        return digits(name, value)

    def integer(self, name: str, low: int, high: int, default: int) -> int:
        """An integer from `low` to `high`, `default` when absent."""
        value = self.text(name)
        if value is None:
            return default
        number = digits(name, value)
        if not low <= number <= high:
            raise bad_request(name, f"must be from {low} to {high}, got {number}")
        return number

    def seconds(self, name: str, high: float) -> float:
        """A number of seconds from 0 to `high` (0 when absent)."""
        value = self.text(name)
        if value is None:
            return 0.0
        try:
            number = float(value) if len(value) <= 20 else math.nan
        except ValueError:
            number = math.nan
        if not math.isfinite(number) or not 0 <= number <= high:
            raise bad_request(name, f"must be a number of seconds from 0 to {high:g}")
        return number

    def event_filter(self, bound_workspace: str | None) -> ApiEventFilter:
        """The filter of `session_id`, `workspace_id` and the repeatable `type`, scoped to the
        token's workspace: naming another workspace is `not_found`."""
        workspace = self.text("workspace_id")
        workspace = scoped_workspace(workspace, bound_workspace)
        types = self.values.get("type")
        session_id = self.text("session_id")
        if session_id is None and workspace is None and types is None:
            return _NO_FILTER
        arguments = {
            "session_id": session_id,
            "workspace_id": workspace,
            "types": None if types is None else tuple(types),
        }
        try:
            return ApiEventFilter.model_validate(arguments)
        except ValidationError as error:
            first = error.errors()[0]
            name = str(first["loc"][0]) if first["loc"] else "query"
            parameter = "type" if name == "types" else name
            raise bad_request(parameter, str(first["msg"]).removeprefix("Value error, ")) from None


def digits(name: str, value: str) -> int:
    """`value` as a non-negative integer of at most 19 decimal digits, at most 2**63 - 1."""
    if not _DIGITS.fullmatch(value) or int(value) > MAX_SEQ:
        raise bad_request(
            name, f"must be a non-negative integer of decimal digits, got {value[:40]!r}"
        )
    return int(value)


def scoped_workspace(asked: str | None, bound: str | None) -> str | None:
    """The workspace a request reads: the token's own when it is bound to one (asking for
    another is `not_found`), else the one asked for."""
    if bound is None:
        return asked
    if asked is not None and asked != bound:
        raise not_found(f"workspace {asked[:140]!r}")
    return bound


async def visible_session(reads: Any, workspace: str | None, session_id: str) -> SessionRecord:
    """The session, read by `reads` (a store or a snapshot), if a token bound to `workspace`
    (`None`: every workspace) may see it; `not_found` otherwise (another workspace's sessions
    are not told apart from missing ones), `bad_request` for a malformed id (the store's own
    check)."""
    try:
        record: SessionRecord | None = await reads.sessions.get(session_id)
    except InvalidRecord as error:
        raise bad_request("session_id", str(error)) from None
    if record is None or workspace not in (None, record.workspace_id):
        raise not_found(f"session {session_id[:140]!r}")
    return record
