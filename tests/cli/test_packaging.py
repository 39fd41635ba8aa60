"""What a newcomer and an operator get: `make run` prints the feed once and leaves the checkout
clean (the database and its side files are ignored), the wheel carries the LICENSE that
pyproject declares and the migration scripts, and the version is one: pyproject's, the wheel's
and the changelog's unreleased heading."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def test_make_run_prints_the_feed_once_and_leaves_the_checkout_clean(tmp_path: Path) -> None:
    recipe = subprocess.run(
        ["make", "-s", "-n", "-o", ".venv/.installed", "run"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / ".gitignore").write_text((REPO / ".gitignore").read_text())
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(checkout)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", ".gitignore"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "ignore"], check=True)
    env = {key: value for key, value in os.environ.items() if key != "SESSION_JOURNAL_DATABASE_URL"}
    printed = []
    for line in recipe:
        words = shlex.split(line)
        assert words[0].startswith(".venv/bin/"), line  # the project's own tools only
        words[0] = str(BIN / Path(words[0]).name)
        done = subprocess.run(words, cwd=checkout, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        printed += done.stdout.splitlines()
    feed = [line for line in printed if line.startswith('{"seq":')]
    assert [line.split(",")[0] for line in feed] == [f'{{"seq":{n}' for n in range(1, 13)]
    assert (checkout / "session-journal.db").is_file()
    status = subprocess.run([*git, "status", "--porcelain"], capture_output=True, text=True)
    assert status.stdout == ""


def test_pyproject_declares_the_version_the_changelog_describes_unreleased() -> None:
    # `--version` prints the installed metadata (test_cli_sessions), which pyproject makes.
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8").splitlines()
    headings = [line for line in changelog if line.startswith("## ")]
    assert declared == "0.2.0"
    assert headings[0] == f"## {declared} (unreleased)"


def test_the_wheel_carries_the_license_version_migrations_and_page(tmp_path: Path) -> None:
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["license"]
    license_text = (REPO / "LICENSE").read_text()
    assert declared == "MIT"
    assert license_text.startswith("MIT License\n")
    assert "Copyright (c) 2026 the session-journal authors" in license_text
    offline = ["--no-deps", "--no-build-isolation", "-q"]  # hatchling is a test dependency
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", *offline, "-w", str(tmp_path), str(REPO)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    [wheel] = tmp_path.glob("session_journal-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        [licensed] = [name for name in names if name.endswith(".dist-info/licenses/LICENSE")]
        assert archive.read(licensed).decode() == license_text
        [metadata] = [name for name in names if name.endswith(".dist-info/METADATA")]
        assert "License-Expression: MIT" in archive.read(metadata).decode().splitlines()
        assert "Version: 0.2.0" in archive.read(metadata).decode().splitlines()
    assert "session_journal/_alembic/env.py" in names
    assert any(name.startswith("session_journal/_alembic/versions/0008_") for name in names)
    page = REPO / "src" / "session_journal" / "web" / "page"
    shipped = {name for name in names if name.startswith("session_journal/web/page/")}
    assert shipped == {f"session_journal/web/page/{file.name}" for file in page.iterdir()}
    assert "session_journal/web/page/app.js" in shipped
