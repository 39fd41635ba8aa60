"""The feed over HTTP: `create_app(store, WebSettings(...))` is an ASGI application (Starlette)
serving the event log as JSON pages, long-polls and Server-Sent Events that resume exactly,
plus snapshots of sessions, transcripts and search; `session-journal serve` runs it with
uvicorn, and `run(app)` runs an application that mounts it. Install the `web` extra (`pip
install 'session-journal[web]'`). The docs page "Serving the feed" lists every route, event,
status code and setting.

This layer uses only the package's public API (`session_journal`, `session_journal.aio`)."""

from __future__ import annotations

try:
    import starlette  # noqa: F401
except ImportError as error:  # pragma: no cover - exercised without the extra
    from session_journal import MissingDependency

    raise MissingDependency(
        "session_journal.web needs Starlette: pip install 'session-journal[web]'"
    ) from error

from ._app import create_app, shutdown_streams
from ._serve import run
from ._settings import WebSettings

__all__ = ["WebSettings", "create_app", "run", "shutdown_streams"]
