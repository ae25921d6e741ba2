"""Benchmark: the memory `chunk --jsonl FILE` needs for its file, at two sizes side by side.

    python tests/benchmarks/bench_jsonl_scale.py     # BENCH_JSONL_TICKETS (default 2000,20000)

A JSON Lines file of N tickets (3 chunks of ~2 KB each, as anchorkit writes them) is made for each N, and
each case runs in a fresh process, which reports its peak RSS:

- floor: the process with the writer imported and the file stat'ed, nothing read (Python, anchorkit's imports);
- check: ``write_jsonl_file(..., check=True)`` with every line unchanged (what `chunk --jsonl FILE --check`
  does after chunking), the tickets handed over one at a time as the chunker hands them;
- failed ticket: a run where one ticket fails, so its lines are kept from the file being replaced.

The figure is each case's peak above the floor as a share of the file's size, at each N side by side: a
design that holds the file needs at least its size (100% and more, at every N); one that streams it needs a
few bytes a ticket to know where the lines of a failed ticket are (target: under 10% at every N).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from support.chunk_lines import ticket_lines  # noqa: E402

SIZES = [int(n) for n in os.environ.get("BENCH_JSONL_TICKETS", "2000,20000").split(",")]
CASES = ("floor", "check", "failed ticket")
TARGET_PERCENT = 10.0


def measure(case: str, path: Path, tickets: int) -> None:
    """Run one case in this (fresh) process and print its peak RSS in KB."""
    from anchorkit.chunk.writers import EncodedTicket, JsonLines, write_jsonl_file
    from anchorkit.render.transform import TicketFailure

    failed = tickets // 2 if case == "failed ticket" else None

    def results() -> Iterator[EncodedTicket[bytes] | TicketFailure]:
        for ticket_id in range(1, tickets + 1):
            if ticket_id == failed:
                yield TicketFailure(f"issues/{ticket_id}.json", ticket_id, "failed")
            else:
                yield EncodedTicket(ticket_id, 3, ticket_lines(ticket_id), JsonLines())

    path.stat()
    if case != "floor":
        report = write_jsonl_file(results(), path, check=case == "check")
        assert not report.changed and report.chunks == 3 * tickets, report.to_json()
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def peak_kb(case: str, path: Path, tickets: int) -> int:
    command = [sys.executable, __file__, "--measure", case, str(path), str(tickets)]
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    return int(subprocess.run(command, check=True, capture_output=True, text=True, env=environment).stdout)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-jsonl-") as folder:
        for tickets in SIZES:
            path = Path(folder) / f"chunks-{tickets}.jsonl"
            with path.open("wb") as file:
                for ticket_id in range(1, tickets + 1):
                    file.write(ticket_lines(ticket_id))
            peaks = {case: peak_kb(case, path, tickets) for case in CASES}
            size_kb = path.stat().st_size / 1024
            path.unlink()
            row = ", ".join(f"{case} {peaks[case] / 1024:.0f} MB" for case in CASES)
            print(f"{tickets:>7,} tickets, file {size_kb / 1024:.0f} MB: peak RSS {row}")
            for case in CASES[1:]:
                percent = max(0, peaks[case] - peaks["floor"]) * 100 / size_kb
                verdict = "ok" if percent < TARGET_PERCENT else f"over the {TARGET_PERCENT:.0f}% target"
                print(f"    {case}: {percent:.0f}% of the file's size above the floor ({verdict})")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--measure"]:
        measure(sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]))
    else:
        main()
