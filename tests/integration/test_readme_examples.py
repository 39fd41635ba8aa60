"""Every fenced block of README.md and of every page of the docs site (docs/, in mkdocs.yml's
navigation order) is checked, by its language tag, so the documentation cannot drift from the
code (each failure names the document and the block's line in it):

- `python`: each document's blocks run in order in one namespace of the document's own, and
  nothing is put in it: a page whose examples use a store opens it in them, as a reader would
  (`store = Store.open()`: the database `SESSION_JOURNAL_DATABASE_URL` names, which the test
  sets to its backend's, holding the session "session-1" that README's first block makes);
  tracebacks point at the document's own lines. A block that only shows a signature is listed
  in `SIGNATURES` and compared with the real one. A block whose first line is a file's name
  (`# app.py`) is that file: it runs in a namespace of its own, as the module it is, and the
  `sh` blocks find it in their directory.
- `sh`: each command line is checked, in document order, on each backend, in a temporary
  directory, with `SESSION_JOURNAL_DATABASE_URL` set to a database migrated to head and any
  `postgresql+psycopg://...` URL of the line replaced by that database's URL.
  `session-journal ...`, `python -m session_journal ...` and `alembic ...` run for real and
  must exit 0, or the code a comment starting with `exit N` names
  (`session-journal db check   # exit 1: ...`); `make TARGET [VAR=value]` must be a target
  (`make -n`) and variables the Makefile reads; `pip install` may name only this package (`.`,
  `session-journal`) and extras that pyproject.toml declares; `sqlite3 FILE ".backup OUT"` makes
  a consistent copy of FILE (a migrated database, made if missing), with the sqlite3 command
  when there is one, else with Python's `sqlite3` backup. `uvicorn MODULE:APP ...` and
  `python FILE.py` (a file of the document) run a server that mounts the feed, stopped with
  SIGTERM while a stream is open ([`check_server`](#)). Any other command fails the check:
  teach `SHELL_COMMANDS` below how to check it.
- `json`: a document (or JSON lines) that validates as one of the models in `JSON_MODELS` and
  dumps back to exactly what the document shows.
- `ini`: an `alembic.ini` for the installed package: it parses (`configparser`), has
  `[alembic]` with `script_location = session_journal:_alembic`, and works as it is with the
  `alembic` command on each backend (upgrade, history, downgrade), the scripts' location of the
  wheel being the checkout's here (an editable install has no `session_journal/_alembic`).
- `text`: shown, not run, and allowed only where `TEXT_BLOCKS` has a check for it.
- `sql`: a script for an operator, allowed only where `SQL_BLOCKS` has a check for it; the check
  runs it as it is (psql, `sqlite3`) on each backend, on the database it is meant for.
- `javascript`: a browser client of a live `serve`, allowed only where `JAVASCRIPT_BLOCKS`
  says how to call it; it runs in headless Chromium on a page of the server's origin and must
  get the event the test appends.
"""

from __future__ import annotations

import configparser
import contextlib
import inspect
import json
import os
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import tomllib
import traceback
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import httpx
import psycopg
import pytest
import sqlalchemy as sa
import yaml
from pydantic import TypeAdapter, ValidationError

from session_journal import ApiEvent, ApiEventData, SessionRecord, Store, migrations
from session_journal.relay import RelayEvent
from tests.backends import database_url, pg_conninfo
from tests.docs import README, REPO, documents, relative
from tests.helpers import as_older_code, table_counts
from tests.web.client import LiveServer, free_port

RECIPE_TOKEN = "r" * 43

KINDS = ("python", "sh", "json", "ini", "text", "sql", "javascript", "yaml")


@dataclass(frozen=True)
class Block:
    """A fenced block: its document, the language tag, the line of its opening fence (1-based)
    and its text."""

    path: Path
    line: int
    tag: str
    text: str

    @property
    def where(self) -> str:
        return self.at(self.line)

    def at(self, number: int) -> str:
        """A line of the block's document, as a failure names it."""
        return f"{relative(self.path)} line {number}"

    def lines(self) -> list[tuple[int, str]]:
        """The block's lines with their line numbers in the document."""
        return [
            (self.line + 1 + offset, text) for offset, text in enumerate(self.text.splitlines())
        ]


