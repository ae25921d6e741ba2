"""Spacing anchors: any window of N tokens of a document holds a complete anchor line or the title.

A window of N tokens that starts just after an anchor's first token must still hold the next anchor
whole, so anchor starts may be at most ``N - A`` tokens apart (A: the next anchor's tokens); the
title counts as the first anchor. The anchors after headings (anchors.insert_anchors) stay where
they are; this module adds the fewest spacing anchors (the line it is given: by default the short
``> チケット #12345:``, so A is small) that keep every stretch between anchor starts within that gap,
each as late as the gap allows (counted from the last anchor of any kind). A stretch that ends at an
anchor after a heading (longer: it carries the subject) must leave room for that anchor.

A stretch longer than the gap is cut at the latest safe point (see anchors.py for how each cut is
written so that ``anchors.strip_anchors`` undoes it exactly):

- between top-level blocks;
- between the items of a top-level list (the basic-info list too), the lines of a quote;
- in a paragraph at a line break or after a sentence end (``。．！？``, ``. `` ...), never where the
  second half would start another construct or inside inline markup;
- fenced code between two lines (closed, anchor, reopened with the same info string), and so a
  ``<pre>`` block whose opening tag(s) and closing tag(s) stand alone on their lines;
  indented code between two lines; a table between rows (header and delimiter rows repeated).

Other HTML blocks, headings and single lines without a sentence end are never cut: a line longer than
the gap leaves the windows inside it without an anchor (docs/anchoring.md measures how often).

Token counts are an upper bound of the chunker's: each line (or sentence piece) is counted on its
own, which for cl100k_base is never less than counting the lines together, since its pre-tokenizer
does not join a line break with the next line's first character. Stretches whose UTF-8 size is
within the gap are not tokenized at all (a cl100k token is at least one byte).

For the same reason the count of a stretch, a section or a tail is the sum of the counts of its
pieces, cut before every line that starts with a character other than whitespace: with a counter
marked ``LineAdditive`` (cl100k_base, UTF-8 bytes) each piece is tokenized once and the sums are
exact; the approximation rounds, so there every text is counted whole.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import compress, islice, pairwise, repeat

from markdown_it.token import Token

from anchorkit.anchors import (
    AT_LINE_BREAK,
    BETWEEN_BLOCKS,
    INSIDE_LINE,
    TABLE_DELIMITER,
    code_closer,
    strip_anchors,
)
from anchorkit.markdown_blocks import FENCE_BLOCK, TABLE_BLOCK, holds_complex_lines, line_blocks, parse_blocks
from anchorkit.tokens import KnownCounts, approx_tokens

TokenCounter = Callable[[str], int]


class LineAdditive:
    """A token counter that adds up at line starts: ``count(a + b) == count(a) + count(b)`` whenever
    ``a`` ends with a line break and ``b`` starts with a character that is not whitespace.

    True of cl100k_base: its pre-tokenizer ends every pre-token at a line break that such a character
    follows (no pattern of it looks behind or joins the two), and BPE merges only inside pre-tokens.
    True of UTF-8 bytes. Not of the approximation, which rounds.
    """

    def __init__(self, count: TokenCounter) -> None:
        self.count = count

    def __call__(self, text: str) -> int:
        return self.count(text)


def approx_tokens_with_margin(text: str) -> int:
    """``tokens.approx_tokens`` with a safety margin for its error (docs/anchoring.md has the figures)."""
    return -(-approx_tokens(text) * APPROX_MARGIN_PERCENT // 100)


# cl100k_base / approx_tokens over 10-line stretches of the long-ticket corpus and the fixtures:
# median 0.95, 99th percentile 1.14 (base64 and minified JSON reach 2.4: their letters are not words).
APPROX_MARGIN_PERCENT = 115

# A cut inside a paragraph after a sentence end: Japanese full stops (and closing brackets after
# them), or Latin ones followed by spaces; the second half starts at the next non-space character.
_SENTENCE_END = re.compile(r"[。．！？][」』）)]*|[.!?][\"')\]」』）]*[ \t]+")
# A line that could start something other than a paragraph's text if a cut put it at a block
# start (a list item, heading, quote, fence, HTML, thematic break, setext underline, indented
# code, link reference definition; a table only with the line after it: see _Paragraph._may_cut).
_NOT_PARAGRAPH_START = re.compile(r"(?:[ \t]*$| {4}|\t| {0,3}(?:[-+*=_#><\[~`]|\d{1,9}[.)]))")  # (for .match)


@dataclass
class _Point:
    """Where an anchor may go: before ``out[index]``, with ``since`` tokens from the last anchor start."""

    index: int
    since: int
    before: list[str]  # lines written before the anchor (e.g. a closing fence)
    after: list[str]  # lines written after the anchor (e.g. the reopening fence)
    before_cost: int
    after_cost: int
    inside_line: bool = False


class _Spacer:
    """Places spacing anchors in one stretch (an anchor or title line and the lines up to the next)."""

    def __init__(self, anchor: str, gap: int, count: TokenCounter) -> None:
        self.anchor = anchor
        self.gap = gap
        self.count = count
        self.anchor_cost = count(anchor + "\n")
        self.out: list[str] = []
        self.glued: list[bool] = []  # glued[i]: out[i] continues out[i - 1] on the same line
        self.points: list[_Point] = []
        self.since = 0
        self.content = False  # whether anything but blank lines came since the last anchor
        self.cut_before_next = False  # an anchor went inside the line that the next piece continues
        # A point's shape (before, after, inside_line, blanks) → the lines it writes and their costs.
        self._written: dict[tuple[object, ...], tuple[list[str], list[str], int, int]] = {}

    def _line_cost(self, line: str) -> int:
        return self.count(line + "\n")

    def add(self, text: str, cost: int, glued: bool = False) -> None:
        """Append a line (or, ``glued``, the rest of the previous line) that costs ``cost`` tokens."""
        while self.since + cost > self.gap and self._place():
            pass
        self.out.append(text)
        self.glued.append(glued and not self.cut_before_next)
        self.cut_before_next = False
        self.since += cost
        self.content = self.content or bool(text)

    def point(
        self,
        before: tuple[str, ...] = (),
        after: tuple[str, ...] = (),
        inside_line: bool = False,
        blanks: int = BETWEEN_BLOCKS,
    ) -> None:
        """A place for an anchor before the next ``add``."""
        if not self.content:
            return  # right after an anchor: another one here would be wasted
        key = (before, after, inside_line, blanks)
        written = self._written.get(key)
        if written is None:
            # A stretch has thousands of points and a handful of shapes (a code block's closer and opener).
            written_before = [*before, ""] if blanks != BETWEEN_BLOCKS else [*before]
            written_after = [*[""] * blanks, *after]
            before_cost = sum(map(self._line_cost, written_before)) + (1 if inside_line else 0)
            after_cost = sum(map(self._line_cost, written_after))
            written = self._written[key] = (written_before, written_after, before_cost, after_cost)
        self.points.append(_Point(len(self.out), self.since, *written, inside_line))

    def finish(self, end_gap: int) -> None:
        """Anchors until the stretch's end is within ``end_gap`` of the last one (as far as points allow)."""
        while self.since > end_gap and self._place():
            pass

    def _place(self) -> bool:
        """Put an anchor at the latest point that keeps the gap (else the earliest one); False if none."""
        if not self.points:
            return False
        feasible = [p for p in self.points if p.since + p.before_cost <= self.gap]
        chosen = feasible[-1] if feasible else self.points[0]
        inserted = [*chosen.before, self.anchor, *chosen.after]
        at = chosen.index
        if chosen.inside_line and at < len(self.out):
            self.glued[at] = False  # the line is cut here
        self.cut_before_next = chosen.inside_line and at == len(self.out)
        self.out[at:at] = inserted
        self.glued[at:at] = [False] * len(inserted)
        shift = self.anchor_cost + chosen.after_cost - chosen.since
        self.points = [p for p in self.points if p.index > at]
        for later in self.points:
            later.index += len(inserted)
            later.since += shift
        self.since += shift
        self.content = any(self.out[at + len(inserted) :]) or any(chosen.after)
        return True

    def lines(self) -> list[str]:
        result: list[str] = []
        for text, glued in zip(self.out, self.glued):
            if glued:
                result[-1] += text
            else:
                result.append(text)
        return result


