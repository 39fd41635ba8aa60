"""For type checkers: the old path `session_journal.validation` names
`session_journal._validation` (see `session_journal._moved`)."""

from session_journal._validation import *  # noqa: F403
