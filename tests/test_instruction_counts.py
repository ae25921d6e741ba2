"""The benchmarks' instruction counts (tests/support/instructions.py): what they count, and the samples
whose difference takes start-up out."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from support.instructions import child, instructions, per_ticket, sample_snapshots


def test_instructions_grow_with_the_work_a_command_does() -> None:
    idle = instructions([sys.executable, "-c", "pass"])
    busy = child("sum(range(300_000))")  # a benchmark's child: the same interpreter, ``-c`` and its code
    # Summing 300,000 integers takes tens of instructions each: millions more than starting Python.
    assert 5_000_000 < busy - idle < 500_000_000


def test_the_samples_keep_the_snapshot_files_and_take_the_first_issues(tmp_path: Path) -> None:
    snapshot = tmp_path / "snapshot"
    (snapshot / "issues").mkdir(parents=True)
    for ticket in (3, 1, 2):
        (snapshot / "issues" / f"{ticket}.json").write_text(json.dumps({"issue": {"id": ticket}}))
    (snapshot / "lookups.json").write_text("{}")
    (snapshot / "state.json").write_text('{"redmine_url": "https://redmine.example.com"}')
    sample, empty = sample_snapshots(snapshot, tmp_path / "scratch", tickets=2)
    assert sorted(p.name for p in (sample / "issues").iterdir()) == ["1.json", "2.json"]
    assert list((empty / "issues").iterdir()) == []
    for copy in (sample, empty):
        assert (copy / "state.json").read_text() == (snapshot / "state.json").read_text()
        assert (copy / "lookups.json").exists()


def test_a_ticket_costs_the_difference_of_the_two_counts_over_the_tickets() -> None:
    counts = {"sample": 1_000, "empty": 400}
    assert per_ticket(lambda snapshot: counts[snapshot.name], Path("sample"), Path("empty"), tickets=3) == 200
