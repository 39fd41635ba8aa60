"""`session-journal`: a thin command line over the library.

Exit codes: 0 ok, 1 failure (one line on stderr, no traceback), 2 usage.

`main` parses the arguments (`_parser`) and hands each sub-command to its module: `_db` (`db`),
`_events` (`events`, `demo`), `_journal` (`journal`, `search`), `_sessions` (`sessions`); what
they share is in `_common`. `serve` is the web layer's (`session_journal.web._serve`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from ..config import resolve_url
from ..errors import SessionJournalError
from ..storage.engines import check_url
from ._common import shown_url
from ._db import db_command
from ._events import demo_command, events_command
from ._journal import journal_command, search_command
from ._parser import build_parser
from ._sessions import list_command, remove_ended_command

__all__ = ["main", "shown_url"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    removing = args.command == "sessions" and args.sessions_command == "remove-ended"
    if removing and bool(args.ids) == (args.ended_before is not None):
        args.command_parser.error("give session IDs or --ended-before, one of the two")
    try:
        url = check_url(resolve_url(args.url))
        if args.command == "db":
            return db_command(url, args)
        if args.command == "events":
            return events_command(url, args)
        if args.command == "journal":
            return journal_command(args.journal_command, args.path)
        if args.command == "search":
            return search_command(url, args)
        if args.command == "sessions" and args.sessions_command == "list":
            return list_command(url, args)
        if args.command == "sessions":
            return remove_ended_command(url, args)
        if args.command == "serve":
            # The web layer sits above the CLI: imported on first use, only by this command.
            from ..web._serve import serve_command

            return serve_command(url, args)
        return demo_command(url, into_existing=args.into_existing)
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