def space_anchors(document: str, anchor: str, chunk_tokens: int, count: TokenCounter) -> str:
    """``document`` with spacing anchors (the line ``anchor``) so that any window of
    ``chunk_tokens`` tokens holds a complete anchor or title line (see the module notes).

    ``document`` starts with its title line and already has its anchors after headings; anchors
    of the same ticket already in it (any subject, either form) count, so the result is a fixed point.
    """
    additive = isinstance(count, LineAdditive)
    count = _memoized(count)  # half the lines are blank, and the same few lines recur
    anchor_cost = count(anchor + "\n")
    gap = chunk_tokens - anchor_cost
    prefix = anchor[: anchor.index(":") + 1]  # "> チケット #12345:": an anchor of this ticket
    pieces = _Pieces(count, additive)
    lines = _close_sections(document.split("\n"), anchor, prefix, chunk_tokens, anchor_cost, pieces)
    starts = [0, *_anchor_indexes(lines, prefix)]
    bounds = [*starts, len(lines)]
    output: list[str] = []
    for start, end in pairwise(bounds):
        stretch = lines[start:end]
        # Room for the anchor that ends the stretch (the document's end: as for a spacing anchor).
        end_gap = chunk_tokens - count(lines[end] + "\n") if end < len(lines) else gap
        if pieces.within(stretch, min(gap, end_gap)):
            output.extend(stretch)
        else:
            output.extend(_spaced(stretch, anchor, gap, end_gap, count))
    return "\n".join(_close_document(output, anchor, prefix, chunk_tokens, anchor_cost, pieces))


