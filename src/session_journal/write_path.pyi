"""For type checkers: the old path `session_journal.write_path` names
`session_journal.storage.write_path` (see `session_journal._moved`)."""

from session_journal.storage.calls import *  # noqa: F403
from session_journal.storage.write_path import *  # type: ignore[no-redef]  # noqa: F403
