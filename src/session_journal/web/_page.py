"""The operator page (docs: The operator page): static HTML, CSS and JavaScript modules shipped
in the package under `page/`, read once when the app is made and served without a token (they
hold no data; the page asks for the token and exchanges it for the cookie)."""

from __future__ import annotations

from importlib import resources

from starlette.requests import Request
from starlette.responses import Response

from ._problems import not_found

PAGE_FILES = {
    "page.css": "text/css; charset=utf-8",
    "icon.svg": "image/svg+xml",
    "app.js": "text/javascript; charset=utf-8",
    "api.js": "text/javascript; charset=utf-8",
    "audience.js": "text/javascript; charset=utf-8",
    "dom.js": "text/javascript; charset=utf-8",
    "feed.js": "text/javascript; charset=utf-8",
    "gap.js": "text/javascript; charset=utf-8",
    "lag.js": "text/javascript; charset=utf-8",
    "rate.js": "text/javascript; charset=utf-8",
    "sse.js": "text/javascript; charset=utf-8",
    "stream.js": "text/javascript; charset=utf-8",
    "summaries.js": "text/javascript; charset=utf-8",
    "tabs.js": "text/javascript; charset=utf-8",
    "time.js": "text/javascript; charset=utf-8",
    "timeline.js": "text/javascript; charset=utf-8",
    "timelinechart.js": "text/javascript; charset=utf-8",
    "transport.js": "text/javascript; charset=utf-8",
    "views.js": "text/javascript; charset=utf-8",
}
"""The files under `/page/` and their types; any other name is 404 (no path from the URL
reaches the file system)."""
_HIDDEN_CLOSE = b"{{page_hidden_close_s}}"


class Page:
    """`/` (the page, with the app's settings in its `<meta>` tags) and `/page/{name}`."""

    def __init__(self, hidden_close_s: float) -> None:
        folder = resources.files(__package__) / "page"
        html = (folder / "index.html").read_bytes()
        if html.count(_HIDDEN_CLOSE) != 1:
            raise RuntimeError("page/index.html lost its page_hidden_close_s placeholder")
        self._index = html.replace(_HIDDEN_CLOSE, b"%g" % hidden_close_s)
        self._files = {name: (folder / name).read_bytes() for name in PAGE_FILES}

    async def index(self, request: Request) -> Response:
        """The page (its own query string is the page's: views and filters)."""
        return Response(self._index, media_type="text/html; charset=utf-8")

    async def file(self, request: Request) -> Response:
        """One of `PAGE_FILES`."""
        name: str = request.path_params["name"]
        body = self._files.get(name)
        if body is None:
            raise not_found(f"page file {name[:100]!r}")
        return Response(body, headers={"content-type": PAGE_FILES[name]})
