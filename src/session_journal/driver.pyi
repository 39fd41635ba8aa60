"""For type checkers: the old path `session_journal.driver` names
`session_journal.storage.driver` (see `session_journal._moved`)."""

from session_journal.storage.driver import *  # noqa: F403
