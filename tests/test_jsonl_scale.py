"""A JSON Lines file of any size: `chunk --jsonl FILE --check` compares it, and a failed ticket's lines are kept
from it, without the file (gigabytes for a large Redmine) being held in memory."""

from __future__ import annotations

import os
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.chunk_lines import ticket_lines

from anchorkit.chunk.writers import EncodedTicket, JsonLines, PreviousLines, write_jsonl_file
from anchorkit.files import ComparingStream, sync_file
from anchorkit.render.transform import TicketFailure

TICKETS = 2_000


def encoded_tickets(failed: int | None = None) -> Iterator[EncodedTicket[bytes] | TicketFailure]:
    """The tickets' lines one at a time, as the chunker hands them over (``failed``: that ticket failed)."""
    for ticket_id in range(1, TICKETS + 1):
        if ticket_id == failed:
            yield TicketFailure(f"issues/{ticket_id}.json", ticket_id, "broken")
        else:
            yield EncodedTicket(ticket_id, 3, ticket_lines(ticket_id), JsonLines())


@pytest.fixture
def large_file(tmp_path: Path) -> Path:
    path = tmp_path / "chunks.jsonl"
    path.write_bytes(b"".join(ticket_lines(ticket_id) for ticket_id in range(1, TICKETS + 1)))
    assert path.stat().st_size > 10_000_000
    return path


def peak_bytes(run: Callable[[], Any]) -> tuple[Any, int]:
    """What ``run()`` returns, and the most memory Python allocated while it ran."""
    tracemalloc.start()
    try:
        return run(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_checking_a_large_json_lines_file_does_not_hold_it_in_memory(large_file: Path) -> None:
    report, peak = peak_bytes(lambda: write_jsonl_file(encoded_tickets(), large_file, check=True))
    assert report.unchanged == 1 and report.chunks == 3 * TICKETS
    assert peak < large_file.stat().st_size / 20


def test_a_failed_ticket_keeps_its_lines_without_the_whole_file_being_held_in_memory(large_file: Path) -> None:
    before = large_file.read_bytes()
    report, peak = peak_bytes(lambda: write_jsonl_file(encoded_tickets(failed=1234), large_file))
    assert [failure.ticket_id for failure in report.failed] == [1234]
    assert report.warnings == ["#1234: failed: its 3 lines of the last run kept"]
    assert large_file.read_bytes() == before  # its lines in their place: nothing changed
    assert peak < len(before) / 20


def test_previous_lines_are_read_back_as_they_were_written(tmp_path: Path) -> None:
    path = tmp_path / "chunks.jsonl"
    # Two tickets' lines interleaved, a line of no ticket among them, and a last line without its line break.
    lines = [ticket_lines(7, 2), ticket_lines(8, 1), b"not a chunk\n", ticket_lines(7, 1), ticket_lines(8, 1)[:-1]]
    path.write_bytes(b"".join(lines))
    previous = PreviousLines(path)
    try:
        assert previous.of(7) == [*ticket_lines(7, 2).splitlines(keepends=True), ticket_lines(7, 1)]
        # The file replaced meanwhile (the run's own commit, another run's): the lines are the file's as first read.
        (tmp_path / "newer.jsonl").write_bytes(ticket_lines(8, 5))
        os.replace(tmp_path / "newer.jsonl", path)
        assert previous.of(8) == [ticket_lines(8, 1), ticket_lines(8, 1)]
        assert previous.of(9) == []
    finally:
        previous.close()


def test_previous_lines_of_a_missing_file_are_none(tmp_path: Path) -> None:
    previous = PreviousLines(tmp_path / "none-yet.jsonl")
    assert previous.of(7) == []
    previous.close()


@pytest.mark.parametrize(
    ("existing", "pieces"),
    [
        (None, [b"abc"]),
        (None, []),
        (b"", []),
        (b"abcdef", [b"abc", b"def"]),
        (b"abcdef", [b"abc"]),  # the file is longer
        (b"abc", [b"abc", b"def"]),  # the file is shorter
        (b"abcdef", [b"abd", b"ef"]),
        (b"abcdef", [b"", b"abcdef", b""]),
    ],
)
def test_a_comparing_stream_says_what_sync_file_says(
    tmp_path: Path, existing: bytes | None, pieces: list[bytes]
) -> None:
    path = tmp_path / "chunks.jsonl"
    if existing is not None:
        path.write_bytes(existing)
    with ComparingStream(path) as comparing:
        for piece in pieces:
            comparing.write(piece)
        status = comparing.status()
    assert status == sync_file(path, b"".join(pieces), check=True)
    assert (path.read_bytes() if path.exists() else None) == existing  # nothing written


def test_a_comparing_stream_never_reads_a_named_pipe_in_the_files_place(tmp_path: Path) -> None:
    path = tmp_path / "chunks.jsonl"
    os.mkfifo(path)  # read, it would wait for a writer forever
    with ComparingStream(path) as comparing:
        comparing.write(b"abc")
        assert comparing.status() == "changed"
