"""THE anchor format: render, insert, find, strip, and neutralise forgeries.

An anchor is one blockquote line, ``> チケット #12345: VPN接続が不安定になる``, standing alone
between blank lines right after a heading (and, with ``max_gap_tokens``, at block boundaries).
The document title ``# チケット #12345: ...`` identifies the ticket too.

Everything that produces or recognises anchors goes through this module, so the renderer,
the inserter, the verifier's extractor and the forgery neutraliser cannot drift apart.

Recognition is line based on purpose: retrieved chunks are fragments of documents (they may start
inside a code block), so the extractor cannot rely on parsing. Instead, every content line that
has the shape of an anchor or a title is neutralised when the document is made (its ``#`` is
escaped as ``\\#``, which Markdown renders as ``#``), so a genuine anchor is exactly a line of the
anchor shape.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

from anchorkit.markdown_blocks import COMPLEX_LINE, Block, parse_blocks, top_level_blocks
from anchorkit.tokens import approx_tokens

DEFAULT_LABEL = "チケット"

# label: 1-40 characters without '#', '\\' or a line break; then " #<id>:" and the subject.
_LABEL = r"[^#\\\r\n]{1,40}?"
ANCHOR_PATTERN = re.compile(rf"^> (?P<label>{_LABEL}) #(?P<id>\d{{1,12}}):(?: (?P<subject>[^\r\n]*))?\r?$", re.M)
TITLE_PATTERN = re.compile(rf"^# (?P<label>{_LABEL}) #(?P<id>\d{{1,12}}):(?: (?P<subject>[^\r\n]*))?\r?$", re.M)
# Anything that could pass for an anchor or a title once a chunker cuts the line before it or
# strips indentation: quote or heading markers (any depth) at the start of a line or after
# whitespace, a label, "#<digits>:".
_FORGERY = re.compile(
    r"(?:^|(?<=\s))(?P<lead>(?:>[ \t>]*|#{1,6}[ \t]+)(?:" + _LABEL + r")[ \t]*)#(?=\d{1,12}[ \t]*[:：])",
    re.M,
)
_FORGERY_HINT = re.compile(r"#\d{1,12}[ \t]*[:：]")
_TRAILING_HASHES = re.compile(r"(?<=[ \t])#+$")
_WHITESPACE_RUN = re.compile(r"\s+")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


class Anchor(NamedTuple):
    ticket_id: int
    subject: str


def one_line(text: str) -> str:
    """Collapse whitespace (line breaks included) to single spaces and drop control characters."""
    # Most names and subjects are already one clean line; every character the regexes below would
    # touch is non-printable for str.isprintable (ASCII space aside), so that check is exact.
    if text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " ":
        return text
    return _WHITESPACE_RUN.sub(" ", _CONTROL.sub(" ", text)).strip()


def _line(prefix: str, ticket_id: int, subject: str, label: str) -> str:
    label = one_line(label).replace("#", "").replace("\\", "") or DEFAULT_LABEL
    subject = one_line(subject)
    return f"{prefix} {label} #{ticket_id}:" + (f" {subject}" if subject else "")


def anchor_line(ticket_id: int, subject: str, label: str = DEFAULT_LABEL) -> str:
    """``> チケット #12345: subject`` (no line break; the subject is forced onto one line)."""
    return _line(">", ticket_id, subject, label)


def title_line(ticket_id: int, subject: str, label: str = DEFAULT_LABEL) -> str:
    """``# チケット #12345: subject``: the document's first line.

    A subject ending in `` #`` would read as the heading's optional closing sequence and vanish
    from the rendered title, so its last ``#`` is escaped.
    """
    return _TRAILING_HASHES.sub(r"\\\g<0>", _line("#", ticket_id, subject, label))


def _matches(pattern: re.Pattern[str], text: str) -> list[Anchor]:
    return [Anchor(int(m["id"]), (m["subject"] or "").strip()) for m in pattern.finditer(text)]


def find_anchors(text: str) -> list[Anchor]:
    """The genuine anchor lines of a document or of a chunk of one, in order."""
    return _matches(ANCHOR_PATTERN, text)


def find_titles(text: str) -> list[Anchor]:
    """The genuine title lines (``# チケット #ID: subject``) of a document or chunk."""
    return _matches(TITLE_PATTERN, text)


def identified_ticket_ids(text: str) -> set[int]:
    """Ticket ids that a text identifies itself by: its genuine anchors and title lines."""
    return {a.ticket_id for a in find_anchors(text)} | {a.ticket_id for a in find_titles(text)}


def neutralize_forgeries(text: str) -> str:
    """Escape the ``#`` of every line shaped like an anchor or a title (``\\#`` renders as ``#``)."""
    if not _FORGERY_HINT.search(text):  # the cheap necessary condition: most texts have no "#<id>:"
        return text
    return _FORGERY.sub(r"\g<lead>\\#", text)


