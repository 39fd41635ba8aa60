"""For type checkers: the old path `session_journal.json_text` names
`session_journal._json_text` (see `session_journal._moved`)."""

from session_journal._json_text import *  # noqa: F403
