"""`session-journal serve`: its arguments; the command itself is the web layer's
(`session_journal.web._serve`), imported when it runs (it needs the `web` extra)."""

from __future__ import annotations

import argparse

from ._types import Commands, bounded_int, seconds


def add_serve_command(commands: Commands) -> None:
    """`serve`."""
    serve = commands.add_parser(
        "serve", help="serve the feed over HTTP (the `web` extra; docs: Serving the feed)"
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument(
        "--port",
        type=bounded_int(65535, minimum=0),
        default=8765,
        help="port to bind (default 8765; 0: any free port, printed at start)",
    )
    serve.add_argument(
        "--allowed-host",
        action="append",
        dest="allowed_hosts",
        default=[],
        metavar="H",
        help="a name the Host header may carry besides the bind host, localhost, 127.0.0.1 and "
        "[::1] (repeatable; the name a proxy forwards)",
    )
    serve.add_argument(
        "--cors-origin",
        action="append",
        dest="cors_origins",
        default=[],
        metavar="ORIGIN",
        help="an origin (https://app.example) whose pages may call the API (repeatable)",
    )
    serve.add_argument(
        "--token-file",
        metavar="PATH",
        help="tokens, one 'TOKEN [WORKSPACE]' a line (default: $SESSION_JOURNAL_WEB_TOKEN)",
    )
    serve.add_argument(
        "--no-token",
        action="store_true",
        help="serve without a token (refused unless the host is a loopback address)",
    )
    serve.add_argument(
        "--page-hidden-close",
        type=seconds(1.0, 86400.0),
        default=60.0,
        metavar="SECONDS",
        help="the operator page closes its stream when every tab has been hidden this long "
        "(1 to 86400; default 60)",
    )
    serve.add_argument(
        "--no-redact",
        action="store_true",
        help="serve events, transcripts, questions and search hits as stored, secrets included "
        "(by default they are redacted: [REDACTED])",
    )
    serve.add_argument(
        "--metrics-open-on-loopback",
        action="store_true",
        help="answer GET /metrics without a token to clients on a loopback address (a "
        "Prometheus on this host; not behind a reverse proxy on this host)",
    )
    serve.set_defaults(handler=serve_command)


def serve_command(url: str, args: argparse.Namespace) -> int:
    """`session-journal serve`: the web layer's, imported on first use (it sits above the CLI,
    and needs the `web` extra)."""
    from ..web._serve import serve_command as serve

    return serve(url, args)
