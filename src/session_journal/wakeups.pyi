"""For type checkers: the old path `session_journal.wakeups` names
`session_journal.follow.wakeups` (see `session_journal._moved`)."""

from session_journal.follow.wakeups import *  # noqa: F403
