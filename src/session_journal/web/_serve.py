"""`session-journal serve`: the app of `create_app` on the configured database, run by uvicorn,
with its tokens, hosts and graceful shutdown (every stream told `event: shutdown`)."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import quote

from session_journal import InvalidRecord, MissingDependency, Store

from ._app import create_app, feeds_of, shutdown_streams
from ._settings import DEFAULT_HOSTS, WebSettings

TOKEN_VARIABLE = "SESSION_JOURNAL_WEB_TOKEN"
"""The environment variable holding the token of `serve` (bound to no workspace)."""
MAX_TOKEN_FILE_BYTES = 1_000_000


def is_loopback(host: str) -> bool:
    """Whether `host` is a loopback address (127.0.0.0/8, ::1) or `localhost`."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def read_tokens(token_file: str | None) -> dict[str, str | None]:
    """The tokens `serve` accepts: the file's lines (`TOKEN [WORKSPACE]`; blank lines and
    `#` comments skipped), else `$SESSION_JOURNAL_WEB_TOKEN`, else none."""
    if token_file is None:
        token = os.environ.get(TOKEN_VARIABLE, "").strip()
        return {token: None} if token else {}
    path = Path(token_file)
    try:
        if path.stat().st_size > MAX_TOKEN_FILE_BYTES:
            raise InvalidRecord(f"--token-file {token_file}: larger than 1 MB")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InvalidRecord(f"--token-file {token_file}: cannot be read ({error})") from None
    tokens: dict[str, str | None] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        parts = line.split()
        if not parts or parts[0].startswith("#"):
            continue
        if len(parts) > 2:
            raise InvalidRecord(
                f"--token-file {token_file}, line {number}: expected 'TOKEN [WORKSPACE]'"
            )
        if parts[0] in tokens:
            raise InvalidRecord(
                f"--token-file {token_file}, line {number}: a token listed twice (which "
                "workspace it sees would depend on the order)"
            )
        tokens[parts[0]] = parts[1] if len(parts) == 2 else None
    if not tokens:
        raise InvalidRecord(f"--token-file {token_file}: holds no token")
    return tokens


def settings_for(args: argparse.Namespace) -> WebSettings:
    """The `WebSettings` of `serve`'s arguments; `InvalidRecord` for a combination it refuses
    (no token on a non-loopback host, `--no-token` beside a token, a short token)."""
    tokens = read_tokens(args.token_file)
    if args.no_token:
        if tokens:
            raise InvalidRecord("--no-token: a token is configured too; give one or the other")
        if "*" in args.allowed_hosts:
            raise InvalidRecord(
                "--no-token with --allowed-host '*': a server without a token must check the "
                "Host header (DNS rebinding); name the hosts"
            )
        if not is_loopback(args.host):
            raise InvalidRecord(
                f"--no-token is refused on {args.host}: only a loopback host (127.0.0.1, ::1, "
                "localhost) may serve without a token"
            )
    elif not tokens:
        raise InvalidRecord(
            f"serve needs a token: set {TOKEN_VARIABLE} or give --token-file (secrets."
            "token_urlsafe(32) makes one); --no-token serves without one on a loopback host"
        )
    host = args.host.lower()
    bind = f"[{host}]" if ":" in host and not host.startswith("[") else host
    hosts = tuple(dict.fromkeys((*DEFAULT_HOSTS, bind, *args.allowed_hosts)))
    return WebSettings(
        tokens=tokens,
        allow_no_token=args.no_token,
        allowed_hosts=hosts,
        cors_origins=tuple(args.cors_origins),
        page_hidden_close_s=args.page_hidden_close,
        redact=not args.no_redact,
        metrics_open_on_loopback=args.metrics_open_on_loopback,
    )


def page_line(address: str, args: argparse.Namespace, tokens: dict[str, str | None]) -> str:
    """What `serve` prints about the operator page: on a terminal, its URL with the token in
    the fragment (a fragment never reaches a server: the page takes it from there and trades
    it for the cookie); otherwise (a log) the plain URL and where the token is."""
    url = f"{address}/"
    if not tokens:
        return f"session-journal: the operator page: {url}"
    if sys.stdout.isatty():
        token = next(iter(tokens))  # the first of the file, or the environment's
        return f"session-journal: the operator page: {url}#token={quote(token, safe='')}"
    where = TOKEN_VARIABLE if args.token_file is None else f"the first of {args.token_file}"
    return f"session-journal: the operator page: {url} (its token: {where})"


