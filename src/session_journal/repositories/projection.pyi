"""For type checkers: the old path `session_journal.repositories.projection` names
`session_journal.storage.repositories.projection` (see `session_journal._moved`)."""

from session_journal.storage.repositories.projection import *  # noqa: F403
