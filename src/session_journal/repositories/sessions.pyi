"""For type checkers: the old path `session_journal.repositories.sessions` names
`session_journal.storage.repositories.sessions` (see `session_journal._moved`)."""

from session_journal.storage.repositories.sessions import *  # noqa: F403
