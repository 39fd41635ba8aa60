"""For type checkers: the old path `session_journal.backfill` names
`session_journal.storage.backfill` (see `session_journal._moved`)."""

from session_journal.storage.backfill import *  # noqa: F403
