"""Checking an events file: torn and undecodable lines, with their byte offsets."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from .envelope import JournalEnvelope
from .stats import EVENTS_FILE


@dataclass(frozen=True)
class Problem:
    """A line of an events file that is not a complete, decodable envelope."""

    offset: int
    length: int
    reason: str


def events_file(path: str | Path) -> Path:
    """`path` itself if it is a file, else its `events.jsonl`."""
    path = Path(path)
    return path if path.is_file() else path / EVENTS_FILE


def verify(path: str | Path) -> tuple[int, list[Problem]]:
    """How many lines the file has, and the problems among them. An `encode_error` line (an
    event the writer could not encode, recorded as such) is reported too."""
    lines, problems, offset = 0, [], 0
    with events_file(path).open("rb") as reader:
        for line in reader:
            lines += 1
            if not line.endswith(b"\n"):
                problems.append(Problem(offset, len(line), "torn: no newline at the end"))
            else:
                try:
                    JournalEnvelope.model_validate_json(line)
                except ValidationError as error:
                    problems.append(Problem(offset, len(line), f"undecodable: {_first(error)}"))
            offset += len(line)
    return lines, problems


def _first(error: ValidationError) -> str:
    """`<where>: <message>` of the first thing wrong with a line: the field's dotted path
    (`line` for the line as a whole, such as invalid JSON), without pydantic's echo of the
    input; `(and N more)` when there are more."""
    found = error.errors(include_url=False, include_input=False, include_context=False)
    where = ".".join(str(part) for part in found[0]["loc"]) or "line"
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    return f"{where}: {found[0]['msg']}{more}"
