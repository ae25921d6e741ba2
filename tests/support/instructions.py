"""Instruction counts of benchmark children, for ratios that this shared machine's load cannot move.

Time ratios here swing by 10-15% between runs (other sessions' work on the same cores and disk);
valgrind's callgrind counts the instructions a process executes, the same on every run of the same
code and input. A child is counted on a small sample and on an empty one, so that start-up (the
interpreter, the imports, the vocabulary) cancels out of the per-ticket figure.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

# How many tickets the counted runs take (valgrind runs Python about fifty times slower).
SAMPLE_TICKETS = int(os.environ.get("BENCH_INSTRUCTION_TICKETS", "20"))


def wanted() -> bool:
    """Whether instruction counts were asked for (``BENCH_INSTRUCTIONS=1``) and valgrind is installed."""
    return os.environ.get("BENCH_INSTRUCTIONS", "") not in ("", "0") and shutil.which("valgrind") is not None


def instructions(command: list[str]) -> int:
    """The instructions ``command`` executes, counted by valgrind's callgrind."""
    with tempfile.TemporaryDirectory(prefix="callgrind-") as tmp:
        result = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={Path(tmp) / 'out'}", *command],
            capture_output=True,
            text=True,
            check=True,
        )
    collected = re.search(r"Collected : (\d+)", result.stderr)
    if collected is None:
        raise RuntimeError(f"valgrind printed no instruction count for {command[:3]}: {result.stderr[-300:]}")
    return int(collected[1])


def child(code: str, *args: str | Path) -> int:
    """The instructions of ``python -c code args...`` (a benchmark's child, as it runs it)."""
    return instructions([sys.executable, "-c", code, *map(str, args)])


def sample_snapshots(snapshot: Path, scratch: Path, tickets: int = SAMPLE_TICKETS) -> tuple[Path, Path]:
    """Two copies of ``snapshot`` (its lookups and state), one with its first ``tickets`` issues and one with
    none: the same start-up, so the difference of their counts is the tickets' own work."""
    copies = []
    for name, count in (("sample", tickets), ("empty", 0)):
        copy = scratch / f"instructions-{name}"
        (copy / "issues").mkdir(parents=True)
        for path in snapshot.iterdir():
            if path.is_file():
                shutil.copy(path, copy / path.name)
        for path in sorted((snapshot / "issues").iterdir())[:count]:
            shutil.copy(path, copy / "issues" / path.name)
        copies.append(copy)
    return copies[0], copies[1]


def per_ticket(count_run: Callable[[Path], int], sample: Path, empty: Path, tickets: int = SAMPLE_TICKETS) -> float:
    """Instructions a ticket: ``count_run(snapshot)`` on the sample less on the empty snapshot, over the tickets."""
    return (count_run(sample) - count_run(empty)) / tickets
