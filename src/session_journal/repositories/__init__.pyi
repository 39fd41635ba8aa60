"""For type checkers: the old path `session_journal.repositories` names
`session_journal.storage.repositories` (see `session_journal._moved`)."""

from session_journal.storage.repositories import *  # noqa: F403