class _Pieces:
    """Counts of lines joined (``"\\n".join(lines)``, plus a final line break by default): with a
    ``LineAdditive`` counter, the sum of the memoised counts of their pieces (see the module notes)."""

    def __init__(self, count: TokenCounter, additive: bool) -> None:
        self.memoized = count
        self.additive = additive

    def within(self, lines: Sequence[str], limit: int, final_line_break: bool = True) -> bool:
        """Whether the lines cost at most ``limit`` tokens: at once when their UTF-8 size is (a token is
        a byte at least), else counted piece by piece until the pieces exceed it."""
        text = "\n".join(lines) + ("\n" if final_line_break else "")
        if len(text.encode("utf-8")) <= limit:
            return True
        if not self.additive:
            return self.memoized(text) <= limit
        total, start = 0, 0
        for piece in _PIECE_START.finditer(text):
            total += self.memoized(text[start : piece.end()])
            if total > limit:
                return False
            start = piece.end()
        return total + self.memoized(text[start:]) <= limit


# Where a piece starts: after a line break, at a line's first character when it is not white space.
_PIECE_START = re.compile(r"\n(?=\S)")


def _close_document(
    lines: list[str], anchor: str, prefix: str, chunk_tokens: int, anchor_cost: int, pieces: _Pieces
) -> list[str]:
    """The lines with an anchor at the end, unless the document fits in a chunk or ends near an anchor.

    A fixed-size chunker's last window ends at the document's end, wherever the windows before it
    started, so it may be short and start after the last anchor: the anchor at the end is in it.
    Decided on the spaced document, so that a second run, which finds it spaced already, decides the same.
    """
    if len("\n".join(lines).encode("utf-8")) + 1 <= chunk_tokens:
        return lines  # one chunk: it holds the title
    last = next((index for index in range(len(lines) - 1, 0, -1) if lines[index].startswith(prefix)), 0)
    if _tail_within(lines[last + 1 :], anchor_cost, pieces):
        return lines
    end = len(lines) - 1 if lines[-1] == "" else len(lines)
    if _ATX_HEADING.match(lines[end - 1] or lines[end - 2]):
        return lines  # text shaped like a heading (in HTML, say): an anchor after it would read as its own
    return [*lines[:end], *([anchor] if lines[end - 1] == "" else ["", anchor]), *lines[end:]]


