"""`create_app`: the ASGI application of the feed (Starlette), its JSON routes and the errors
they answer; the stream route is in `_streams.py`, the checks every request passes in
`_guard.py`."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Host, Mount, Route, Router

from session_journal import (
    CursorAhead,
    CursorExpired,
    EventRate,
    InvalidRecord,
    SessionJournalError,
    SessionState,
    Store,
    StoreClosed,
    TransientStorageError,
)
from session_journal.aio import AsyncStore

from ._guard import FailedAuthentications, Guard, Principal
from ._metrics import MetricsRoute
from ._page import Page
from ._problems import Problem, bad_request, not_found
from ._query import Query, visible_session
from ._settings import WebSettings
from ._streams import STREAM_PARAMETERS, StreamRoute, _Hub

LOG = logging.getLogger("session_journal.web")

MAX_WAIT_S = 55.0
"""The longest long-poll (`wait`) of `GET /api/events`: under the 60 s most proxies allow."""
MAX_EVENTS = 1000
MAX_SESSIONS = 200
MAX_TRANSCRIPT = 1000
MAX_HITS = 1000
_JSON = "application/json"


def _page_with(as_of_seq: int, model_json: str) -> bytes:
    """A model's JSON object with `as_of_seq` as its first member."""
    return b'{"as_of_seq":%d,%s' % (as_of_seq, model_json[1:].encode())


@contextmanager
def _naming(parameter: str) -> Iterator[None]:
    """`InvalidRecord` raised inside becomes `bad_request` naming `parameter`."""
    try:
        yield
    except InvalidRecord as error:
        raise bad_request(parameter, str(error)) from None


def _principal(request: Request) -> Principal:
    principal: Principal = request.state.principal
    return principal


def _session_id(request: Request) -> str:
    session_id: str = request.path_params["session_id"]
    return session_id


