"""A snapshot holds the files pull wrote: an issue file that is a named pipe, a symbolic link, a folder or a
device fails that ticket by name (the batch goes on, exit code 1) in every command that reads the snapshot,
instead of hanging on the pipe or reading what the link points to; a state.json or lookups.json of that
kind stops the run in one line naming it (exit code 2). A named pipe where transform writes a document is
replaced by the document, never read."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchorkit.cli import app

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
runner = CliRunner()

# Each command that reads a snapshot, given the snapshot and a folder for its output.
COMMANDS: dict[str, Callable[[Path, Path], list[str]]] = {
    "transform": lambda snap, out: ["transform", str(snap), "--out", str(out)],
    "stats snapshot": lambda snap, out: ["stats", str(snap)],
    "chunk": lambda snap, out: ["chunk", str(snap), "--out", str(out)],
}


def snapshot_copy(folder: Path) -> Path:
    snap = folder / "snapshot"
    shutil.copytree(FIXTURES, snap, ignore=shutil.ignore_patterns("eval", "README.md"))
    return snap


def run(args: list[str]) -> tuple[int, str]:
    result = runner.invoke(app, args, env={"ANCHORKIT_CONFIG": ""})
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.stderr


def release(pipe: Path) -> None:
    """Open the named pipe for writing and close it: a reader stuck on it (a regression) goes on."""
    with contextlib.suppress(OSError):  # nobody reads it: nothing to release
        os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))


def make_pipe(path: Path) -> None:
    os.mkfifo(path)


def make_link(path: Path) -> None:
    path.symlink_to("12301.json")  # a ticket of the snapshot: read through the link, it would be rendered twice


def make_folder(path: Path) -> None:
    path.mkdir()


def make_device(path: Path) -> None:
    os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's


KINDS: dict[str, tuple[Callable[[Path], None], str]] = {
    "named pipe": (make_pipe, "not a regular file"),
    "symbolic link": (make_link, "a symbolic link (not followed)"),
    "folder": (make_folder, "not a regular file"),
    "device": (make_device, "not a regular file"),
}


@pytest.mark.timeout(30)  # the named pipe hung each command for ever: a regression fails, it does not hang
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("command", COMMANDS)
def test_an_issue_file_that_is_no_regular_file_fails_that_ticket_by_name_and_the_batch_goes_on(
    tmp_path: Path, command: str, kind: str
) -> None:
    make, problem = KINDS[kind]
    if kind == "device" and os.geteuid() != 0:
        pytest.skip("making a device needs root")
    snap = snapshot_copy(tmp_path)
    odd = snap / "issues" / "5.json"
    make(odd)
    try:
        code, stderr = run(COMMANDS[command](snap, tmp_path / "out"))
    finally:
        if kind == "named pipe":
            release(odd)
    assert code == 1
    assert f"failed: {odd}: {problem}\n" in stderr
    assert "Traceback" not in stderr and stderr.count("failed:") == 1  # the other tickets were read


@pytest.mark.timeout(30)
def test_the_other_tickets_are_transformed_when_one_issue_file_is_a_named_pipe(tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    assert run(["transform", str(snapshot_copy(tmp_path / "intact")), "--out", str(reference)])[0] == 0
    snap = snapshot_copy(tmp_path)
    make_pipe(snap / "issues" / "5.json")
    try:
        assert run(["transform", str(snap), "--out", str(tmp_path / "out")])[0] == 1
    finally:
        release(snap / "issues" / "5.json")
    written = sorted(path.name for path in (tmp_path / "out").rglob("*.md"))
    assert written == sorted(path.name for path in reference.rglob("*.md"))


@pytest.mark.timeout(30)
@pytest.mark.parametrize("name", ["state.json", "lookups.json"])
@pytest.mark.parametrize("command", COMMANDS)
def test_a_snapshot_file_that_is_a_named_pipe_stops_the_run_in_one_line_naming_it(
    tmp_path: Path, command: str, name: str
) -> None:
    snap = snapshot_copy(tmp_path)
    pipe = snap / name
    pipe.unlink()
    make_pipe(pipe)
    try:
        code, stderr = run(COMMANDS[command](snap, tmp_path / "out"))
    finally:
        release(pipe)
    assert (code, stderr) == (2, f"error: {pipe}: not a regular file\n")


@pytest.mark.timeout(30)
def test_a_named_pipe_where_transform_writes_a_document_is_replaced_by_the_document(tmp_path: Path) -> None:
    snap = snapshot_copy(tmp_path)
    reference = tmp_path / "reference"
    assert run(["transform", str(snap), "--out", str(reference)])[0] == 0
    out = tmp_path / "out"
    shutil.copytree(reference, out)
    pipe = out / "12301.md"
    pipe.unlink()
    make_pipe(pipe)
    try:
        code, stderr = run(["transform", str(snap), "--out", str(out)])
    finally:
        release(pipe)
    assert (code, stderr) == (0, "")
    assert stat.S_ISREG(pipe.lstat().st_mode) and pipe.read_bytes() == (reference / "12301.md").read_bytes()
