"""For type checkers: the old path `session_journal.database` names
`session_journal.storage.database` (see `session_journal._moved`)."""

from session_journal.storage.database import *  # noqa: F403
