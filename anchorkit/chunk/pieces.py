"""What the packer (core.py) packs: a ticket's content as segments (its sections and journals), and the pieces
a segment is cut into, each with the boundary before it and what a cut there writes. Pure."""

from __future__ import annotations

import re
from typing import NamedTuple

from anchorkit.render.document import Outline

SECTIONS = DETAILS, DESCRIPTION, HISTORY = ("details", "description", "history")  # a chunk's "section"

_JOURNAL_HEADING = re.compile(r"### \[(?P<date>[^\]\n]*)\] (?P<author>[^\n]*)")


class Segment(NamedTuple):
    start: int  # content offsets
    end: int
    section: str
    journal: int | None  # index of the journal among the history's headings


class Piece(NamedTuple):
    """Content that stays in one chunk; the boundary before it, and what a cut there writes."""

    start: int
    end: int
    cost: int
    level: int
    segment: int
    whole: bool = False  # a whole segment, not yet looked into
    reopen: str = ""  # written at the start of a chunk that starts here
    close: str = ""  # written at the end of a chunk that ends here
    reopen_cost: int = 0
    close_cost: int = 0
    inner: Lines | None = None  # the lines a chunk may also end between, inside the piece


class Lines(NamedTuple):
    """Where a piece may also be cut: between its lines, the boundaries all alike (a list's items, a table's
    rows, a code block's lines: LINE boundaries that reopen and close the same). A chunk that ends among
    them ends after the furthest that fits (they differ only in how full they leave it), so the packer
    finds that one by bisection and never makes a piece of each line."""

    offsets: list[int]  # the content offset of each boundary, ascending
    tokens: list[int]  # the content's token index there
    first: int  # the token index at the piece's start
    reopen: str
    close: str
    reopen_cost: int
    close_cost: int

    def part(self, start: int, stop: int | None, first: int) -> Lines | None:
        """The boundaries ``start:stop`` of a piece that begins at token ``first`` (None: there are none)."""
        offsets = self.offsets[start:stop]
        if not offsets:
            return None
        return Lines(
            offsets, self.tokens[start:stop], first, self.reopen, self.close, self.reopen_cost, self.close_cost
        )


def segments(outline: Outline) -> tuple[list[Segment], list[tuple[str, str]]]:
    """The content's sections and journals (as offsets), and each journal's heading date and author.

    A section whose next heading is a journal's is the history; its own heading goes with its first journal.
    """
    content, headings = outline.content, outline.headings
    bounds: list[tuple[int, str, int | None]] = [(0, DETAILS, None)]
    journals: list[tuple[str, str]] = []
    history_start = None
    for index, (offset, level, line) in enumerate(headings):
        if level == "##" and index + 1 < len(headings) and headings[index + 1][1] == "###":
            history_start = offset
        elif level == "##":
            bounds.append((offset, DESCRIPTION, None))
        else:
            heading = _JOURNAL_HEADING.fullmatch(line)
            journals.append((heading["date"], heading["author"]) if heading else ("", line[4:]))
            bounds.append((offset if history_start is None else history_start, HISTORY, len(journals) - 1))
            history_start = None
    ends = [offset for offset, _, _ in bounds[1:]] + [len(content)]
    segments = [
        Segment(start, end, section, journal) for (start, section, journal), end in zip(bounds, ends, strict=True)
    ]
    return [segment for segment in segments if segment.end > segment.start], journals
