"""The redaction of what the app serves (`WebSettings.redact`), with `session_journal.Redactor`:
text in which `Redactor.may_hold_secrets` finds nothing passes as it is, on the event loop; the
rest is redacted in a thread of the event loop's default executor (`run_in_executor(None, ...)`:
the loop's own threads, which `asyncio.run` and uvicorn end with the loop), so that no text,
however long or odd, holds the loop (and every other stream and request) while it is
redacted."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any, TypeVar

from session_journal import Redactor

T = TypeVar("T")

_PAGE_START = '{"events":['  # how an event page's JSON starts (`load_json`, `wait_json`, ...)


class Redaction:
    """The app's redaction (one per app, shared by its routes and streams; it holds no state
    but the redactor's compiled rules)."""

    def __init__(self, enabled: bool) -> None:
        self.redactor = Redactor() if enabled else None
        """`None`: everything is served as stored."""

    async def texts(self, texts: list[str]) -> list[str]:
        """Events' JSON texts, each redacted (`redact_json_text`: the same text object when
        nothing changed)."""
        redactor = self.redactor
        if redactor is None or not any(map(redactor.may_hold_secrets, texts)):
            return texts
        return await _off_loop(lambda: list(map(redactor.redact_json_text, texts)))

    async def encoded(self, texts: list[bytes]) -> list[bytes]:
        """`texts` as UTF-8, each redacted (the same object when nothing changed)."""
        if self.redactor is None:
            return texts
        redacted = await self.texts(decoded := [text.decode() for text in texts])
        return [
            text if after is before else after.encode()
            for text, before, after in zip(texts, decoded, redacted, strict=True)
        ]

    async def json_text(self, text: str) -> str:
        """A JSON text redacted (itself when nothing changed)."""
        return (await self.texts([text]))[0]

    async def document(self, document: dict[str, Any]) -> bytes:
        """A route's document as compact JSON, redacted."""
        text = json.dumps(document, separators=(",", ":"))
        return (await self.json_text(text)).encode()

    async def page(self, body: bytes) -> bytes:
        """An event page's JSON with each event's secrets redacted: a page in which
        `may_hold_secrets` finds nothing is given back as it is; otherwise, in a worker thread,
        each event's text is cut out of the page and redacted alone, so that only an event
        whose text changes is encoded again."""
        redactor = self.redactor
        if redactor is None:
            return body
        text = body.decode()
        if not redactor.may_hold_secrets(text):
            return body
        return await _off_loop(lambda: _redacted_page(redactor, text))


async def _off_loop(work: Callable[[], T]) -> T:
    """`work()` in a thread of the running loop's default executor."""
    return await asyncio.get_running_loop().run_in_executor(None, work)


def _redacted_page(redactor: Redactor, text: str) -> bytes:
    """`Redaction.page`'s work, on a worker thread."""
    if not text.startswith(_PAGE_START):  # not a page of events: the whole value, then
        return redactor.redact_json_text(text).encode()
    decoder = json.JSONDecoder()
    events: list[str] = []
    at = len(_PAGE_START)
    while text[at] != "]":
        end = decoder.raw_decode(text, at)[1]
        events.append(redactor.redact_json_text(text[at:end]))
        at = end + (text[end] == ",")
    return f"{_PAGE_START}{','.join(events)}{text[at:]}".encode()