def _anchor_indexes(lines: list[str], prefix: str) -> list[int]:
    """Where the lines after the title start with ``prefix`` (scanned in C: a document has thousands of lines)."""
    return list(compress(range(1, len(lines)), map(str.startswith, islice(lines, 1, None), repeat(prefix))))


def _memoized(count: TokenCounter) -> TokenCounter:
    return KnownCounts(count.count if isinstance(count, LineAdditive) else count).__getitem__


def _tail_within(lines: list[str], anchor_cost: int, pieces: _Pieces) -> bool:
    """Whether the lines, blank lines at both ends left out, cost no more than an anchor."""
    first = next((index for index, line in enumerate(lines) if line), len(lines))
    end = next((index + 1 for index in range(len(lines) - 1, first - 1, -1) if lines[index]), first)
    tail = lines[first:end]
    return not tail or pieces.within(tail, anchor_cost, final_line_break=False)


def _close_sections(
    lines: list[str], anchor: str, prefix: str, chunk_tokens: int, anchor_cost: int, pieces: _Pieces
) -> list[str]:
    """The lines with an anchor at the end of every section longer than a chunk (unless one is there).

    Chunkers that start a chunk at each heading cut a long section into windows from its heading,
    and the last window may be short: the anchor at the section's end is in it (unless it is
    shorter than the anchor), where the anchors spaced from the start may not be.
    """
    anchors = _anchor_indexes(lines, prefix)
    # Every heading is followed by its anchor ("heading", "", anchor); the title is the first line.
    headings = [
        0,
        *(
            index - 2
            for index in anchors
            if index >= 2 and lines[index - 1] == "" and _ATX_HEADING.match(lines[index - 2])
        ),
    ]
    end = len(lines) - 1 if lines[-1] == "" else len(lines)
    last_anchor = {}  # section start → its last anchor (or the title)
    for index in [0, *anchors]:
        last_anchor[headings[bisect_right(headings, index) - 1]] = index
    for start, stop in reversed(list(zip(headings, [*headings[1:], end]))):
        section = "\n".join(lines[start:stop])
        if len(section.encode("utf-8")) <= chunk_tokens:
            continue
        if _tail_within(lines[last_anchor[start] + 1 : stop], anchor_cost, pieces):
            continue
        # Measured without anchors (and the lines they bring), so that a second run decides the same.
        inside = anchors[bisect_right(anchors, start) : bisect_right(anchors, stop)]
        if inside == [start + 2]:  # only the heading's own anchor ("heading", "", anchor)
            bare = lines[start : inside[0] - 1] + lines[inside[0] + 1 : stop]
        else:
            bare = strip_anchors(section).split("\n") if inside else lines[start:stop]
        if pieces.within(bare, chunk_tokens, final_line_break=False):
            continue
        if _ATX_HEADING.match(lines[stop - 1] or lines[stop - 2]):
            continue  # text shaped like a heading (in HTML, say): an anchor after it would read as its own
        if stop == end:
            lines[stop:stop] = [anchor] if lines[stop - 1] == "" else ["", anchor]
        else:
            lines[stop:stop] = [anchor, ""] if lines[stop - 1] == "" else ["", anchor, "", ""]
    return lines


def _spaced(stretch: list[str], anchor: str, gap: int, end_gap: int, count: TokenCounter) -> list[str]:
    """A stretch (its anchor or title line, then content lines) with spacing anchors; the last of
    them within ``end_gap`` of the stretch's end."""
    spacer = _Spacer(anchor, gap, count)
    spacer.add(stretch[0], count(stretch[0] + "\n"))
    content = stretch[1:]
    plan = cut_plan(content)
    for number, line in enumerate(content):
        kind = plan.get(number)
        if kind is not None and _ATX_HEADING.match(
            content[number - 1] or content[number - 2] if number >= 2 else stretch[0]
        ):
            kind = None  # text shaped like a heading (in HTML, say): an anchor after it would read as its own
        if kind is _BLOCK:
            spacer.point()
        elif kind is _CODE:
            opener = plan.code_openers[number]
            spacer.point(before=(code_closer(opener) or "",), after=(opener,), blanks=AT_LINE_BREAK)
        elif kind is _TABLE:
            spacer.point(after=plan.table_heads[number], blanks=AT_LINE_BREAK)
        elif kind is not None:  # a line break in a paragraph, list, quote or indented code
            spacer.point(blanks=AT_LINE_BREAK)
        if number in plan.paragraph_lines:
            _add_sentences(spacer, line, plan, content, number)
        else:
            spacer.add(line, count(line + "\n"))
    spacer.finish(end_gap)
    return spacer.lines()