def strip_anchors(document: str) -> str:
    """The document without its anchor lines: the exact inverse of ``insert_anchors``."""
    lines = document.split("\n")
    kept: list[str] = []
    index = 0
    while index < len(lines):
        if ANCHOR_PATTERN.fullmatch(lines[index]) and (index + 1 == len(lines) or lines[index + 1] == ""):
            # insert_anchors adds "<blank>, anchor" and a blank after it when none was there.
            if kept and kept[-1] == "":
                kept.pop()
            index += 1
            continue
        kept.append(lines[index])
        index += 1
    return "\n".join(kept)


def insert_anchors(
    document: str,
    ticket_id: int,
    subject: str,
    label: str = DEFAULT_LABEL,
    *,
    unanchored_headings: Iterable[str] = (),
    max_gap_tokens: int | None = None,
) -> str:
    """Give every heading of level >= 2 its anchor line; idempotent.

    - The anchor goes right after the heading, as its own blockquote between blank lines; an anchor
      already there is kept (or brought up to date if the subject changed).
    - Headings whose text is in ``unanchored_headings`` (the basic-info section) get none.
    - Only top-level blocks are considered, so an anchor never lands inside a code block, a table,
      a list, a quote or an HTML block.
    - ``max_gap_tokens``: also insert an anchor before a top-level block when more than that many
      (approximate, see tokens.approx_tokens) tokens have passed since the last anchor or heading.
      A single block longer than the limit cannot be split and stays whole.
    """
    if max_gap_tokens is None and not _LINE_STARTING_WITH_HASH.search(document) and not _SETEXT_UNDERLINE.search(document):
        return document  # no heading, so no anchor to place or to bring up to date
    simple = max_gap_tokens is None and not COMPLEX_LINE.search(document)
    anchor = anchor_line(ticket_id, subject, label)
    lines = document.split("\n")
    skip = frozenset(unanchored_headings)
    blocks = _scan_blocks(lines) if simple else top_level_blocks(parse_blocks(document))
    output: list[str] = []
    copied = 0  # lines[:copied] are in output already
    since_anchor = 0
    want_anchor = False

    def emit_anchor_before(start: int) -> None:
        nonlocal copied
        output.extend(lines[copied:start])
        if output and output[-1] != "":
            output.append("")
        output.extend([anchor, ""])
        copied = start

    for block in blocks:
        if _is_anchor_block(block, lines):
            if want_anchor and lines[block.start] != anchor:
                output.extend(lines[copied : block.start])
                output.append(anchor)
                copied = block.end
            want_anchor = False
            since_anchor = 0
            continue
        if want_anchor:
            emit_anchor_before(block.start)
            want_anchor = False
        if block.kind == "heading":
            since_anchor = 0
            want_anchor = block.level >= 2 and block.text.strip() not in skip
            continue
        if max_gap_tokens is None:
            continue  # only the gap rule needs the cost of a block
        cost = approx_tokens("\n".join(lines[block.start : block.end]))
        if since_anchor > 0 and since_anchor + cost > max_gap_tokens:
            emit_anchor_before(block.start)
            since_anchor = 0
        since_anchor += cost
    output.extend(lines[copied:])
    if want_anchor:
        # The last heading has no block after it: its anchor goes at the end (before the final newline).
        trailing_newline = output and output[-1] == ""
        while output and output[-1] == "":
            output.pop()
        output.extend(["", anchor] + ([""] if trailing_newline else []))
    return "\n".join(output)


def _is_anchor_block(block: Block, lines: list[str]) -> bool:
    return block.kind == "blockquote" and block.end - block.start == 1 and bool(ANCHOR_PATTERN.fullmatch(lines[block.start]))


_LINE_STARTING_WITH_HASH = re.compile(r"^ {0,3}#", re.M)
_SETEXT_UNDERLINE = re.compile(r"^ {0,3}(?:=+|-+)[ \t]*$", re.M)
_ATX_HEADING = re.compile(r"(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")


def _scan_blocks(lines: list[str]) -> list[Block]:
    """Top-level blocks of a text without COMPLEX_LINE constructs, by a line scan.

    There, a line starting with '#' is always a top-level ATX heading (headings interrupt
    paragraphs and close lists and quotes), and an anchor line between a blank line (or a heading)
    and a blank line is a one-line blockquote. Every other run of non-blank lines is reported as one
    "text" block: only its start matters, since ``max_gap_tokens`` always parses.
    """
    blocks: list[Block] = []
    previous_blank = True
    for number, line in enumerate(lines):
        heading = _ATX_HEADING.match(line) if line.startswith("#") else None
        if heading:
            blocks.append(Block("heading", number, number + 1, len(heading[1]), heading[2] or ""))
        elif (
            (previous_blank or blocks[-1].kind == "heading")
            and (number + 1 == len(lines) or lines[number + 1] == "")
            and ANCHOR_PATTERN.fullmatch(line)
        ):
            blocks.append(Block("blockquote", number, number + 1))
        elif line and (previous_blank or blocks[-1].kind != "text"):
            blocks.append(Block("text", number, number + 1))
        elif line:
            blocks[-1] = Block("text", blocks[-1].start, number + 1)
        previous_blank = line == ""
    return blocks
