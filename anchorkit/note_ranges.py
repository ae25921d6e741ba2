"""Redmine note numbers as metadata carries them: ``"1-3,5"`` (ranges) or a list, and whole numbers
that Bedrock may return as floats. Shared by the sidecars (render), the chunker (chunk) and verify,
which reads them back from retrieved chunks."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from anchorkit.untrusted import ascii_number


def format_note_numbers(numbers: Sequence[int]) -> str:
    """``[1, 2, 3, 5]`` → ``"1-3,5"`` (runs of consecutive numbers as ranges; the order is kept)."""
    runs: list[list[int]] = []
    for number in numbers:
        if runs and number == runs[-1][1] + 1:
            runs[-1][1] = number
        else:
            runs.append([number, number])
    return ",".join(str(low) if low == high else f"{low}-{high}" for low, high in runs)


_NOTE_RUN = re.compile(r"(\d{1,9})(?:-(\d{1,9}))?")


def parse_note_numbers(value: Any) -> list[int] | None:
    """The numbers of ``format_note_numbers``' text (or of a list of numbers); None if it is neither."""
    if isinstance(value, list):
        items = [metadata_int(item) for item in value]
        return [item for item in items if item is not None] if None not in items else None
    if not isinstance(value, str):
        return None
    numbers: list[int] = []
    for run in value.split(","):
        match = _NOTE_RUN.fullmatch(run.strip())
        if match is None:
            return None
        low, high = int(match[1]), int(match[2] or match[1])
        if high < low or high - low > 100_000:
            return None
        numbers.extend(range(low, high + 1))
    return numbers


def metadata_int(value: Any) -> int | None:
    """A whole number as metadata may carry it (``12345``, ``12345.0``, ``"12345"``), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return ascii_number(value.strip()) if isinstance(value, str) else None