def cut_plan(content: list[str]) -> _Plan:
    """Where ``content`` may be cut between lines (and which lines are paragraph text, for
    ``sentence_cuts``): the cheap line scan when it can answer, else the block parser."""
    plan = _plan_by_lines(content)
    return _plan(content) if plan is None else plan


class _Plan(dict[int, str]):
    """Content line number → what kind of cut may go before it; plus the paragraph lines."""

    def __init__(self) -> None:
        super().__init__()
        self.paragraph_lines: dict[int, int] = {}  # line → first line of its paragraph
        self.paragraphs: dict[int, _Paragraph] = {}  # first line → the paragraph
        self.code_openers: dict[int, str] = {}  # code line → its fence's (or <pre>'s) opening line
        self.table_heads: dict[int, tuple[str, str]] = {}  # row → header and delimiter rows
        # Top-level fenced or HTML code block: first line → the line after it (what the chunker needs
        # to close and reopen code it cuts: known here without parsing the text again).
        self.code_blocks: dict[int, int] = {}

    def add_paragraph(self, content: list[str], start: int, end: int) -> None:
        """The paragraph ``content[start:end]``, and the cuts between its lines."""
        paragraph = self.paragraphs[start] = _Paragraph(content[start:end])
        for number in range(start, end):
            self.paragraph_lines[number] = start
        for line in range(1, end - start):
            if paragraph.may_cut(line):
                self[start + line] = _LINE


# What a text leaves open: "[" less "]", "<" less ">", and a bit for each inline mark it holds an odd
# number of times (`, *, _, ~: markup that may span a cut). A paragraph is cut only where all are closed.
Balance = tuple[int, int, int]


def _balance(text: str) -> Balance:
    count = text.count
    odd = (count("`") & 1) | (count("*") & 1) << 1 | (count("_") & 1) << 2 | (count("~") & 1) << 3
    return count("[") - count("]"), count("<") - count(">"), odd


def _marks_in(text: str) -> int:
    """A bit for each inline mark ``text`` holds (the bits of ``_balance``)."""
    return ("`" in text) | ("*" in text) << 1 | ("_" in text) << 2 | ("~" in text) << 3


