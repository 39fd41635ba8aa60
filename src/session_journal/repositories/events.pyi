"""For type checkers: the old path `session_journal.repositories.events` names
`session_journal.storage.repositories.events` (see `session_journal._moved`)."""

from session_journal.storage.repositories.event_pages import *  # noqa: F403
from session_journal.storage.repositories.events import *  # noqa: F403
