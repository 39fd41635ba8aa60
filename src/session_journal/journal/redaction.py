"""Redaction of secrets from journal envelopes before they are written or indexed.

`Redactor.redact_json` applies three rules to a JSON-like value (dict, list, str, number, bool,
None); dicts and lists are changed in place. Everything here is pure: no I/O, regexes built once.

1. **Secret keys.** A dict value under a key that names a secret becomes ``"[REDACTED]"`` whole,
   whatever its type. A key is first cut into lower-case words: camelCase is split
   (``apiKey`` -> ``api key``) and every run of characters other than ``[a-z0-9]`` separates
   words (``X-API-Key`` -> ``x api key``). The secret names are ``password``, ``passwd``,
   ``secret``, ``token``, ``api_key``, ``apikey``, ``authorization``, ``cookie``,
   ``private_key``, ``client_secret``, ``access_key``, the plurals of those (``passwords``,
   ``cookies``, ...) except ``tokens``, and the redactor's ``extra_keys`` (cut the same way).
   A key names a secret when its words

   - equal a secret name (``Password``, ``API-KEY``, ``tokens`` is *not* ``token``), or
   - end with one (``github_token``, ``x_api_key``, ``aws_secret_access_key``, ``Set-Cookie``), or
   - start with one (``secret_key``, ``api_key_v2``),

   except that a key with more words than the name is not a secret when one of the other words is
   a metric word (``count``, ``max``, ``type``, ``expires``, ... see ``_METRIC_WORDS``):
   ``token_count``, ``max_token`` and ``token_type`` stay. Only whole words count, and a name in
   the middle of a key does not: ``max_tokens``, ``input_tokens``, ``tokens_used``,
   ``prompt_token_count`` and ``secretary`` (LLM usage stats, prose) are not secrets.
2. **Secret shapes in strings.** Inside every other string the whole secret is replaced by
   ``[REDACTED]``: ``Bearer <token>`` (the word is kept: ``Bearer [REDACTED]``; the token needs
   8+ characters with a digit, or 20+, so "Bearer authentication" is prose), ``sk-`` + 20 or
   more of ``[A-Za-z0-9_-]``, GitHub tokens (``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_`` + 20+
   alphanumerics, ``github_pat_`` + 20+ of ``[A-Za-z0-9_]``), AWS access key ids (``AKIA``/``ASIA``
   + 16 of ``[A-Z0-9]``), JWTs (three base64url segments, the first starting ``eyJ``), PEM
   private key blocks (BEGIN through END; a block cut short is redacted to the end of the text),
   the password of ``scheme://user:password@host`` (scheme, user and host are kept); then
   **settings in free text**: the value of ``KEY=value`` or ``KEY: value`` whose key names a
   secret by rule 1's word rules (``password=hunter2``, ``API_KEY=abc``, ``GITHUB_TOKEN=...``,
   ``--db-password=x``, ``AWS_SECRET_ACCESS_KEY = ...``, ``DB_PASSWORD: x``, ``X-Api-Key: ...``)
   becomes ``[REDACTED]``, the key, the separator and a quote around the value kept
   (``password="[REDACTED]"``), and so is an auth scheme word before it (``Authorization: Basic
   [REDACTED]``). A key is a run of ``[A-Za-z0-9_.-]`` starting with a letter or ``_`` (after at
   most two ``-``); the value is a run up to white space or one of ``'"`,;&(){}<>``, or a
   quoted run (``"..."``, ``'...'``) of one line. Around ``=`` (not ``==``) a key may follow
   anything but a key character; with ``:`` it must start the text or follow a space, a line
   break or ``[`` (a search snippet's mark), so that code's parameter annotations
   (``def login(password: str)``) stay; after ``...`` (where a search snippet was cut) a key
   may start with either; and a key in quotes (``'password': 'x'``, ``"token": "x"``: a dict
   printed by Python, JSON cut short) may precede either. Keys that are not secrets
   (``max_tokens=100``, ``token count: 5``, ``url=...``) are kept with their value, in which
   the rules still apply. Last, every match of the redactor's ``extra_patterns``.
3. **JSON inside strings.** A string that starts with ``{`` or ``[`` (after whitespace) and parses
   as JSON is redacted by rules 1-3 and re-encoded compactly, but only if something changed:
   JSON text without secrets keeps its original formatting. JSON that does not parse (or is too
   deep for the ``json`` module) gets rule 2 on its raw text.

The top-level ``seq``, ``ts`` and ``type`` of the value passed (a journal envelope) are never
changed. Dict keys themselves are not redacted.

Nesting: lists and dicts are walked with an explicit stack, so any depth is handled without
recursion (and a container seen twice, even through a cycle, is visited once). JSON embedded in
strings recurses once per level of embedding, at most ``_MAX_EMBEDDED_DEPTH`` levels; deeper
embedded JSON gets rule 2 only. `redact_json` does not raise on JSON-like input.

With the built-in rules redaction is idempotent: redacting redacted output changes nothing. An
extra pattern that matches ``[REDACTED]`` itself breaks that.

JSON text (an HTTP response, an event's JSON) is redacted by `Redactor.redact_json_text`: its
value is redacted as `redact_json` does and encoded again compactly only if something changed.
`Redactor.may_hold_secrets` is its cheap first test, a few substring searches of the text made
lower-case, for the last word of each secret name and the start of each shape (and JSON escapes
that could spell one): it is false only when redacting the text would change nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, Final

from .._json_text import compact_json
from ..errors import InvalidRecord

__all__ = ["REDACTED", "Redactor"]

REDACTED: Final = "[REDACTED]"
"""What a redacted value or secret becomes."""

# fmt: off
_SECRET_NAMES: Final = (
    "password", "passwd", "secret", "token", "api_key", "apikey", "authorization", "cookie",
    "private_key", "client_secret", "access_key",
)
# "tokens" is left out on purpose: it is how LLM usage stats name a count.
_PLURAL_NAMES: Final = tuple(f"{n}s" for n in _SECRET_NAMES if n not in ("token", "passwd"))
_METRIC_WORDS: Final = frozenset({
    "count", "counts", "limit", "limits", "max", "min", "num", "number", "total", "usage", "used",
    "budget", "estimate", "length", "len", "size", "type", "expires", "expiry", "ttl",
})
# fmt: on
_ENVELOPE_KEYS: Final = frozenset({"seq", "ts", "type"})
_MAX_EMBEDDED_DEPTH: Final = 16

_CAMEL_BOUNDARY: Final = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_NON_WORD: Final = re.compile(r"[^a-z0-9]+")
_JSON_START: Final = re.compile(r"\s*[\[{]")

_TOKEN_CHAR: Final = r"[A-Za-z0-9_.~+/=-]"
# One alternation, so each string is scanned once; at a given position the earlier shape wins
# (a JWT after "Bearer" goes with the Bearer rule, which keeps the word).
_SHAPES: Final = re.compile(
    "|".join(
        (
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?s:.*?-----END [A-Z0-9 ]*PRIVATE KEY-----|.*)",
            # The password may itself hold an unescaped "@": the greedy run backtracks to the last.
            # The scheme starts where no scheme character precedes it, and its run is possessive:
            # a run that is no scheme is tried once, not once from each of its characters.
            r"(?P<userinfo>(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*+://[^\s:/?#@]*:)"
            r"[^\s/?#]+(?=@)",
            rf"(?P<bearer>\b(?i:bearer))\s+(?:(?={_TOKEN_CHAR}*\d){_TOKEN_CHAR}{{8,}}"
            rf"|{_TOKEN_CHAR}{{20,}})",
            r"\beyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+",
            r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_-]{20,}",
            r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})",
            r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b",
        )
    )
)

_KEY: Final = r"[A-Za-z_][A-Za-z0-9_.-]*+"  # possessive: a key that fails is not tried shorter
# A setting in free text, the last shape of rule 2: `KEY=value` or `KEY: value` (is the key a
# secret? `is_secret_key` says). `]` after a key and `[` before one: a search snippet's marks.
# The head (key, separator, an auth word) is searched for, and the value is matched after it
# only when the key names a secret: a value runs to the end of its word, so matching one after
# every key would read the text again for each (`a=a=a=...`), in time growing as its square.
# A key starts after `...` too: where a search snippet was cut (`...API_KEY=value`).
_SETTING_HEAD: Final = re.compile(
    r"(?:"
    rf"(?:(?<![^\s\[])|(?<=\.\.\.))(?P<colon_key>{_KEY})\]?[ \t]*:"
    rf"|(?:(?<![A-Za-z0-9_.-])|(?<=\.\.\.))-{{0,2}}(?P<equals_key>{_KEY})\]?[ \t]*=(?!=)"
    # A quoted key: a dict printed by Python (`{'password': 'x'}`), JSON cut short.
    rf"|(?P<quote>[\"'])(?P<quoted_key>{_KEY})(?P=quote)[ \t]*[:=](?!=)"
    r")[ \t]*(?:(?P<auth>(?i:bearer|basic|token|digest))[ \t]+)?"
)
_SETTING_VALUE: Final = re.compile(
    r"\"(?P<double>[^\"\n]+)\"|'(?P<single>[^'\n]+)'|(?P<bare>[^\s'\"`,;&(){}<>]+)"
)

# What `may_hold_secrets` looks for in JSON text made lower-case (`str.lower`, as `_words`
# does), besides the last word of each secret name: the start of each shape of rule 2, and a
# `\u` escape of a printable ASCII character or of the two others that lower-case to one
# (U+0130, U+212A), which could spell a word.
_SHAPE_STARTS: Final = (
    "-----begin", "://", ":\\/\\/", "bearer", "eyj", "sk-", "ghp_", "gho_", "ghu_", "ghs_",
    "ghr_", "github_pat_", "akia", "asia",
)  # fmt: skip
_ESCAPED_LETTER: Final = re.compile(r"\\u(?:00[2-7]|0130|212a)")


def _words(key: str) -> tuple[str, ...]:
    """The lower-case words of a key: ``"X-Api-Key"`` and ``"xApiKey"`` give x, api, key."""
    spaced = _CAMEL_BOUNDARY.sub("_", key).lower()
    return tuple(word for word in _NON_WORD.split(spaced) if word)


def _replace_shape(match: re.Match[str]) -> str:
    if (kept := match.group("userinfo")) is not None:
        return kept + REDACTED
    if (word := match.group("bearer")) is not None:
        return f"{word} {REDACTED}"
    return REDACTED


class Redactor:
    """Removes secrets from JSON-like values; the module docstring states the rules.

    `extra_patterns` (strings or compiled patterns) are replaced whole inside strings;
    `extra_keys` are secret names added to the built-in ones. A pattern that matches the empty
    string is refused with `ValueError`, since it would redact between every character.
    """

    def __init__(
        self,
        extra_patterns: Iterable[str | re.Pattern[str]] = (),
        extra_keys: Iterable[str] = (),
    ) -> None:
        patterns = tuple(re.compile(pattern) for pattern in extra_patterns)
        for pattern in patterns:
            if pattern.fullmatch("") is not None:
                raise ValueError(f"redaction pattern {pattern.pattern!r} matches the empty string")
        self._patterns: tuple[re.Pattern[str], ...] = patterns
        names = {_words(name) for name in (*_SECRET_NAMES, *_PLURAL_NAMES, *extra_keys)}
        names.discard(())
        self._names: frozenset[tuple[str, ...]] = frozenset(names)
        self._name_words: frozenset[str] = frozenset(word for name in names for word in name)
        # A secret key holds the last word of a name (a plural: its singular's, and more), so
        # lower-cased it holds one of these.
        last_words = {name[-1] for name in map(_words, (*_SECRET_NAMES, *extra_keys)) if name}
        self._key_words: tuple[str, ...] = tuple(
            sorted(w for w in last_words if not any(o != w and o in w for o in last_words))
        )
        self._looked_for: tuple[str, ...] | None = (
            None if patterns else self._key_words + _SHAPE_STARTS
        )  # None: an extra pattern can match anything, no shortcut

    def is_secret_key(self, key: str) -> bool:
        """Whether values under `key` are redacted whole (rule 1 of the module docstring)."""
        words = _words(key)
        if words in self._names:
            return True
        if self._name_words.isdisjoint(words):
            return False
        for name in self._names:
            size = len(name)
            if len(words) <= size:
                continue
            if words[:size] == name:
                rest = words[size:]
            elif words[-size:] == name:
                rest = words[:-size]
            else:
                continue
            if _METRIC_WORDS.isdisjoint(rest):
                return True
        return False

    def redact_json(self, value: Any) -> Any:
        """Redact `value` and return it: dicts and lists are changed in place and returned,
        a string is returned redacted, other values unchanged. Top-level ``seq``, ``ts`` and
        ``type`` of a dict are never touched."""
        if isinstance(value, str):
            return self._redact_text(value, 0)
        if isinstance(value, dict | list):
            self._redact_tree(value, 0, _ENVELOPE_KEYS)
        return value

    def redact_text(self, text: str) -> str:
        """The redacted copy of one string (rules 2 and 3)."""
        return self._redact_text(text, 0)

    def may_hold_secrets(self, json_text: str) -> bool:
        """A cheap test of JSON text: `False` only if `redact_json_text(json_text)` would give
        it back unchanged (substring searches of the text made lower-case; always `True` with
        `extra_patterns`)."""
        if self._looked_for is None:
            return True
        lowered = json_text.lower()
        if "\\u" in lowered and _ESCAPED_LETTER.search(lowered):
            return True
        return any(map(lowered.__contains__, self._looked_for))

    def redact_json_text(self, json_text: str) -> str:
        """JSON text with its value redacted as `redact_json` redacts it (the top-level
        ``seq``, ``ts`` and ``type`` kept): `json_text` itself when nothing changed, so text
        without secrets keeps its bytes; otherwise the redacted value encoded compactly,
        non-ASCII kept (as pydantic's `model_dump_json` writes). `InvalidRecord` (a
        `ValueError`) if it is not JSON."""
        if not self.may_hold_secrets(json_text):
            return json_text
        try:
            value = json.loads(json_text)
        except (ValueError, RecursionError) as error:
            raise InvalidRecord(f"redact_json_text: not JSON text ({error})") from None
        if isinstance(value, str):
            redacted = self._redact_text(value, 0)
            changed, value = redacted != value, redacted
        elif isinstance(value, dict | list):
            changed = self._redact_tree(value, 0, _ENVELOPE_KEYS)
        else:
            changed = False
        return compact_json(value) if changed else json_text

    def _redact_tree(
        self, root: dict[Any, Any] | list[Any], depth: int, protected: frozenset[str]
    ) -> bool:
        """Redact a container in place without recursion; True if anything changed."""
        changed = False
        stack: list[dict[Any, Any] | list[Any]] = [root]
        seen: set[int] = set()
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            is_dict = isinstance(node, dict)
            items = list(node.items()) if isinstance(node, dict) else list(enumerate(node))
            for key, child in items:
                if node is root and key in protected:
                    continue
                if is_dict and isinstance(key, str) and self.is_secret_key(key):
                    new: Any = REDACTED
                elif isinstance(child, str):
                    new = self._redact_text(child, depth)
                else:
                    if isinstance(child, dict | list):
                        stack.append(child)
                    continue
                if not (isinstance(child, str) and new == child):
                    node[key] = new
                    changed = True
        return changed

    def _redact_text(self, text: str, depth: int) -> str:
        if depth < _MAX_EMBEDDED_DEPTH and _JSON_START.match(text):
            embedded = self._redact_embedded(text, depth)
            if embedded is not None:
                return embedded
        redacted = _SHAPES.sub(_replace_shape, text)
        if ("=" in redacted or ":" in redacted) and self._may_name_a_secret(redacted):
            redacted = self._redact_settings(redacted)
        for pattern in self._patterns:
            redacted = pattern.sub(REDACTED, redacted)
        return redacted

    def _may_name_a_secret(self, text: str) -> bool:
        """False only if no key in `text` can name a secret (the settings rule's shortcut)."""
        lowered = text.lower()
        return any(map(lowered.__contains__, self._key_words))

    def _redact_settings(self, text: str) -> str:
        """`text` with the value of each `KEY=value` / `KEY: value` (`_SETTING_HEAD`, then
        `_SETTING_VALUE`) whose key names a secret redacted. After a key that does not, the
        search goes on right after its separator, so that a setting inside its value is found
        too (``pw: secret='x'``). Each character is read a bounded number of times."""
        parts: list[str] = []
        done = position = 0
        while (head := _SETTING_HEAD.search(text, position)) is not None:
            position = head.end()
            key = head.group("colon_key") or head.group("equals_key") or head.group("quoted_key")
            if not self.is_secret_key(key):
                continue
            found = _SETTING_VALUE.match(text, head.end())
            if found is None and head.group("auth") is not None:  # the auth word is the value
                found = _SETTING_VALUE.match(text, head.start("auth"))
            if found is None:
                continue
            value = REDACTED
            for group, quote in (("double", '"'), ("single", "'")):
                if found.group(group) is not None:
                    value = f"{quote}{REDACTED}{quote}"
            parts += (text[done : head.start()], text[head.start() : found.start()], value)
            done = position = found.end()
        if not parts:
            return text
        parts.append(text[done:])
        return "".join(parts)

    def _redact_embedded(self, text: str, depth: int) -> str | None:
        """`text` redacted as JSON (itself if nothing changed), or None if it is not JSON."""
        try:
            parsed = json.loads(text)
        except (ValueError, RecursionError):
            return None
        if not isinstance(parsed, dict | list):
            return None
        if not self._redact_tree(parsed, depth + 1, frozenset()):
            return text
        try:
            return compact_json(parsed)
        except (ValueError, RecursionError):
            return None