class _QueryStripped(logging.Filter):
    """Drops the query string from uvicorn's access log lines (a URL may carry what a client
    should not have put there)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], args[2].partition("?")[0], *args[3:])
        return True


def serve_command(url: str, args: argparse.Namespace) -> int:
    """Run `serve` until SIGTERM or Ctrl-C; 0 then."""
    uvicorn = _uvicorn("session-journal serve")
    settings = settings_for(args)
    sockets = listening_sockets(args.host.strip("[]"), args.port)
    try:
        store = Store.open(url)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    tokens = dict(settings.tokens)
    stopping: list[int] = []

    def flag(signum: int, frame: FrameType | None) -> None:
        stopping.append(signum)  # a flag only: uvicorn's handler did the rest

    previous = signal.signal(signal.SIGTERM, flag)  # what uvicorn raises again at its end
    try:
        app = create_app(store, settings)
        config = uvicorn.Config(
            app,
            host=args.host.strip("[]"),
            port=args.port,
            timeout_graceful_shutdown=2,
            server_header=False,
        )
        logging.getLogger("uvicorn.access").addFilter(_QueryStripped())
        server = _feed_server(uvicorn, config, [app])
        page = partial(page_line, args=args, tokens=tokens)

        def started(addresses: list[str]) -> None:
            for address in addresses:
                print(f"session-journal: serving on {address}", flush=True)
                print(page(address), flush=True)

        asyncio.run(_run(server, stopping, started, sockets))
    finally:
        signal.signal(signal.SIGTERM, previous)
        for sock in sockets:
            sock.close()
        store.close()
    return 0


def listening_sockets(host: str, port: int) -> list[socket.socket]:
    """The sockets `serve` listens on, bound before uvicorn starts, one per address `host`
    resolves to (as asyncio's `create_server` binds them: `SO_REUSEADDR`, IPv6 only on an IPv6
    socket); `InvalidRecord` naming the host and port when one cannot be bound (the port in
    use, an address of no interface, a port below 1024 without the right), none left open."""
    shown = f"[{host}]" if ":" in host else host
    try:
        addresses = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as error:
        raise InvalidRecord(f"serve cannot listen on {shown}:{port}: {error.strerror}") from None
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(addresses):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
    except OSError as error:
        for sock in sockets:
            sock.close()
        reason = (error.strerror or str(error)).lower()
        raise InvalidRecord(f"serve cannot listen on {shown}:{port}: {reason}") from None
    return sockets


async def _run(
    server: Any,
    stopping: list[int],
    started: Callable[[list[str]], None],
    sockets: list[socket.socket] | None,
) -> None:
    watcher = asyncio.create_task(_watch(server, stopping, started))
    try:
        await server.serve(sockets=sockets)
    finally:
        watcher.cancel()


async def _watch(server: Any, stopping: list[int], started: Callable[[list[str]], None]) -> None:
    """Once started, call `started` with the addresses it listens on. A signal that came
    before uvicorn's own handler was in place (`stopping`) stops it too."""
    while not server.started and not server.should_exit:
        if stopping:  # as if it had come to uvicorn's own handler
            server.handle_exit(stopping[0], None)
        await asyncio.sleep(0.01)
    if stopping and not server.should_exit:
        server.handle_exit(stopping[0], None)
    if server.started:
        addresses = []
        for listener in server.servers:
            for sock in listener.sockets:
                host, port = sock.getsockname()[:2]
                shown = f"[{host}]" if ":" in host else host
                addresses.append(f"http://{shown}:{port}")
        started(addresses)
    sys.stdout.flush()


def _uvicorn(command: str) -> Any:
    try:
        import uvicorn
    except ImportError:
        raise MissingDependency(
            f"{command} needs uvicorn: pip install 'session-journal[web]'"
        ) from None
    return uvicorn