class _Api:
    """The JSON routes, on one async store."""

    def __init__(self, store: AsyncStore, hub: _Hub, failures: FailedAuthentications) -> None:
        self.store = store
        self.hub = hub
        self.failures = failures
        self.redaction = hub.redaction  # the app's (`WebSettings.redact`)

    async def healthz(self, request: Request) -> Response:
        return Response(b'{"ok":true}', media_type=_JSON)

    async def events(self, request: Request) -> Response:
        principal = _principal(request)
        allowed = frozenset({"after_seq", "before_seq", "limit", "wait"}) | STREAM_PARAMETERS
        query = Query(request.scope["query_string"], allowed, frozenset({"type"}))
        event_filter = query.event_filter(principal.workspace)
        after, before = query.seq("after_seq"), query.seq("before_seq")
        limit = query.integer("limit", 1, MAX_EVENTS, 100)
        wait = query.seconds("wait", MAX_WAIT_S)
        if after is not None and before is not None:
            raise bad_request("before_seq", "give after_seq or before_seq, not both")
        if before is not None and wait:
            raise bad_request("wait", "a page before a seq is history: it does not wait")
        if principal.workspace is not None and event_filter.session_id is not None:
            await visible_session(self.store, principal.workspace, event_filter.session_id)
        events = self.store.events
        if before is not None:
            body = await events.load_before_json(event_filter, before_seq=before, limit=limit)
        elif wait:
            body = await self._long_poll(event_filter, after, limit, wait)
        else:
            body = await events.load_json(event_filter, after, limit)
        return Response(await self.redaction.page(body), media_type=_JSON)

    async def rate(self, request: Request) -> Response:
        """`GET /api/events/rate?minutes=15`: events recorded per minute over the last
        `minutes` (1 to 60), of the workspace given (a token bound to a workspace: its own)."""
        principal = _principal(request)
        query = Query(request.scope["query_string"], frozenset({"minutes", "workspace_id"}))
        workspace = query.event_filter(principal.workspace).workspace_id
        minutes = query.integer("minutes", 1, EventRate.MAX_MINUTES, 15)
        rate = await self.store.events.rate(minutes, workspace_id=workspace)
        document = {"workspace_id": workspace, **rate.model_dump(mode="json")}
        return Response(await self.redaction.document(document), media_type=_JSON)

    async def _long_poll(
        self, event_filter: Any, after: int | None, limit: int, wait: float
    ) -> bytes:
        """`wait_json`, ended by `shutdown_streams` (503 `unavailable`: ask another server)."""
        stopping = Problem("unavailable", "the server is stopping", headers={"Retry-After": "1"})
        task = asyncio.current_task()
        if self.hub.shutting_down or task is None:
            raise stopping
        self.hub.polls.add(task)
        try:
            return await self.store.events.wait_json(event_filter, after, limit, timeout=wait)
        except asyncio.CancelledError:
            if not self.hub.shutting_down:
                raise
            task.uncancel()
            raise stopping from None
        finally:
            self.hub.polls.discard(task)

    async def sessions(self, request: Request) -> Response:
        principal = _principal(request)
        query = Query(
            request.scope["query_string"], frozenset({"workspace_id", "state", "before", "limit"})
        )
        workspace = query.event_filter(principal.workspace).workspace_id
        state_text = query.text("state")
        state = None
        if state_text is not None:
            try:
                state = SessionState(state_text)
            except ValueError:
                known = ", ".join(s.value for s in SessionState)
                raise bad_request("state", f"must be one of {known}") from None
        limit = query.integer("limit", 1, MAX_SESSIONS, 50)
        async with self.store.snapshot() as snapshot:
            with _naming("before"):
                page = await snapshot.sessions.page(
                    workspace_id=workspace, state=state, before=query.text("before"), limit=limit
                )
            page_json = await self.redaction.json_text(page.model_dump_json())
            body = _page_with(snapshot.as_of_seq, page_json)
        return Response(body, media_type=_JSON)

    async def session_counts(self, request: Request) -> Response:
        """`GET /api/session-counts`: how many sessions are in each state (every state, 0
        included) and in all, in the workspace given (a token bound to a workspace: its own),
        as of `as_of_seq`."""
        principal = _principal(request)
        query = Query(request.scope["query_string"], frozenset({"workspace_id"}))
        workspace = query.event_filter(principal.workspace).workspace_id
        async with self.store.snapshot() as snapshot:
            counts = await snapshot.sessions.count_by_state(workspace_id=workspace)
            document = {
                "as_of_seq": snapshot.as_of_seq,
                "workspace_id": workspace,
                "total": sum(counts.values()),
                "counts": {state.value: count for state, count in counts.items()},
            }
        return Response(await self.redaction.document(document), media_type=_JSON)

    async def session(self, request: Request) -> Response:
        principal, session_id = _principal(request), _session_id(request)
        Query(request.scope["query_string"], frozenset())
        async with self.store.snapshot() as snapshot:
            record = await visible_session(snapshot, principal.workspace, session_id)
            activity = await snapshot.activity.get(session_id)
            operation = await snapshot.checkpoints.get(session_id)
            document = {
                "as_of_seq": snapshot.as_of_seq,
                "session": record.model_dump(mode="json"),
                "activity": None if activity is None else activity.model_dump(mode="json"),
                "checkpoint_operation": (
                    None if operation is None else operation.model_dump(mode="json")
                ),
            }
        return Response(await self.redaction.document(document), media_type=_JSON)

    async def state(self, request: Request) -> Response:
        return await self._materialized(request, questions=False)

    async def questions(self, request: Request) -> Response:
        return await self._materialized(request, questions=True)

    async def _materialized(self, request: Request, *, questions: bool) -> Response:
        principal, session_id = _principal(request), _session_id(request)
        Query(request.scope["query_string"], frozenset())
        async with self.store.snapshot() as snapshot:
            await visible_session(snapshot, principal.workspace, session_id)
            state = await snapshot.projection.load(session_id)
            if state is None:
                raise not_found(f"session {session_id!r}")
            if questions:
                document: dict[str, Any] = {
                    "as_of_seq": snapshot.as_of_seq,
                    "session_id": session_id,
                    "questions": [q.model_dump(mode="json") for q in state.pending_elicitations],
                }
            else:
                document = {
                    "as_of_seq": snapshot.as_of_seq,
                    "state": state.model_dump(mode="json", exclude={"transcript"}),
                }
        return Response(await self.redaction.document(document), media_type=_JSON)

    async def transcript(self, request: Request) -> Response:
        principal, session_id = _principal(request), _session_id(request)
        query = Query(request.scope["query_string"], frozenset({"before_position", "limit"}))
        before = query.seq("before_position")
        limit = query.integer("limit", 1, MAX_TRANSCRIPT, 100)
        async with self.store.snapshot() as snapshot:
            await visible_session(snapshot, principal.workspace, session_id)
            page = await snapshot.projection.transcript(
                session_id, before_position=before, limit=limit
            )
            if page is None:
                raise not_found(f"session {session_id!r}")
            page_json = await self.redaction.json_text(page.model_dump_json())
            body = _page_with(snapshot.as_of_seq, page_json)
        return Response(body, media_type=_JSON)

    async def search(self, request: Request) -> Response:
        principal = _principal(request)
        query = Query(request.scope["query_string"], frozenset({"q", "session_id", "limit"}))
        text = query.text("q")
        if text is None:
            raise bad_request("q", "the search query is required")
        session_id = query.event_filter(None).session_id
        limit = query.integer("limit", 1, MAX_HITS, 20)
        if principal.workspace is not None and session_id is not None:
            await visible_session(self.store, principal.workspace, session_id)
        with _naming("q"):
            hits = await self.store.index.search(
                text, session_id=session_id, limit=limit, workspace_id=principal.workspace
            )
        document = {"hits": [dataclasses.asdict(hit) for hit in hits]}
        return Response(await self.redaction.document(document), media_type=_JSON)

    async def consumers(self, request: Request) -> Response:
        """`GET /api/consumers`: every durable consumer's status (read-only), by name, with the
        frontier of the read (`as_of_seq`); a token bound to a workspace sees the consumers
        whose filter is bound to it."""
        workspace = _principal(request).workspace
        Query(request.scope["query_string"], frozenset())
        found = await self.store.consumers.list()
        as_of_seq = found[0].latest_seq if found else await self.store.events.latest_seq()
        document = {
            "as_of_seq": as_of_seq,
            "consumers": [
                status.model_dump(mode="json")
                for status in found
                if workspace is None or status.filter.workspace_id == workspace
            ],
        }
        return Response(await self.redaction.document(document), media_type=_JSON)

    async def status(self, request: Request) -> Response:
        Query(request.scope["query_string"], frozenset())
        if _principal(request).workspace is not None:
            raise not_found("server status (for tokens of every workspace)")
        document = {**self.hub.status(), "auth_failures": self.failures.refused}
        return Response(json.dumps(document, separators=(",", ":")).encode(), media_type=_JSON)

    async def login(self, request: Request) -> Response:
        """`POST /api/session`: the bearer token of the header (the guard checked it) as the
        cookie the operator page's requests carry, named by the guard for this request
        (`WebSettings.cookie_name`, else `_guard.cookie_name`: the port and the mount path)."""
        Query(request.scope["query_string"], frozenset())
        authorization = request.headers.get("authorization")
        response = Response(status_code=204)
        if authorization is not None:  # absent only on a server without tokens
            token = authorization.strip().partition(" ")[2].strip()
            response.set_cookie(
                request.state.cookie_name,
                token,
                httponly=True,
                samesite="strict",
                path="/",
                secure=request.url.scheme == "https",
            )
        return response

    async def expired_body(self, cursor: int) -> dict[str, object]:
        """The members of a `cursor_expired` answer besides `code`: the cursor, the floor, the
        oldest retained seq (`None`: nothing retained) and the frontier, read together."""
        page = await self.store.events.load(after_seq=0, limit=1)
        return {
            "cursor": cursor,
            "pruned_through": page.pruned_through,
            "oldest_retained_seq": page.events[0].seq if page.events else None,
            "latest_seq": page.latest_seq,
        }


