"""For type checkers: the old path `session_journal.arguments` names
`session_journal._arguments` (see `session_journal._moved`)."""

from session_journal._arguments import *  # noqa: F403