def run(app: Any, *, host: str = "127.0.0.1", port: int = 8765, **uvicorn_options: Any) -> None:
    """Serve `app` with uvicorn until SIGTERM or SIGINT (Ctrl-C), closing the streams first: an
    application's entry point when it mounts the feed (docs: Serving the feed). `app` is an
    app made by `create_app` or one that mounts such apps (found through Starlette's `routes`
    and `Mount.app`, recursively); on the stop every stream of each gets `event: shutdown` and
    is closed within a second, and `run` returns within about 2 s (uvicorn's
    `timeout_graceful_shutdown`, 2 unless given). `uvicorn_options` are `uvicorn.Config`'s
    (`log_level`, `ssl_certfile`, `loop`, ...). Call it from the main thread, outside an event
    loop. `InvalidRecord`, before serving: no app of `create_app` found or one already shut
    down, an address it cannot listen on, an option `uvicorn.Config` refuses or one `run`
    does not take (`reload` and `workers`, which only `uvicorn.run` reads; `uds` and `fd`: it
    listens on `host` and `port`), the wrong thread; and if the application does not start
    (its lifespan failed: uvicorn's log says why)."""
    uvicorn = _uvicorn("session_journal.web.run")
    feeds = feeds_of(app)
    if not feeds:
        raise InvalidRecord(
            "run: app neither is nor mounts an app made by session_journal.web.create_app"
        )
    if any(feed.state.session_journal_hub.shutting_down for feed in feeds):
        raise InvalidRecord("run: a feed of app was shut down already (shutdown_streams)")
    options = {"timeout_graceful_shutdown": 2, **uvicorn_options}
    refused = sorted({"reload", "workers", "uds", "fd", "app", "host", "port"} & options.keys())
    if refused:
        raise InvalidRecord(f"run: {', '.join(refused)} is not an option of run")
    grace = options["timeout_graceful_shutdown"]
    if grace is not None and (not isinstance(grace, int | float) or isinstance(grace, bool)):
        raise InvalidRecord(f"run: timeout_graceful_shutdown must be seconds, got {grace!r}")
    if threading.current_thread() is not threading.main_thread():
        raise InvalidRecord("run: call it from the main thread (it handles SIGTERM and SIGINT)")
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise InvalidRecord("run: called inside an event loop; it runs one of its own")
    try:
        config = uvicorn.Config(app, host=host, port=port, **options)
        config.load()  # the options' files and names: refused here, not once serving
        loop_factory = config.get_loop_factory()
    except Exception as error:
        raise InvalidRecord(f"run: {type(error).__name__}: {error}") from None
    sockets = listening_sockets(host.strip("[]"), port)
    stopping: list[int] = []

    def flag(signum: int, frame: FrameType | None) -> None:
        stopping.append(signum)  # a flag only: uvicorn's handler did the rest

    # What uvicorn raises again once it has stopped lands here: run returns instead of the
    # process dying, so that the caller closes what it opened.
    previous = {sig: signal.signal(sig, flag) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            server = _feed_server(uvicorn, config, feeds)
            runner.run(_run(server, stopping, _log_started, sockets))
    except SystemExit as exit:  # uvicorn's when the application's lifespan failed to start
        raise InvalidRecord(f"run: the application did not start (exit {exit.code})") from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for sock in sockets:
            sock.close()


def _log_started(addresses: list[str]) -> None:
    """What uvicorn logs once it listens, which it leaves out on sockets bound before it."""
    for address in addresses:
        logging.getLogger("uvicorn.error").info(
            "Uvicorn running on %s (Press CTRL+C to quit)", address
        )


def _feed_server(uvicorn: Any, config: Any, feeds: list[Any]) -> Any:
    """A uvicorn `Server` of `config` whose shutdown first closes every stream of `feeds`
    (`shutdown_streams`): however it stops (a signal, a second Ctrl-C, `limit_max_requests`),
    before it waits for open responses, which a stream never ends by itself."""

    class FeedServer(uvicorn.Server):  # type: ignore[misc]
        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            await asyncio.gather(*(shutdown_streams(feed) for feed in feeds))
            await super().shutdown(sockets=sockets)

    return FeedServer(config)
