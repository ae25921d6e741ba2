"""A disk that fills up during transform, on a real filesystem: a small tmpfs this test mounts (it needs
root, like `make test`; without it the test skips, and fails under CI=true).

A write that fails is that ticket's failure, named by its file: the other tickets are still attempted,
the run ends with exit code 1 listing what failed, and no document is ever left half written.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import skip_or_fail
from typer.testing import CliRunner

from anchorkit.cli import app

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
runner = CliRunner()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 48 KiB tmpfs: room for about a third of the fixture documents (91 KB)."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=48k,mode=0755", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        skip_or_fail(f"cannot mount a tmpfs for the full-disk test (needs root): {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], capture_output=True, check=False)


def test_a_disk_that_fills_up_fails_the_tickets_that_do_not_fit_and_corrupts_nothing(
    tmp_path: Path, small_disk: Path
) -> None:
    reference = tmp_path / "reference"
    assert runner.invoke(app, ["transform", str(FIXTURES), "--out", str(reference)]).exit_code == 0
    expected = {path.name: path.read_bytes() for path in reference.glob("*.md")}
    out = small_disk / "out"

    full = runner.invoke(app, ["transform", str(FIXTURES), "--out", str(out)])

    assert full.exit_code == 1, full.output
    failed = set(
        re.findall(
            rf"^failed: {re.escape(str(out))}/(\d+\.md): cannot write \(No space left on device\)$", full.stderr, re.M
        )
    )
    written = {path.name: path.read_bytes() for path in out.iterdir()}
    assert failed and written, "some documents fit, the others did not"
    assert failed | set(written) == set(expected), "every ticket was attempted"
    assert all(data == expected[name] for name, data in written.items()), "no document is half written"
    assert f"{len(failed)} failed" in full.stdout

    # With room again, the next run completes what failed and leaves the rest as it was.
    subprocess.run(["mount", "-o", "remount,size=1m", str(small_disk)], check=True)
    again = runner.invoke(app, ["transform", str(FIXTURES), "--out", str(out)])
    assert again.exit_code == 0, again.output
    assert {path.name: path.read_bytes() for path in out.iterdir()} == expected


def test_chunks_on_a_disk_that_fills_up_fail_their_ticket_alone_and_corrupt_nothing(
    tmp_path: Path, small_disk: Path
) -> None:
    reference = tmp_path / "reference"
    assert runner.invoke(app, ["chunk", str(FIXTURES), "--out", str(reference)]).exit_code == 0
    expected = {path.relative_to(reference): path.read_bytes() for path in reference.rglob("*") if path.is_file()}
    out = small_disk / "out"

    full = runner.invoke(app, ["chunk", str(FIXTURES), "--out", str(out)])

    assert full.exit_code == 1, full.output
    failed = set(
        re.findall(rf"^failed: {re.escape(str(out))}/(\d+)\S*: cannot write \(No space left", full.stderr, re.M)
    )
    written = {path.relative_to(out): path.read_bytes() for path in out.rglob("*") if path.is_file()}
    assert failed and written, "some tickets fit, the others did not"
    assert {path.parts[0] for path in written} | failed == {path.parts[0] for path in expected}, "all attempted"
    assert all(data == expected[path] for path, data in written.items()), "no chunk file is half written"
    assert not [path for path in written if path.name.endswith(".tmp")], "no temporary file is left behind"

    subprocess.run(["mount", "-o", "remount,size=1m", str(small_disk)], check=True)
    again = runner.invoke(app, ["chunk", str(FIXTURES), "--out", str(out)])
    assert again.exit_code == 0, again.output
    assert {path.relative_to(out): path.read_bytes() for path in out.rglob("*") if path.is_file()} == expected
