"""For type checkers: the old path `session_journal.bound` names
`session_journal.storage.bound` (see `session_journal._moved`)."""

from session_journal.storage.bound import *  # noqa: F403
