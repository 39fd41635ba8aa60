"""For type checkers: the old path `session_journal.wakeups` names
`session_journal.storage.wakeups` (see `session_journal._moved`)."""

from session_journal.storage.wakeups import *  # noqa: F403