def _problem_response(problem: Problem) -> Response:
    return Response(
        problem.body(),
        status_code=problem.status,
        media_type="application/problem+json",
        headers=problem.headers,
    )


def _handlers(api: _Api) -> dict[Any, Callable[[Request, Exception], Awaitable[Response]]]:
    """The exception handlers: every error is a problem document with its `code`."""

    async def problem(request: Request, error: Exception) -> Response:
        assert isinstance(error, Problem)
        return _problem_response(error)

    async def http(request: Request, error: Exception) -> Response:
        assert isinstance(error, HTTPException)
        if error.status_code == 405:
            return _problem_response(
                Problem(
                    "method_not_allowed",
                    "this route does not take this method",
                    headers=dict(error.headers or {}),
                )
            )
        return _problem_response(not_found(f"route {request.url.path[:200]!r}"))

    async def journal(request: Request, error: Exception) -> Response:
        if isinstance(error, InvalidRecord):
            return _problem_response(Problem("bad_request", str(error)))
        if isinstance(error, CursorAhead):
            return _problem_response(Problem("cursor_ahead", str(error)))
        if isinstance(error, CursorExpired):
            try:
                extra = await api.expired_body(error.cursor)
            except (StoreClosed, TransientStorageError) as closed:  # closed meanwhile, say
                return _problem_response(
                    Problem("unavailable", str(closed), headers={"Retry-After": "1"})
                )
            return _problem_response(Problem("cursor_expired", str(error), extra=extra))
        if isinstance(error, StoreClosed | TransientStorageError):
            return _problem_response(
                Problem("unavailable", str(error), headers={"Retry-After": "1"})
            )
        LOG.error("a request failed: %s", error, exc_info=error)
        return _problem_response(Problem("internal", "the server failed; see its log"))

    async def internal(request: Request, error: Exception) -> Response:
        LOG.error("a request failed", exc_info=error)
        return _problem_response(Problem("internal", "the server failed; see its log"))

    return {
        Problem: problem,
        HTTPException: http,
        SessionJournalError: journal,
        Exception: internal,
    }


