"""For type checkers: the old path `session_journal.repositories.checkpoints` names
`session_journal.storage.repositories.checkpoints` (see `session_journal._moved`)."""

from session_journal.storage.repositories.checkpoints import *  # noqa: F403
