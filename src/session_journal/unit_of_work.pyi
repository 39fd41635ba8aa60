"""For type checkers: the old path `session_journal.unit_of_work` names
`session_journal.storage.unit_of_work` (see `session_journal._moved`)."""

from session_journal.storage.protocols import *  # noqa: F403
from session_journal.storage.unit_of_work import *  # type: ignore[no-redef]  # noqa: F403
