"""For type checkers: the old path `session_journal.services.tail` names
`session_journal.storage.tail` (see `session_journal._moved`)."""

from session_journal.storage.tail import *  # noqa: F403
