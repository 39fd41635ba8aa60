"""For type checkers: the old path `session_journal.repositories.activity` names
`session_journal.storage.repositories.activity` (see `session_journal._moved`)."""

from session_journal.storage.repositories.activity import *  # noqa: F403
