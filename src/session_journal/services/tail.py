"""The old path of `session_journal.follow.window`, kept for one release
(see `session_journal._moved`)."""

from .._moved import alias

alias(__name__)
