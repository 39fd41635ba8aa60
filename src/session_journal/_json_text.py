"""The two JSON text encodings the package writes (a leaf module: no I/O, no database)."""

from __future__ import annotations

import json
from typing import Any


def compact_json(value: Any) -> str:
    """`value` as JSON without insignificant whitespace, non-ASCII kept, keys in their order:
    a journal line, and embedded JSON that redaction re-encodes."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def canonical_json(value: Any) -> str:
    """`value` as canonical JSON: compact as `compact_json`, with every object's keys sorted, so
    equal values encode to equal text (activity snapshots compare by it, relay digests hash
    it)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
