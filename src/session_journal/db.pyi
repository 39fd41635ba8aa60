"""For type checkers: the old path `session_journal.db` names
`session_journal.storage.engines` (see `session_journal._moved`)."""

from session_journal.storage.engines import *  # noqa: F403
