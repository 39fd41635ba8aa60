"""The command line's parser: the top-level options, then each module's sub-commands, each
declared beside its handler (`set_defaults(handler=...)`)."""

from __future__ import annotations

import argparse
import importlib.metadata

from ._consumers import add_consumers_commands
from ._db import add_db_commands
from ._events import add_demo_command, add_events_command
from ._journal import add_journal_commands, add_search_command
from ._serve import add_serve_command
from ._sessions import add_sessions_commands


def build_parser() -> argparse.ArgumentParser:
    """The parser of the whole command line, every sub-command included."""
    parser = argparse.ArgumentParser(
        prog="session-journal", description="Durable sessions and their ordered event log."
    )
    parser.add_argument(
        "--url",
        help="database URL (default: $SESSION_JOURNAL_DATABASE_URL, else "
        "sqlite:///session-journal.db)",
    )
    parser.add_argument(
        "--version", action="version", version=f"session-journal {_installed_version()}"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    add_db_commands(commands)
    add_events_command(commands)
    add_demo_command(commands)
    add_journal_commands(commands)
    add_sessions_commands(commands)
    add_consumers_commands(commands)
    add_search_command(commands)
    add_serve_command(commands)
    _name_the_commands(parser)
    return parser


def _name_the_commands(parser: argparse.ArgumentParser) -> None:
    """Give each group of sub-commands its choices as its name, so that a missing one is
    reported by listing them (`required: {upgrade,downgrade,...}`, not `required: db_command`)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            action.metavar = "{" + ",".join(action.choices) + "}"
            for child in action.choices.values():
                _name_the_commands(child)


def _installed_version() -> str:
    try:
        return importlib.metadata.version("session-journal")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout not installed
        return "(not installed)"