class _Paragraph:
    """A paragraph's lines, and what a cut needs to know of the text around it at each of them, found in
    one pass each way (the text before a line and the lines after it are never joined: a paragraph of
    thousands of lines, a log pasted without a fence, costs what its length does)."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.before: list[Balance] = [(0, 0, 0)]  # the balance of the paragraph's text before each line
        brackets = angles = odd = 0
        for line in lines[:-1]:
            line_brackets, line_angles, line_odd = _balance(line)
            brackets, angles, odd = brackets + line_brackets, angles + line_angles, odd ^ line_odd
            self.before.append((brackets, angles, odd))
        # The inline marks in each line and the lines after it (the first line's: never asked for).
        self.marks_from = [0] * (len(lines) + 1)
        for index in range(len(lines) - 1, 0, -1):
            self.marks_from[index] = self.marks_from[index + 1] | _marks_in(lines[index])

    def may_cut(self, line: int) -> bool:
        """Whether the paragraph may be cut before its line ``line``."""
        return self._may_cut(self.before[line], line, 0, self.marks_from[line])

    def cuts_inside(self, line: int, columns: list[int]) -> list[int]:
        """Those of the ascending ``columns`` before which the paragraph may be cut inside its line ``line``
        (the line's text is looked at once, however many they are: a one-line paragraph can be long)."""
        text = self.lines[line]
        later, marks, end = [], self.marks_from[line + 1], len(text)
        for column in reversed(columns):
            marks, end = marks | _marks_in(text[column:end]), column
            later.append(marks)
        kept = []
        (brackets, angles, odd), start = self.before[line], 0
        for column, marks in zip(columns, reversed(later), strict=True):
            head_brackets, head_angles, head_odd = _balance(text[start:column])
            brackets, angles, odd, start = brackets + head_brackets, angles + head_angles, odd ^ head_odd, column
            if self._may_cut((brackets, angles, odd), line, column, marks):
                kept.append(column)
        return kept

    def _may_cut(self, before: Balance, line: int, column: int, later: int) -> bool:
        """Whether the paragraph may be cut between text whose ``_balance`` is ``before`` and its line
        ``line`` from ``column``, ``later`` being the inline marks (``_marks_in``) from there on.

        The text after the cut may hold ``|`` (Textile table rows typed into CommonMark, say) when the
        next line is not a delimiter row: then the second half cannot start a table (and the parser read
        the whole as a paragraph, so no table starts further down either). An emphasis mark left open
        before the cut (``|_. head |`` in such a table) is harmless when the rest of the paragraph holds
        no such mark: nothing after the cut could close it. Either way the answer is the same once other
        cuts have split the paragraph, so a second run cuts the same.
        """
        text = self.lines[line]
        if _starts_a_block(text, column):
            return False
        below = self.lines[line + 1] if line + 1 < len(self.lines) else None
        if below is not None and TABLE_DELIMITER.match(below) and text.rfind("|") >= column:
            return False
        brackets, angles, odd = before
        return not brackets and not angles and not odd & later


def _starts_a_block(text: str, column: int = 0) -> bool:
    """Whether ``text`` from ``column`` would start something else than paragraph text (or be a table's
    delimiter row) at a block start."""
    return bool(_NOT_PARAGRAPH_START.match(text, column) or TABLE_DELIMITER.match(text, column))


def _may_cut_in_quote(line: str) -> bool:
    """Whether a quote may be cut before its line ``line``: what follows the quote marks starts no block,
    no table (no pipe: the lines after it are not looked at), and nothing is left open before it."""
    text = line.lstrip("> \t") or "x"
    return not _starts_a_block(text) and "|" not in text


# Kinds of cut (see anchors.py for how each is written).
_BLOCK = "between blocks"
_LINE = "at a line break"
_CODE = "in fenced or <pre> code"
_TABLE = "in a table"


def _plan(content: list[str]) -> _Plan:
    """Where a stretch's content may be cut, from its top-level block structure."""
    plan = _Plan()
    tokens = parse_blocks("\n".join(content))
    first_block = True
    for index, token in enumerate(tokens):
        if token.map is None or token.nesting < 0:
            continue
        start, end = token.map
        if token.level == 1 and token.type == "list_item_open" and start > 0 and not _is_first_item(tokens, index):
            plan[start] = _BLOCK if content[start - 1] == "" else _LINE
        if token.level != 0:
            continue
        if not first_block and start > 0 and content[start - 1] == "":
            plan[start] = _BLOCK
        first_block = False
        kind = token.type
        if kind in ("fence", "html_block"):
            plan.code_blocks[start] = end
        if kind == "paragraph_open":
            plan.add_paragraph(content, start, end)
        elif kind in ("fence", "html_block") and _cuttable_code(kind, content[start:end]):
            for number in range(start + 2, end - 1):
                plan[number] = _CODE
                plan.code_openers[number] = content[start]
        elif kind == "code_block":
            for number in range(start + 1, end):
                if content[number] and content[number - 1]:
                    plan[number] = _LINE
        elif (
            kind == "table_open"
            and end - start >= 4
            and "|" in content[start + 1]
            and not any(row == content[start] or TABLE_DELIMITER.match(row) for row in content[start + 2 : end])
        ):
            # (a table whose rows repeat its head could not be told from one cut by an anchor; one whose
            # delimiter row has no pipe, "---", is not one anchors.strip_anchors knows to undo a cut in)
            for number in range(start + 3, end):
                plan[number] = _TABLE
                plan.table_heads[number] = (content[start], content[start + 1])
        elif kind == "blockquote_open" and not any(_QUOTED_CONSTRUCT.match(line) for line in content[start:end]):
            for number in range(start + 1, end):
                line = content[number]
                if line.startswith(">") and content[number - 1] and _may_cut_in_quote(line):
                    plan[number] = _LINE
    return plan


def _cuttable_code(kind: str, block: list[str]) -> bool:
    """Whether code may be cut between its lines: a fence (closed or not), or a ``<pre>`` HTML block
    whose opening tag(s) and closing tag(s) stand alone on its first and last lines."""
    closer = code_closer(block[0])
    if closer is None or len(block) < 4:
        return False
    return kind == "fence" or block[-1] == closer


_LIST_ITEM = re.compile(r"(?:[-+*]|\d{1,9}[.)]) (?=\S)")  # one space: the item's text starts right after
_ATX_HEADING = re.compile(r"#{1,6}(?:[ \t]|$)")
# A thematic break line, after a line break (searched for in "\n" + text: see markdown_blocks.holds_complex_lines).
_THEMATIC_BREAK_AFTER_BREAK = re.compile(r"\n {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$", re.M)


def _plan_by_lines(content: list[str]) -> _Plan | None:
    """``_plan`` by a line scan, for text made of paragraphs, lists, quotes, ATX headings, and fenced
    code, ``<pre>`` blocks and tables opened at column 0 at a block start and closed (no other HTML,
    indented code, setext heading, or a row that could make a table of a line with a pipe: then the
    parser is needed, None). It agrees with ``_plan`` wherever it answers (tested), so the block
    parser, the slow part, only runs for the stretches that need it."""
    blocks = line_blocks(content)
    if blocks is None:
        return None
    inside = {number for start, (end, _) in blocks.items() for number in range(start, end)}
    outside = [line for number, line in enumerate(content) if number not in inside] if blocks else content
    text = "\n".join(outside)
    if (
        (any("|" in line for line in outside) and any(map(_may_delimit_a_table, outside)))
        or holds_complex_lines(text)
        or _THEMATIC_BREAK_AFTER_BREAK.search("\n" + text)
    ):
        return None
    plan = _Plan()
    plan.code_blocks = {start: end for start, (end, block) in blocks.items() if block != TABLE_BLOCK}
    kind = ""  # of the block being read ("" after a blank line)
    marker = ""  # of the list being read
    indent = 0  # where the text of its current item starts
    seen_block = False
    for number, line in enumerate(content):
        if number in inside:
            if number in blocks:  # its first line
                if kind not in ("", "heading", "code"):
                    return None  # a block that interrupts a paragraph, a list or a quote: let the parser say
                if seen_block and kind == "":
                    plan[number] = _BLOCK
                seen_block, kind = True, "code"
                _plan_line_block(plan, content, number, *blocks[number])
            continue
        if not line:
            kind = ""
            continue
        new_block = kind in ("", "heading", "code")
        if new_block:
            if line[0] in " \t":
                return None  # a list item's continuation after a blank line, or the like
            if seen_block and kind == "":
                plan[number] = _BLOCK
            seen_block = True
            item = _LIST_ITEM.match(line)
            kind = (
                "heading"
                if _ATX_HEADING.match(line)
                else "list"
                if item
                else "quote"
                if line[0] == ">"
                else "paragraph"
            )
            if kind == "paragraph" and _NOT_PARAGRAPH_START.match(line):
                return None  # an empty list item, a marker followed by more spaces, ...
            marker, indent = (_marker(item[0]), len(item[0])) if item else ("", 0)
            if kind == "paragraph":
                end = next((later for later in range(number, len(content)) if not content[later]), len(content))
                plan.add_paragraph(content, number, end)  # (a line below that would not continue it: None)
            continue
        if kind == "list":
            item = _LIST_ITEM.match(line)
            if item and _marker(item[0]) == marker:
                plan[number] = _LINE
            elif item:
                marker = _marker(item[0])  # another kind of marker starts another list, right after this one
            if item:
                indent = len(item[0])
            elif len(line) - len(line.lstrip(" ")) < indent:
                return None  # a lazy continuation, or an item of another list: let the parser say
        elif kind == "quote":
            if line[0] != ">":
                return None
            if _QUOTED_CONSTRUCT.match(line):
                return None
            if _may_cut_in_quote(line):
                plan[number] = _LINE
        else:
            if _NOT_PARAGRAPH_START.match(line) or _ATX_HEADING.match(line):
                return None  # it may interrupt the paragraph: let the parser say
    return plan


def _may_delimit_a_table(line: str) -> bool:
    """Whether a line could be a table's delimiter row (markdown-it's: only pipes, dashes, colons and
    blanks, a dash in each cell), which a row with a pipe before it would make a table. Without one, a
    pipe outside the blocks line_blocks found is plain text (Textile table rows typed into CommonMark)."""
    return "-" in line and not line.strip("|-: \t")


def _plan_line_block(plan: _Plan, content: list[str], start: int, end: int, block: str) -> None:
    """The cuts inside a block ``markdown_blocks.line_blocks`` found, as ``_plan`` makes them."""
    if block == TABLE_BLOCK:
        head = content[start]
        if end - start >= 4 and not any(row == head or TABLE_DELIMITER.match(row) for row in content[start + 2 : end]):
            for number in range(start + 3, end):
                plan[number] = _TABLE
                plan.table_heads[number] = (head, content[start + 1])
    elif block == FENCE_BLOCK or _cuttable_code(block, content[start:end]):
        for number in range(start + 2, end - 1):
            plan[number] = _CODE
            plan.code_openers[number] = content[start]


def _marker(item: str) -> str:
    """What must stay the same for list items to be one list: the bullet, or an ordered list's delimiter."""
    marker = item.rstrip()
    return marker[-1] if marker[-1] in ".)" else marker


# Inside a quote, constructs a cut between lines could break open.
_QUOTED_CONSTRUCT = re.compile(r"^[> \t]*(?:`{3,}|~{3,}|<| {4})")


def _is_first_item(tokens: list[Token], index: int) -> bool:
    return tokens[index - 1].type in ("bullet_list_open", "ordered_list_open")


def _add_sentences(spacer: _Spacer, line: str, plan: _Plan, content: list[str], number: int) -> None:
    """A paragraph line, with a possible cut after each sentence end that is safe to cut at.

    Only lines longer than a quarter of the gap are cut inside: shorter ones gain little, and a
    second run sees every line it cut as at least that long again (so it cuts the same).
    """
    cost = spacer.count(line + "\n")
    if cost <= spacer.gap // 4:
        spacer.add(line, cost)
        return
    cuts = sentence_cuts(plan, content, number)
    if not cuts:
        spacer.add(line, cost)
        return
    pieces = [line[start:end] for start, end in zip([0, *cuts], [*cuts, len(line)])]
    spacer.add(pieces[0], spacer.count(pieces[0]))
    for piece in pieces[1:-1]:
        spacer.point(inside_line=True, blanks=INSIDE_LINE)
        spacer.add(piece, spacer.count(piece), glued=True)
    spacer.point(inside_line=True, blanks=INSIDE_LINE)
    spacer.add(pieces[-1], spacer.count(pieces[-1] + "\n"), glued=True)


def sentence_cuts(plan: _Plan, content: list[str], number: int) -> list[int]:
    """Where the paragraph line ``content[number]`` may be cut inside: after each sentence end that
    is safe to cut at (``_Paragraph``), as offsets into the line."""
    line = content[number]
    cuts = [m.end() for m in _SENTENCE_END.finditer(line) if m.end() < len(line)]
    if not cuts:
        return cuts
    first = plan.paragraph_lines[number]
    return plan.paragraphs[first].cuts_inside(number - first, cuts)