_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


def blocks() -> list[Block]:
    """The fenced blocks of every document, in order."""
    return [block for path in documents() for block in blocks_of(path)]


def blocks_of(path: Path) -> list[Block]:
    """A document's fenced blocks, in order (CommonMark fences, indented ones included)."""
    found: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        body: list[str] = []
        end = index + 1
        while end < len(lines):
            closing = _FENCE.match(lines[end])
            if (
                closing is not None
                and closing["fence"].startswith(fence[0])
                and len(closing["fence"]) >= len(fence)
                and not closing["info"].strip()
            ):
                break
            body.append(lines[end][indent:] if lines[end][:indent].isspace() else lines[end])
            end += 1
        assert end < len(lines), f"{relative(path)} line {index + 1}: the block is never closed"
        tag = opening["info"].strip().split(" ")[0]
        found.append(Block(path, index + 1, tag, "".join(f"{text}\n" for text in body)))
        index = end + 1
    return found


def of_kind(tag: str) -> list[Block]:
    return [block for block in blocks() if block.tag == tag]


def test_every_block_has_a_language_the_check_knows() -> None:
    unknown = [
        f"{block.where}: {block.tag or 'no tag'}" for block in blocks() if block.tag not in KINDS
    ]
    assert not unknown, f"fenced blocks need one of {KINDS} as their tag: {unknown}"
    assert len(of_kind("python")) >= 4
    assert of_kind("sh")


# -- javascript --------------------------------------------------------------------------------

JAVASCRIPT_BLOCKS = {
    # document -> how the check calls what its block defines: the token, and a callback that
    # ends the check with the first event.
    "serving.md": "followFeed(arguments[0], done).catch((error) => done({error: String(error)}));",
}


def test_the_javascript_blocks_run_in_chromium(url: str, tmp_path: Path) -> None:
    from tests.web.browser import open_browser

    found = of_kind("javascript")
    assert {block.path.name for block in found} == set(JAVASCRIPT_BLOCKS)
    with Store.open(url, upgrade=True) as store, contextlib.ExitStack() as stack:
        store.sessions.save(SessionRecord(id="session-1", project_id="project-1"))
        live = stack.enter_context(
            LiveServer(url, tmp_path, env={"SESSION_JOURNAL_WEB_TOKEN": RECIPE_TOKEN})
        )
        driver = open_browser()
        stack.callback(driver.quit)
        for block in found:
            driver.get(live.base + "/healthz")  # a page of the server's origin
            message = f"seen in the browser ({block.where})"
            threading.Timer(1.0, store.faults.record_startup_fault, ("session-1", message)).start()
            call = (
                "const done = arguments[arguments.length - 1];\n"
                + JAVASCRIPT_BLOCKS[block.path.name]
            )
            event = driver.execute_async_script(block.text + call, RECIPE_TOKEN)
            assert event.get("event", {}).get("data", {}).get("message") == message, (
                block.where,
                event,
            )


# -- python ------------------------------------------------------------------------------------


