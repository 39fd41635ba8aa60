"""For type checkers: the old path `session_journal.services.tail` names
`session_journal.follow.window` (see `session_journal._moved`)."""

from session_journal.follow.window import *  # noqa: F403
