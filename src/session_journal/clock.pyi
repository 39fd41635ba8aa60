"""For type checkers: the old path `session_journal.clock` names
`session_journal._clock` (see `session_journal._moved`)."""

from session_journal._clock import *  # noqa: F403
