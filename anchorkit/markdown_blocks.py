"""Block structure of Markdown, from markdown-it-py's block parser.

Only the block level is parsed (inline rules are not needed to know where blocks start and end),
which is what makes it cheap enough to run per ticket. ``line_blocks`` delimits the few blocks a line
scan can delimit exactly (tested against the parser), so that common texts need no parse at all.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from itertools import compress

from markdown_it import MarkdownIt
from markdown_it.rules_block.state_block import StateBlock
from markdown_it.token import Token

# Lines that can start a construct whose extent a line scan cannot know: fences, HTML blocks,
# setext underlines / thematic breaks, indented code and headings that are not at column 0.
# A text without any of them has top-level ATX headings exactly at the lines that start with '#'.
COMPLEX_LINE = re.compile(r"^(?: {0,3}(?:`{3,}|~{3,}|<|[=\-][=\- \t]*$)| {4}|\t| {1,3}#)", re.M)
# The same after a line break (the first line is matched on its own): a regex finds a line break at once,
# where it tries "^" at every character (three times slower on long tickets).
_COMPLEX_AFTER_BREAK = re.compile("\n" + COMPLEX_LINE.pattern.removeprefix("^"), re.M)


def holds_complex_lines(text: str) -> bool:
    """Whether a line of ``text`` matches ``COMPLEX_LINE`` (the first line on its own rather than after a
    line break put in front: that would copy the text)."""
    return COMPLEX_LINE.match(text) is not None or _COMPLEX_AFTER_BREAK.search(text) is not None


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table")


def parse_blocks(text: str) -> list[Token]:
    """Block tokens of ``text`` (inline children are not parsed)."""
    parser = _parser()
    tokens: list[Token] = []
    state = StateBlock(text, parser, {}, tokens)
    parser.block.tokenize(state, state.line, state.lineMax)
    return tokens


@dataclass(frozen=True)
class Block:
    """A top-level block: ``lines[start:end]`` of the source."""

    kind: str  # token type without "_open": heading, paragraph, fence, blockquote, table, ...
    start: int
    end: int
    level: int = 0  # heading level, for headings
    text: str = ""  # the inline text, for headings


def top_level_blocks(tokens: list[Token]) -> list[Block]:
    blocks = []
    for index, token in enumerate(tokens):
        if token.level == 0 and token.map is not None and token.nesting >= 0:
            kind = token.type.removesuffix("_open")
            if kind == "heading":
                blocks.append(Block(kind, token.map[0], token.map[1], int(token.tag[1]), tokens[index + 1].content))
            else:
                blocks.append(Block(kind, token.map[0], token.map[1]))
    return blocks


# Kinds of block line_blocks finds (markdown-it's token types).
FENCE_BLOCK, HTML_BLOCK, TABLE_BLOCK = "fence", "html_block", "table"

_FENCE_LINE = re.compile(r"( {0,3})(`{3,}|~{3,})(.*)")
# An HTML block that runs to the line holding its closing tag, blank lines and all (CommonMark's first kind).
_HTML_CODE_OPENER = re.compile(r"<(?a:script|pre|style|textarea)(?=\s|>|$)", re.IGNORECASE)
_HTML_CODE_CLOSER = re.compile(r"</(?a:script|pre|style|textarea)>", re.IGNORECASE)
_HTML_CLOSING_TAG = re.compile(r"</[A-Za-z][A-Za-z0-9-]*\s*>\s*")
# markdown-it stops filling in a table's missing cells after this many (its rule: MAX_AUTOCOMPLETED_CELLS).
_TABLE_CELLS_FILLED = 0x10000


def line_blocks(content: list[str]) -> dict[int, tuple[int, str]] | None:
    """The blocks a line scan can delimit, as {first line: (the line after it, its kind)}: fenced
    code, ``<pre>``-like HTML blocks (and a lone closing tag), and tables, each opened at column 0
    (whether at a block start is for the caller to check) and closed. None when a fence is left open
    or opened with indentation, a backtick fence's info string has a backtick, an HTML block has no
    closing tag, or a table row is not a plain pipe-led row (the parser decides those)."""
    blocks: dict[int, tuple[int, str]] = {}
    after = 0  # the line after the last block found
    for number in compress(range(len(content)), map(_MAY_OPEN_A_BLOCK.match, content)):
        if number < after:
            continue
        block = _block_at(content, number)
        if block is _UNSURE:
            return None
        if block is not None:
            blocks[number] = block
            after = block[0]
    return blocks


def scannable_code_lines(lines: list[str]) -> set[int] | None:
    """The lines of the blocks ``line_blocks`` finds in a text (fences, ``<pre>``-like HTML blocks, tables)
    when every one of them is closed and no other line is a COMPLEX_LINE: outside those blocks a line
    scan then reads the text as the parser does (a line starting with '#' is a top-level ATX heading,
    nothing is left open). None if the parser must decide. Opened at column 0, such a block starts
    wherever it is (it interrupts a paragraph or ends a list), except a lone closing tag (HTML of
    CommonMark's seventh kind), which continues a paragraph: it must follow a blank line or a block."""
    blocks = line_blocks(lines)
    if blocks is None:
        return None
    ends = {end for end, _ in blocks.values()}
    for start in blocks:
        if lines[start][:2] == "</" and start > 0 and lines[start - 1] and start not in ends:
            return None
    code = {number for start, (end, _) in blocks.items() for number in range(start, end)}
    if holds_complex_lines("\n".join(line for number, line in enumerate(lines) if number not in code)):
        return None
    return code


_UNSURE = (-1, "")  # _block_at's answer for a block the parser must delimit
# How a line that _block_at may find a block at begins (its first tests, made on every line at C speed).
_MAY_OPEN_A_BLOCK = re.compile(r" *(?:```|~~~)|[<|]")


def _block_at(content: list[str], number: int) -> tuple[int, str] | None:
    """The block line_blocks finds at ``content[number]`` (the line after it, its kind), None for none,
    or _UNSURE."""
    line = content[number]
    if line[:3] in ("```", "~~~") or line.lstrip(" ")[:3] in ("```", "~~~"):
        fence = _FENCE_LINE.fullmatch(line)
        if fence is None:
            return None
        if fence[1] or (fence[2][0] == "`" and "`" in fence[3]):
            return _UNSURE
        close = _first(content, number + 1, lambda later: _closes(later, fence))
        return _UNSURE if close is None else (close + 1, FENCE_BLOCK)
    if line[:1] == "<" and _HTML_CODE_OPENER.match(line):
        close = _first(content, number, _HTML_CODE_CLOSER.search)
        return _UNSURE if close is None else (close + 1, HTML_BLOCK)
    if line[:2] == "</" and _HTML_CLOSING_TAG.fullmatch(line):
        # A closing tag alone on its line (a stray ``</pre>`` after a log, say): HTML to the next blank line.
        end = _first(content, number + 1, lambda later: not later.strip(" \t"))
        return (len(content) if end is None else end), HTML_BLOCK
    if line[:1] == "|" and number + 1 < len(content):
        columns = _table_columns(line)
        if columns is None or columns != _delimiter_columns(content[number + 1]):
            return None
        end = _first(content, number + 2, lambda later: not later)
        rows = content[number + 2 : end]
        if any(row[:1] != "|" for row in rows) or len(rows) * len(line) > _TABLE_CELLS_FILLED:
            return _UNSURE
        return (len(content) if end is None else end), TABLE_BLOCK
    return None


def _first(content: list[str], start: int, found: Callable[[str], object]) -> int | None:
    """The number of the first line from ``start`` on that ``found`` is true of, or None."""
    return next((number for number in range(start, len(content)) if found(content[number])), None)


def _closes(line: str, opener: re.Match[str]) -> bool:
    """Whether ``line`` closes the fence ``opener`` opened (only spaces and tabs after its marker)."""
    fence = _FENCE_LINE.fullmatch(line)
    if fence is None:
        return False
    return fence[2][0] == opener[2][0] and len(fence[2]) >= len(opener[2]) and not fence[3].strip(" \t")


def _table_columns(head: str) -> int | None:
    """How many columns markdown-it reads in a header row that starts with ``|`` (None: not one this scan
    reads: an escaped pipe, or text after the last pipe)."""
    text = head.rstrip(" \t")
    if "\\" in text or not text.endswith("|") or len(text) < 2:
        return None
    return text.count("|") - 1


def _delimiter_columns(line: str) -> int | None:
    """How many columns a delimiter row that starts with ``|`` declares (markdown-it's rule), or None."""
    if len(line) < 2 or line[0] != "|" or line[1] not in "|-: \t" or line.strip("|-: \t"):
        return None
    cells = line.split("|")
    for index, cell in enumerate(cells):
        cell = cell.strip(" \t")
        if not cell and index not in (0, len(cells) - 1):
            return None
        if cell and not _ALIGNMENT.fullmatch(cell):
            return None
    return sum(1 for cell in cells if cell.strip(" \t"))


_ALIGNMENT = re.compile(r":?-+:?")
