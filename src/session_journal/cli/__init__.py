"""`session-journal`: a thin command line over the library.

Exit codes: 0 ok, 1 failure (one line on stderr, no traceback), 2 usage.

`main` parses the arguments (`_parser`) and runs the handler the sub-command declared. Each
module declares its sub-commands beside their handlers (`add_parser`, then
`set_defaults(handler=...)`): `_db` (`db`), `_events` (`events`, `demo`), `_journal` (`journal`,
`search`), `_sessions` (`sessions`), `_consumers` (`consumers`), `_serve` (`serve`, run by the
web layer, `session_journal.web._serve`); what they share is in `_common` and `_types`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from ..config import resolve_url
from ..errors import SessionJournalError
from ..storage.engines import check_url
from ._common import shown_url
from ._parser import build_parser
from ._types import Handler

__all__ = ["main", "shown_url"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = build_parser().parse_args(argv)
    check: Callable[[argparse.Namespace], None] | None = getattr(args, "check", None)
    if check is not None:  # a usage check argparse cannot make (exit 2), before anything runs
        check(args)
    handler: Handler = args.handler
    try:
        return handler(check_url(resolve_url(args.url)), args)
    except SessionJournalError as error:
        print(f"session-journal: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    except BrokenPipeError:
        # The reader went away (`events | head`): stop quietly, and keep Python from
        # complaining again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
