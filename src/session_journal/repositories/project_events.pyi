"""For type checkers: the old path `session_journal.repositories.project_events` names
`session_journal.storage.repositories.project_events` (see `session_journal._moved`)."""

from session_journal.storage.repositories.project_events import *  # noqa: F403