def create_app(store: Store | AsyncStore, settings: WebSettings | None = None) -> Starlette:
    """The ASGI application serving `store`'s feed: JSON pages, long-poll and Server-Sent
    Events (docs: Serving the feed). `store` is a `Store` (the app reads it through an
    `AsyncStore.from_store` view of its own) or an `AsyncStore`; `settings` default to
    `WebSettings()`, which refuses to serve without tokens unless `allow_no_token=True`.
    Mount it or run it with any ASGI server; call `shutdown_streams(app)` before the server
    stops (a mounted app gets no lifespan of its own)."""
    if settings is None:
        settings = WebSettings()
    if not isinstance(settings, WebSettings):
        raise InvalidRecord(f"settings must be WebSettings, got {type(settings).__name__}")
    if isinstance(store, AsyncStore):
        async_store, owned = store, False
    elif isinstance(store, Store):
        async_store, owned = AsyncStore.from_store(store), True
    else:
        raise InvalidRecord(f"store must be a Store or an AsyncStore, got {type(store).__name__}")
    hub = _Hub(async_store, settings)
    failures = FailedAuthentications()
    answers: Counter[int] = Counter()  # responses by status, counted by the guard
    api = _Api(async_store, hub, failures)
    metrics = MetricsRoute(async_store, hub, answers, failures)
    page = Page(settings.page_hidden_close_s)

    get = ["GET"]
    routes = [
        Route("/", page.index, methods=get),
        Route("/page/{name}", page.file, methods=get),
        Route("/healthz", api.healthz, methods=get),
        Route("/api/events", api.events, methods=get),
        Route("/api/events/stream", StreamRoute(hub, api.expired_body)),
        Route("/api/events/rate", api.rate, methods=get),
        Route("/api/sessions", api.sessions, methods=get),
        Route("/api/sessions/{session_id}", api.session, methods=get),
        # Not under /api/sessions/: any name there is a session's id.
        Route("/api/session-counts", api.session_counts, methods=get),
        Route("/api/sessions/{session_id}/state", api.state, methods=get),
        Route("/api/sessions/{session_id}/transcript", api.transcript, methods=get),
        Route("/api/sessions/{session_id}/questions", api.questions, methods=get),
        Route("/api/search", api.search, methods=get),
        Route("/api/consumers", api.consumers, methods=get),
        Route("/api/status", api.status, methods=get),
        Route("/api/session", api.login, methods=["POST"]),
        Route("/metrics", metrics.scrape, methods=get),
    ]

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await shutdown_streams(app)

    app = Starlette(
        # The routes in a router of their own, which takes `redirect_slashes=False`
        # (`/api/events/` is 404, not a redirect); Starlette's takes no such argument.
        routes=[Mount("/", app=Router(routes=routes, redirect_slashes=False))],
        middleware=[Middleware(Guard, settings=settings, failures=failures, answers=answers)],
        exception_handlers=_handlers(api),
        lifespan=lifespan,
    )
    app.state.session_journal_hub = hub
    app.state.session_journal_metrics = metrics.registry  # the app's own (`/metrics`)
    # The async view made here for a sync `Store` (closed by `shutdown_streams`); `None` for an
    # `AsyncStore`, which stays its caller's.
    app.state.session_journal_view = async_store if owned else None
    return app


async def shutdown_streams(app: Any) -> None:
    """Tell every open stream of `app` (made by `create_app`) `event: shutdown` and close
    them within about a second (a stream whose client takes nothing is cut), answer the
    long-polls in progress 503 `unavailable`, and refuse new streams (503). For an app made
    on a sync `Store`, it then closes the async view the app made of it and returns once the
    view's worker threads have ended (the `Store` stays open: it is its caller's); requests
    still in progress and later ones answer their normal answer or 503 `unavailable`. Call it
    when the stop is asked for, before the server waits for its open responses (a stream never
    ends by itself): from signal handling, or from a lifespan where the server runs the
    lifespan's shutdown first (uvicorn runs it after open responses end; docs: Serving the
    feed). Calling it again does nothing more."""
    state = getattr(app, "state", None)
    hub = getattr(state, "session_journal_hub", None)
    if not isinstance(hub, _Hub):
        raise InvalidRecord("shutdown_streams: app was not made by session_journal.web.create_app")
    await hub.shutdown()
    view = getattr(state, "session_journal_view", None)
    if isinstance(view, AsyncStore):
        await view.close()


def feeds_of(app: Any) -> list[Starlette]:
    """The apps made by `create_app` that `app` is or mounts, in the order of its routes: found
    through Starlette's public `routes` and the `app` of each `Mount` and `Host`, recursively
    (an app mounted behind a middleware of its own is not found)."""
    found: list[Starlette] = []
    seen: set[int] = set()
    pending = [app]
    while pending:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(getattr(getattr(current, "state", None), "session_journal_hub", None), _Hub):
            found.append(current)
            continue
        routes = getattr(current, "routes", None)
        if isinstance(routes, list):
            pending.extend(route.app for route in routes if isinstance(route, Mount | Host))
    return found
