"""For type checkers: the old path `session_journal.maintenance` names
`session_journal._maintenance` (see `session_journal._moved`)."""

from session_journal._maintenance import *  # noqa: F403
