"""For type checkers: the old path `session_journal.repositories._dialect` names
`session_journal.storage.repositories._dialect` (see `session_journal._moved`)."""

from session_journal.storage.repositories._dialect import *  # noqa: F403