def _shown_parameters(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _real_parameters(function: Callable[..., Any]) -> list[str]:
    shown = []
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind is parameter.KEYWORD_ONLY and "*" not in shown:
            shown.append("*")
        default = parameter.default
        shown.append(
            parameter.name if default is parameter.empty else f"{parameter.name}={default!r}"
        )
    return shown


SIGNATURES: dict[str, Callable[..., Any]] = {
    # The block's first line starts with this; the parameters it shows are the real ones.
    "store = Store.open(": Store.open,
}


def signature_of(block: Block) -> Callable[..., Any] | None:
    return next((f for start, f in SIGNATURES.items() if block.text.startswith(start)), None)


_FILE_NAME = re.compile(r"# (?P<name>[\w-]+\.py)\n")


def file_name(block: Block) -> str | None:
    """The file a python block is (its first line `# NAME.py`), else `None`."""
    found = _FILE_NAME.match(block.text)
    return found["name"] if found else None


def examples() -> list[Block]:
    return [block for block in of_kind("python") if signature_of(block) is None]


def test_the_signatures_shown_are_the_real_ones() -> None:
    shown = [block for block in of_kind("python") if signature_of(block) is not None]
    assert len(shown) == len(SIGNATURES), "a listed signature block is gone from the docs"
    for block in shown:
        function = signature_of(block)
        assert function is not None
        # Only the signature: any other line would be shown to the reader and never run.
        assert len(block.text.strip().splitlines()) == 1, f"{block.where}: more than a signature"
        inside = re.search(r"\(([^)]*)\)", block.text)
        assert inside is not None, f"{block.where}: no parameter list"
        assert _shown_parameters(inside[1]) == _real_parameters(function), block.where


def test_the_python_blocks_run(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    # The first example opens (and closes) its own store on SQLite; the other pages open the
    # database of the environment, the test's backend's, with the first example's session, as a
    # reader who runs a page's examples in one session would.
    monkeypatch.setenv("SESSION_JOURNAL_DATABASE_URL", url)
    with Store.open(url, upgrade=True) as store, contextlib.ExitStack() as stack:
        store.sessions.save(SessionRecord(id="session-1", project_id="project-1"))
        namespaces: dict[tuple[Path, str | None], dict[str, object]] = {}
        live: LiveServer | None = None
        for block in examples():
            if block.path.name == "serving.md" and live is None:
                # The client recipe follows a live server on this database, handed to it in
                # the environment as a reader's deployment would.
                live = stack.enter_context(
                    LiveServer(url, tmp_path, env={"SESSION_JOURNAL_WEB_TOKEN": RECIPE_TOKEN})
                )
                monkeypatch.setenv("SESSION_JOURNAL_SERVER", live.base)
                monkeypatch.setenv("SESSION_JOURNAL_WEB_TOKEN", RECIPE_TOKEN)
            # A file of the document runs as the module it is, in a namespace of its own.
            key = (block.path, file_name(block))
            namespace = namespaces.setdefault(key, {})
            # Padded so that a traceback names the document's own line numbers.
            code = compile("\n" * block.line + block.text, str(block.path), "exec")
            try:
                exec(code, namespace)
            except Exception as error:
                lines = [
                    frame.lineno
                    for frame in traceback.extract_tb(error.__traceback__)
                    if frame.filename == str(block.path)
                ]
                pytest.fail(
                    f"{block.at(lines[-1]) if lines else block.where} (the python block at line "
                    f"{block.line}) raised {error!r}"
                )
        for namespace in namespaces.values():  # the stores the pages opened
            opened = namespace.get("store")
            if isinstance(opened, Store):
                opened.close()
    assert {block.path for block in examples()} >= {README}
    assert "session-1" in capsys.readouterr().out
    assert os.path.exists(tmp_path / "journal.db")


# -- json --------------------------------------------------------------------------------------

JSON_MODELS: dict[str, TypeAdapter[Any]] = {
    "an API event body (ApiEventData)": TypeAdapter(ApiEventData),
    "an API event (ApiEvent)": TypeAdapter(ApiEvent),
    "a relay event (RelayEvent)": TypeAdapter(RelayEvent),
}


def _documents(block: Block) -> list[tuple[int, str]]:
    """The block as one JSON document, else as JSON lines."""
    try:
        json.loads(block.text)
    except ValueError:
        return [(number, text) for number, text in block.lines() if text.strip()]
    return [(block.line + 1, block.text)]


def test_the_json_blocks_are_what_the_models_write() -> None:
    for block in of_kind("json"):
        for number, text in _documents(block):
            try:
                shown = json.loads(text)
            except ValueError as error:
                pytest.fail(f"{block.at(number)}: not JSON: {error}")
            tried = []
            for name, adapter in JSON_MODELS.items():
                try:
                    value = adapter.validate_json(text)
                except ValidationError as error:
                    tried.append(f"not {name}: {error.errors()[0]['msg']}")
                    continue
                dumped = adapter.dump_python(value, mode="json")
                assert dumped == shown, (
                    f"{block.at(number)}: valid as {name}, but the model writes {dumped}"
                )
                break
            else:
                pytest.fail(f"{block.at(number)}: {'; '.join(tried)}")


# -- yaml --------------------------------------------------------------------------------------


def test_the_yaml_blocks_are_prometheus_configs_of_the_served_metrics() -> None:
    """The scrape config reads `/metrics` with a token; each alert rule has its name, its
    expression and its duration (the metrics the expressions name are checked against a live
    exposition by tests/web/test_metrics.py)."""
    found = of_kind("yaml")
    assert {block.path.name for block in found} == {"metrics.md"}
    shown = [yaml.safe_load(block.text) for block in found]
    (scrape,) = [document for document in shown if "scrape_configs" in document]
    (job,) = scrape["scrape_configs"]
    assert (job["metrics_path"], set(job["authorization"])) == ("/metrics", {"credentials_file"})
    (rules,) = [document for document in shown if "groups" in document]
    (group,) = rules["groups"]
    assert [set(rule) for rule in group["rules"]] == [
        {"alert", "expr", "for", "annotations"}
    ] * len(group["rules"])
    assert all("session_journal_" in rule["expr"] for rule in group["rules"])


# -- ini ---------------------------------------------------------------------------------------

PACKAGED_SCRIPTS = "session_journal:_alembic"
"""The scripts inside the wheel, as Alembic names a package resource."""


def test_the_ini_blocks_work_as_alembic_ini(url: str, tmp_path: Path) -> None:
    shown = of_kind("ini")
    assert shown, "the docs show no alembic.ini"
    for block in shown:
        parser = configparser.ConfigParser()
        try:
            parser.read_string(block.text)
        except configparser.Error as error:
            pytest.fail(f"{block.where}: not an ini file: {error}")
        assert parser.has_section("alembic"), f"{block.where}: no [alembic] section"
        location = parser.get("alembic", "script_location", fallback=None)
        assert location == PACKAGED_SCRIPTS, (
            f"{block.where}: script_location is {location!r}, not the wheel's {PACKAGED_SCRIPTS}"
        )
        ini = tmp_path / "alembic.ini"
        ini.write_text(block.text.replace(PACKAGED_SCRIPTS, str(migrations.script_location())))
        for words in (["upgrade", "head"], ["history"], ["downgrade", "base"], ["current"]):
            done = subprocess.run(
                [sys.executable, "-m", "alembic", "-c", str(ini), "-x", f"url={url}", *words],
                cwd=tmp_path,
                env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert done.returncode == 0, (
                f"{block.where}: alembic {' '.join(words)} exit {done.returncode}\n"
                f"stdout: {done.stdout[-2000:]}\nstderr: {done.stderr[-2000:]}"
            )
            if words[0] == "upgrade":
                with Store.open(url) as store:
                    assert store.schema.revision == migrations.head(), block.where


# -- text --------------------------------------------------------------------------------------


def _check_layout(block: Block) -> None:
    """The Layout tree: every file and directory it names exists (descriptions aside), each
    under the directory named above it with less indent."""
    parents = [(-1, REPO)]  # (indent, directory): the directories the next line may be in
    named = 0
    for number, line in block.lines():
        indent = len(line) - len(line.lstrip())
        if not line.strip() or indent > 10:  # a description continued from the line above
            continue
        while parents[-1][0] >= indent:
            parents.pop()
        names = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
        for name in (part.strip() for part in names.split(",")):
            if not name:
                continue
            path = parents[-1][1] / name
            assert path.exists(), f"{block.at(number)}: {path.relative_to(REPO)} does not exist"
            named += 1
            if name.endswith("/"):
                parents.append((indent, path))
    assert named >= 20, f"{block.where}: the layout names only {named} paths"


def _check_nginx(block: Block) -> None:
    """The proxy settings of Serving the feed: what a stream needs of nginx."""
    for setting in ("proxy_buffering off;", "proxy_cache off;", "gzip off;", "proxy_read_timeout"):
        assert setting in block.text, f"{block.where}: {setting} is missing"
    assert "proxy_pass http://127.0.0.1:8765;" in block.text, block.where


TEXT_BLOCKS: dict[str, Callable[[Block], None]] = {
    # First line of the block -> how it is checked.
    "src/session_journal/": _check_layout,
    "location /api/events/stream {": _check_nginx,
}


def test_the_text_blocks_are_checked_where_they_are() -> None:
    for block in of_kind("text"):
        first = block.text.splitlines()[0] if block.text else ""
        check = TEXT_BLOCKS.get(first.strip())
        assert check is not None, (
            f"{block.where}: a text block is output shown to the reader; register a check for "
            "it in TEXT_BLOCKS (tests/integration/test_readme_examples.py), or tag it as code"
        )
        check(block)


# -- sql ---------------------------------------------------------------------------------------


def run_sql_script(url: str, script: str) -> None:
    """Run `script` as an operator would in `sqlite3` or psql: as it is, its own transaction
    control included, on a connection of the database (PostgreSQL: with the URL's options, so
    the store's `search_path`)."""
    parsed = sa.make_url(url)
    if parsed.get_backend_name() == "sqlite":
        assert parsed.database is not None
        connection = sqlite3.connect(parsed.database, isolation_level=None)
        try:
            connection.executescript(script)
        finally:
            connection.close()
        return
    with psycopg.connect(pg_conninfo(url), autocommit=True) as driver:
        driver.execute(script)  # without parameters: one simple query, statements in order


def check_revision_move(block: Block, url: str) -> None:
    """The move of this package's revision from `alembic_version` to `session_journal_version`,
    on a database that older code migrated (its revision in `alembic_version`), holding a
    session: afterwards this code reads the same revision from `session_journal_version`,
    `alembic_version` holds nothing, and the store opens with its rows."""
    with as_older_code(), Store.open(url, upgrade=True) as store:
        store.sessions.save(SessionRecord(id="moved-1", project_id="project-1"))
    engine = sa.create_engine(url)
    try:
        before = migrations.status(engine)
        assert (before.revision, before.version_table) == (migrations.head(), "alembic_version")
        run_sql_script(url, block.text)
        after = migrations.status(engine)
    finally:
        engine.dispose()
    assert (after.revision, after.version_table, after.usable) == (
        migrations.head(),
        "session_journal_version",
        True,
    ), block.where
    assert table_counts(url, ["alembic_version", "session_journal_version"]) == {
        "alembic_version": 0,
        "session_journal_version": 1,
    }
    with Store.open(url) as store:
        assert store.sessions.get("moved-1") is not None


SQL_BLOCKS: dict[str, Callable[[Block, str], None]] = {
    # First line of the block -> how it is checked, given an empty database of the backend.
    "-- Move session-journal's revision from alembic_version to session_journal_version.": (
        check_revision_move
    ),
}


def sql_check(block: Block) -> Callable[[Block, str], None]:
    first = block.text.splitlines()[0] if block.text else ""
    check = SQL_BLOCKS.get(first.strip())
    assert check is not None, (
        f"{block.where}: an sql block is a script for an operator; register a check that runs "
        "it in SQL_BLOCKS (tests/integration/test_readme_examples.py)"
    )
    return check


def test_the_sql_blocks_run(backend: str, tmp_path: Path) -> None:
    checked = 0
    for number, block in enumerate(of_kind("sql")):
        directory = tmp_path / str(number)
        directory.mkdir()
        with database_url(backend, directory) as url:
            sql_check(block)(block, url)
        checked += 1
    assert checked >= 1


# -- sh ----------------------------------------------------------------------------------------

_POSTGRES_URL = re.compile(r"postgresql\+psycopg://\S*")
_EXPECTED_EXIT = re.compile(r"(?:^|\s)#\s*exit (\d+)\b")


@dataclass
class Shell:
    """Where the docs' commands run: a directory, an environment and the test's database."""

    directory: Path
    database_url: str
    environment: dict[str, str]


@dataclass(frozen=True)
class Command:
    where: str  # the document and line
    words: list[str]
    expected_exit: int
    text: str

    def fail(self, why: str) -> NoReturn:
        pytest.fail(f"{self.where}: `{self.text}`: {why}")


def commands(block: Block) -> list[Command]:
    """The block's command lines (a trailing backslash continues a line), comments dropped."""
    found: list[Command] = []
    pending: tuple[int, str] | None = None
    for number, line in block.lines():
        if pending is not None:
            number, line = pending[0], f"{pending[1]} {line}"
            pending = None
        if line.rstrip().endswith("\\"):
            pending = (number, line.rstrip()[:-1])
            continue
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
        if not words:
            continue
        expected = _EXPECTED_EXIT.search(line)
        exit_code = int(expected[1]) if expected else 0
        command = Command(block.at(number), words, exit_code, line.strip())
        operators = [word for word in words if word and set(word) <= set("();<>|&")]
        if operators:
            command.fail(f"one command per line, without shell operators ({operators})")
        found.append(command)
    assert pending is None, f"{block.where}: the last line continues past the block"
    return found


def _run(command: Command, argv: list[str], shell: Shell, environment: dict[str, str]) -> str:
    try:
        done = subprocess.run(
            argv,
            cwd=shell.directory,
            env=environment,
            capture_output=True,
            text=True,
            timeout=300,
        )
    except subprocess.TimeoutExpired:
        command.fail("still running after 300 s")
    if done.returncode != command.expected_exit:
        command.fail(
            f"exit {done.returncode}, expected {command.expected_exit}\n"
            f"stdout: {done.stdout[-2000:]}\nstderr: {done.stderr[-2000:]}"
        )
    return done.stdout


def _for_the_test(words: list[str], shell: Shell) -> list[str]:
    """The command's words, any PostgreSQL URL standing for the reader's database replaced by
    the test's."""
    return [_POSTGRES_URL.sub(lambda _: shell.database_url, word) for word in words]


def run_session_journal(
    command: Command, words: list[str], shell: Shell, env: dict[str, str]
) -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["session-journal"] == "session_journal.cli:main"
    if "serve" in words and command.expected_exit == 0:
        _check_serve(command, words, shell, env)
        return
    _run(command, [sys.executable, "-m", "session_journal", *words], shell, env)


def _check_serve(command: Command, words: list[str], shell: Shell, env: dict[str, str]) -> None:
    """`session-journal serve ...` runs until stopped: it must start (on a free port instead of
    the one shown; with a token of the test's unless the line serves without one or names a
    token file, made if missing), answer `/healthz`, and exit 0 on SIGTERM within 3 s."""
    words = list(words)
    if "--port" in words:
        words[words.index("--port") + 1] = "0"
    else:
        words += ["--port", "0"]
    environment = dict(env)
    if "--token-file" in words:
        tokens = shell.directory / words[words.index("--token-file") + 1]
        if not tokens.exists():
            tokens.write_text("t" * 43 + "\n")
    elif "--no-token" not in words:
        environment["SESSION_JOURNAL_WEB_TOKEN"] = "t" * 43
    process = subprocess.Popen(
        [sys.executable, "-m", "session_journal", *words],
        cwd=shell.directory,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        said = []
        found = None
        while found is None and len(said) < 50:  # uvicorn's lines come first
            said.append(process.stdout.readline())
            found = re.search(r"serving on (http://\S+)", said[-1])
            if not said[-1]:
                break  # it exited
        if found is None:
            command.fail("did not start: " + "".join(said)[-2000:])
        with urllib.request.urlopen(found[1] + "/healthz", timeout=10) as answer:
            assert answer.status == 200, command.where
        process.send_signal(signal.SIGTERM)
        if process.wait(3) != 0:
            command.fail(f"exit {process.returncode} on SIGTERM")
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)
        process.stdout.close()  # type: ignore[union-attr]


def run_alembic(command: Command, words: list[str], shell: Shell, env: dict[str, str]) -> None:
    # "From the repository root": the repository's alembic.ini, found through ALEMBIC_CONFIG.
    env = {**env, "ALEMBIC_CONFIG": str(REPO / "alembic.ini")}
    _run(command, [sys.executable, "-m", "alembic", *words], shell, env)


def _makefile_variables() -> set[str]:
    return set(re.findall(r"\$\(([A-Z_]+)\)", (REPO / "Makefile").read_text()))


def check_make(command: Command, words: list[str], shell: Shell, env: dict[str, str]) -> None:
    assignments = [word.split("=", 1)[0] for word in words if "=" in word]
    unknown = sorted(set(assignments) - _makefile_variables())
    if unknown:
        command.fail(f"the Makefile reads no variable {unknown}")
    if not [word for word in words if "=" not in word]:
        command.fail("no target")
    # -n: print the recipes, run none of them; fails for a target the Makefile lacks.
    _run(command, ["make", "-n", "--no-print-directory", "-C", str(REPO), *words], shell, env)


def check_pip(command: Command, words: list[str], shell: Shell, env: dict[str, str]) -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    extras = set(pyproject["project"]["optional-dependencies"])
    if words[:1] != ["install"]:
        command.fail("only `pip install` is expected")
    targets = [word for word in words[1:] if word != "-e"]
    if not targets or any(word.startswith("-") for word in targets):
        command.fail("expected `pip install [-e] SPEC...`")
    for target in targets:
        spec = re.fullmatch(r"(?P<name>\.|session-journal)(?:\[(?P<extras>[a-z,-]+)\])?", target)
        if spec is None:
            command.fail(f"{target!r} is neither `.` nor session-journal")
        named = set(spec["extras"].split(",")) if spec["extras"] else set()
        if named - extras:
            command.fail(f"pyproject.toml declares no extra {sorted(named - extras)}")


def check_sqlite3(command: Command, words: list[str], shell: Shell, env: dict[str, str]) -> None:
    if len(words) != 2 or not re.fullmatch(r"\.backup \S+", words[1]):
        command.fail('expected `sqlite3 FILE ".backup COPY"`')
    source, copy = shell.directory / words[0], shell.directory / words[1].split()[1]
    if not source.exists():  # the reader's database: a migrated one, with a session
        with Store.open(f"sqlite:///{source}", upgrade=True) as store:
            store.sessions.save(SessionRecord(id="backed-up", project_id="p"))
    if shutil.which("sqlite3"):
        _run(command, ["sqlite3", *words], shell, env)
    else:  # the same copy through SQLite's backup API
        with sqlite3.connect(source) as live, sqlite3.connect(copy) as target:
            live.backup(target)
        live.close()
        target.close()
    backup = sqlite3.connect(copy)
    try:
        assert backup.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        original = sqlite3.connect(source)
        try:
            query = "SELECT session_id FROM sessions ORDER BY session_id"
            assert backup.execute(query).fetchall() == original.execute(query).fetchall()
        finally:
            original.close()
    finally:
        backup.close()


def check_uvicorn(command: Command, words: list[str], shell: Shell, env: dict[str, str]) -> None:
    """`uvicorn MODULE:APP --timeout-graceful-shutdown N`: on SIGTERM with a stream open, it
    exits within N s and a margin, killed by the SIGTERM uvicorn raises again, the stream cut
    without `event: shutdown`."""
    words = list(words)
    port = free_port()
    if "--port" in words:
        words[words.index("--port") + 1] = str(port)
    else:
        words += ["--port", str(port)]
    if "--timeout-graceful-shutdown" not in words:
        command.fail("without --timeout-graceful-shutdown it never exits with a stream open")
    grace = float(words[words.index("--timeout-graceful-shutdown") + 1])
    module = shell.directory / (words[0].partition(":")[0] + ".py")
    argv = [sys.executable, "-m", "uvicorn", *words]
    stopped = check_server(command, argv, module, port, shell, env)
    if stopped.returncode != -signal.SIGTERM or not grace <= stopped.seconds < grace + 3:
        command.fail(f"{stopped}: expected killed by SIGTERM {grace} s after it")
    if "event: shutdown" in stopped.stream:
        command.fail(f"{stopped}: the stream was told; uvicorn cuts it")


def check_python_file(
    command: Command, words: list[str], shell: Shell, env: dict[str, str]
) -> None:
    """`python FILE.py`, a file of the documents that calls `session_journal.web.run`: on
    SIGTERM with a stream open, the stream gets `event: shutdown` and the process exits 0
    within 3 s."""
    module = shell.directory / words[0]
    if len(words) != 1 or not module.exists():
        command.fail("python runs only a file of the documents (a block `# NAME.py`)")
    port = free_port()
    module.write_text(re.sub(r"\bport=\d+", f"port={port}", module.read_text()))
    stopped = check_server(command, [sys.executable, words[0]], module, port, shell, env)
    if stopped.returncode != 0 or stopped.seconds >= 3:
        command.fail(f"{stopped}: expected exit 0 within 3 s")
    if "event: shutdown" not in stopped.stream:
        command.fail(f"{stopped}: the stream was not told")


@dataclass(frozen=True)
class Stopped:
    """How a server stopped: its exit status, the seconds from SIGTERM to its exit, what the
    open stream received and what the server said."""

    returncode: int
    seconds: float
    stream: str
    output: str

    def __str__(self) -> str:
        return (
            f"exit {self.returncode} {self.seconds:.1f} s after SIGTERM; the stream got "
            f"{self.stream[-300:]!r}; it said {self.output[-1500:]}"
        )


def check_server(
    command: Command, argv: list[str], module: Path, port: int, shell: Shell, env: dict[str, str]
) -> Stopped:
    """Start `argv`, a server of the application in `module` that mounts the feed (at the
    prefix of its `mount("PREFIX"`), listening on `port`; open a stream; SIGTERM it once the
    stream is ready; wait for the process (20 s at most) and the stream's end."""
    prefix = re.search(r"mount\(\s*\"(/[^\"]*)\"", module.read_text())
    if prefix is None:
        command.fail(f'{module.name} mounts no feed (`app.mount("/PREFIX", ...)`)')
    token = "d" * 43
    log = shell.directory / f"server-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            argv,
            cwd=shell.directory,
            env={**env, "SESSION_JOURNAL_WEB_TOKEN": token},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 30
        while "Uvicorn running on" not in log.read_text(errors="replace"):
            if process.poll() is not None or time.monotonic() > deadline:
                command.fail(f"did not start: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.05)
        received: list[str] = []
        signalled = 0.0
        url = f"http://127.0.0.1:{port}{prefix[1]}/api/events/stream"
        headers = {"Authorization": f"Bearer {token}"}
        try:
            with httpx.stream("GET", url, headers=headers, timeout=20) as response:
                for line in response.iter_lines():
                    received.append(line)
                    if line == "event: ready":
                        process.send_signal(signal.SIGTERM)
                        signalled = time.monotonic()
        except httpx.HTTPError:
            pass  # cut
        if not signalled:
            command.fail(f"the stream never got ready: {received}")
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            command.fail(f"still running 20 s after SIGTERM: {log.read_text()[-2000:]}")
        seconds = time.monotonic() - signalled
        output = log.read_text(errors="replace")
        return Stopped(process.returncode, seconds, "\n".join(received), output)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)


SHELL_COMMANDS: dict[
    tuple[str, ...], Callable[[Command, list[str], Shell, dict[str, str]], None]
] = {
    # The first words of a command line -> how it is checked (given the words after them).
    ("session-journal",): run_session_journal,
    ("python", "-m", "session_journal"): run_session_journal,
    ("python3", "-m", "session_journal"): run_session_journal,
    ("alembic",): run_alembic,
    ("make",): check_make,
    ("pip",): check_pip,
    ("python", "-m", "pip"): check_pip,
    ("sqlite3",): check_sqlite3,
    ("uvicorn",): check_uvicorn,
    ("python",): check_python_file,
}


def check_command(command: Command, shell: Shell) -> None:
    words = list(command.words)
    env = dict(shell.environment)
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):  # VAR=value command
        name, value = words.pop(0).split("=", 1)
        env[name] = _POSTGRES_URL.sub(lambda _: shell.database_url, value)
    for start, check in sorted(SHELL_COMMANDS.items(), key=lambda item: -len(item[0])):
        if tuple(words[: len(start)]) == start:
            check(command, _for_the_test(words[len(start) :], shell), shell, env)
            return
    command.fail(
        "a command the docs check does not know: teach SHELL_COMMANDS in "
        "tests/integration/test_readme_examples.py how to check it"
    )


def test_the_shell_blocks_run(migrated_url: str, tmp_path: Path) -> None:
    directory = tmp_path / "reader"
    directory.mkdir()
    source = str(REPO / "src")
    path = os.environ.get("PYTHONPATH")
    shell = Shell(
        directory,
        migrated_url,
        {
            **os.environ,
            "PYTHONPATH": source if not path else f"{source}{os.pathsep}{path}",
            "SESSION_JOURNAL_DATABASE_URL": migrated_url,
        },
    )
    for block in of_kind("python"):  # the documents' files, where their commands run
        name = file_name(block)
        if name is not None:
            assert not (directory / name).exists(), f"{block.where}: a second {name}"
            (directory / name).write_text(block.text)
    ran = 0
    for block in of_kind("sh"):
        for command in commands(block):
            check_command(command, shell)
            ran += 1
    assert ran >= 4
