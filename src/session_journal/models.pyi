"""For type checkers: the old path `session_journal.models` names
`session_journal.storage.models` (see `session_journal._moved`)."""

from session_journal.storage.models import *  # noqa: F403
