"""The whole numbers metadata carries (note_ranges.metadata_int), which stats, verify and chunk read: a
number written as text counts only as ASCII digits of a length a ticket id, a note number or an offset
can have. str.isdigit() also takes "²" and "٣", and int() refuses more than 4,300 digits: such a value is
no number to them, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from anchorkit.cli import app
from anchorkit.note_ranges import metadata_int, parse_note_numbers

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
runner = CliRunner()

# What str.isdigit() takes and int() refuses or reads as another number than ASCII digits say, and
# what no ticket id, note number or offset is.
NO_NUMBERS = ["²", "٣", "１２", "9" * 5000, "1" * 19, "-3", "+3", "3.0", "0x1f", "", " "]


@pytest.mark.parametrize(
    ("value", "number"),
    [(12345, 12345), (12345.0, 12345), ("12345", 12345), (" 7 ", 7), ("0", 0), ("9" * 18, 10**18 - 1), (-1, -1)],
)
def test_a_whole_number_is_read_as_metadata_carries_it(value: Any, number: int) -> None:
    assert metadata_int(value) == number


@pytest.mark.parametrize("value", [*NO_NUMBERS, True, 1.5, float("nan"), float("inf"), None, [3], {"n": 3}])
def test_anything_else_is_no_number(value: Any) -> None:
    assert metadata_int(value) is None
    assert parse_note_numbers([3, value]) is None  # a list of note numbers with one that is none


def cli(*args: str | Path) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args])
    # A ValueError converting a number would be uncaught here, not a SystemExit.
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("layout", ["jsonl", "folder"])
@pytest.mark.parametrize("value", ["²", "9" * 5000])
def test_stats_reads_a_chunk_whose_position_is_no_number_as_a_chunk_that_does_not_say_it(
    tmp_path: Path, layout: str, value: str
) -> None:
    if layout == "jsonl":
        chunks = tmp_path / "chunks.jsonl"
        assert cli("chunk", FIXTURES, "--jsonl", chunks)[0] == 0
        lines = chunks.read_text(encoding="utf-8").splitlines()
        record = json.loads(lines[1])
        record["metadata"] |= {"chunk_index": value, "char_start": value}
        lines[1] = json.dumps(record, ensure_ascii=False)
        chunks.write_text("\n".join(lines) + "\n", encoding="utf-8")
    else:
        chunks = tmp_path / "chunks"
        assert cli("chunk", FIXTURES, "--out", chunks, "--sidecars")[0] == 0
        sidecar = chunks / "12301" / "12301-001.md.metadata.json"
        document = json.loads(sidecar.read_text(encoding="utf-8"))
        document["metadataAttributes"] |= {"chunk_index": value, "char_end": value}
        sidecar.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    code, out, err = cli("stats", chunks, "--json")
    assert code == 0, err
    report = json.loads(out)["chunks"]
    assert report["chunks"] > 100 and report["coverage_percent"] == 100.0
