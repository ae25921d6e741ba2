"""THE anchor format: render, insert, find, strip, and neutralise forgeries.

An anchor is one blockquote line, ``> チケット #12345: VPN接続が不安定になる``, standing alone
between blank lines right after a heading, and wherever ``spacing.space_anchors`` puts one so that
any window of a chunk's length holds an anchor (see docs/anchoring.md).
The document title ``# チケット #12345: ...`` identifies the ticket too.

Everything that produces or recognises anchors goes through this module, so the renderer,
the inserter, the verifier's extractor and the forgery neutraliser cannot drift apart.

Two forms: the anchors after headings carry the subject (``> チケット #12345: VPN…``, the
format's contract); spacing anchors may be short, ``> チケット #12345:`` (``id_anchor_line``). The
colon ends the id in both: a chunk cut inside ``#12345`` (``> チケット #123``) names no ticket.

Recognition is line based on purpose: retrieved chunks are fragments of documents (they may start
inside a code block), so the extractor cannot rely on parsing. Instead, every text from Redmine that
has the shape of an anchor or a title anywhere in a line is neutralised when the document is made
(its ``#`` is escaped as ``\\#``, which Markdown renders as ``#``), so a genuine anchor is exactly a
line of the anchor shape, and no chunk, wherever it starts, holds one of another ticket.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable
from itertools import accumulate, repeat
from operator import add
from typing import NamedTuple, TypeGuard

from anchorkit.errors import UsageError
from anchorkit.markdown_blocks import Block, holds_complex_lines, parse_blocks, scannable_code_lines, top_level_blocks
from anchorkit.untrusted import BIDI_CONTROLS

DEFAULT_LABEL = "チケット"

# label: 1-40 characters without '#', '\\' or a line break; then " #<id>:" and the subject. A longer label
# would make lines that nothing recognises as anchors: the commands refuse one (MAX_LABEL_CHARS).
MAX_LABEL_CHARS = 40
_LABEL = rf"[^#\\\r\n]{{1,{MAX_LABEL_CHARS}}}?"
# The line start is checked after the marker (">" or "#") is found: "^" first would be tried at every
# position of a text, a scan three times slower.
ANCHOR_PATTERN = re.compile(
    rf">(?<![^\n]>) (?P<label>{_LABEL}) #(?P<id>\d{{1,12}}):(?: (?P<subject>[^\r\n]*))?\r?$", re.M
)
TITLE_PATTERN = re.compile(
    rf"#(?<![^\n]#) (?P<label>{_LABEL}) #(?P<id>\d{{1,12}}):(?: (?P<subject>[^\r\n]*))?\r?$", re.M
)
# Anything that could pass for an anchor or a title once a chunker cuts the text right before it or
# strips indentation: quote or heading markers (any depth), a label, "#<digits>:", wherever in a line.
# Not only after whitespace: a token window starts at any token boundary, and cl100k cuts "\\>",
# "[>", "`>" and "a>" between the two characters (docs/anchoring.md, "Forgeries"). Nor only in ASCII: a
# model reads "＞ チケット ＃99：" (full-width, as Japanese input writes it, or the small forms "﹥", "﹟",
# "﹕"), "#99" with a zero-width space inside (between the digits too) or "# 99:" as the anchor it looks
# like, so those get their number sign escaped too.
# What a reader does not see: soft hyphen, Arabic letter mark, zero-width characters, and the bidirectional
# marks, embeddings and isolates (in that order).
_HIDDEN = "\u00ad\u061c\u200b-\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff"
# The number as a reader sees it: hidden characters anywhere in it, blanks between the sign and the digits
# ("# 123:" reads as ticket 123 to a person, and most likely to a model).
_FORGED_NUMBER = rf"[ \t\u3000{_HIDDEN}]*\d(?:[{_HIDDEN}]*\d){{0,11}}[ \t{_HIDDEN}]*[:：﹕]"
_FORGERY = re.compile(
    rf"(?P<lead>(?:[>＞﹥][ \t>＞﹥{_HIDDEN}]*|[#＃﹟]{{1,6}}[ \t]+)(?:{_LABEL})[ \t{_HIDDEN}]*)"
    rf"(?P<hash>[#＃﹟])(?=(?P<number>{_FORGED_NUMBER}))"
)
_DIGIT = re.compile(r"\d")
# What a chunk starting anywhere in a text would read as an anchor or a title (their patterns' start):
# "[>#] " + _LABEL + " #(\d{1,12}):", scanned 2.5 times faster. The space is looked for first and the
# marker checked behind it, and the label is greedy: it holds no "#", so the one label followed by
# " #" is the same either way (findall: only the ids, so a match starting at the space is as good).
_EXPOSED = re.compile(rf" (?<=[>#] )[^#\\\r\n]{{1,{MAX_LABEL_CHARS}}} #(\d{{1,12}}):")
# A backslash escape of Markdown (ASCII punctuation): how a reader sees an escaped subject.
_MARKDOWN_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
# (A literal first character keeps the scan of every text fast: the full-width sign is looked for apart.)
_FORGERY_HINT = re.compile(rf"#{_FORGED_NUMBER}")
_WIDE_FORGERY_HINT = re.compile(rf"[＃﹟]{_FORGED_NUMBER}")
_TRAILING_HASHES = re.compile(r"(?<=[ \t])#+$")
_WHITESPACE_RUN = re.compile(r"\s+")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


class Anchor(NamedTuple):
    ticket_id: int
    subject: str


def one_line(text: str) -> str:
    """Collapse whitespace (line breaks included) to single spaces, drop control characters and the
    bidirectional controls (a subject's U+202E would show an anchor line in another order than it is)."""
    # Most names and subjects are already one clean line; every character the regexes below would
    # touch is non-printable for str.isprintable (ASCII space aside), so that check is exact.
    if text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " ":
        return text
    return _WHITESPACE_RUN.sub(" ", _CONTROL.sub(" ", BIDI_CONTROLS.sub("", text))).strip()


def written_label(label: str) -> str:
    """The label as anchor and title lines write it: on one line, without '#' or '\\' (it may not hold
    them), the default if nothing is left."""
    return one_line(label).replace("#", "").replace("\\", "") or DEFAULT_LABEL


def label_problem(label: str | None) -> str | None:
    """What is wrong with a label longer than anchor lines may hold (none of its anchors would be
    recognised), or None."""
    length = len(written_label(label)) if label else 0
    return f"at most {MAX_LABEL_CHARS} characters, not {length}" if length > MAX_LABEL_CHARS else None


def check_label(label: str | None) -> None:
    """A usage error for a --label that ``label_problem`` refuses."""
    if problem := label_problem(label):
        raise UsageError(f"--label may be {problem}")


def _line(prefix: str, ticket_id: int, subject: str, label: str) -> str:
    label = written_label(label)
    # Whatever the subject holds in the shape of another anchor stays no anchor, wherever a chunk starts.
    subject = neutralize_forgeries(one_line(subject))
    return f"{prefix} {label} #{ticket_id}:" + (f" {subject}" if subject else "")


def anchor_line(ticket_id: int, subject: str, label: str = DEFAULT_LABEL) -> str:
    """``> チケット #12345: subject`` (no line break; the subject is forced onto one line and
    neutralised: see ``neutralize_forgeries``)."""
    return _line(">", ticket_id, subject, label)


def id_anchor_line(ticket_id: int, label: str = DEFAULT_LABEL) -> str:
    """``> チケット #12345:``: the short form of spacing anchors (the colon ends the id)."""
    return _line(">", ticket_id, "", label)


def shortened(subject: str, max_chars: int) -> str:
    """The subject cut to ``max_chars`` characters, ``…`` marking the cut (0: the whole subject)."""
    subject = one_line(subject)
    return subject if not max_chars or len(subject) <= max_chars else subject[: max_chars - 1].rstrip() + "…"


def title_line(ticket_id: int, subject: str, label: str = DEFAULT_LABEL) -> str:
    """``# チケット #12345: subject``: the document's first line.

    A subject ending in `` #`` would read as the heading's optional closing sequence and vanish
    from the rendered title, so its last ``#`` is escaped.
    """
    return _TRAILING_HASHES.sub(r"\\\g<0>", _line("#", ticket_id, subject, label))


def holds_text(text: str | None) -> TypeGuard[str]:
    """Whether a chunk has something in it to anchor: text (not an image's None), not empty or blank. An
    anchor put on a blank chunk would be embedded, or sent in a prompt, as a chunk of its own that says
    nothing: the Bedrock Lambda and `inject` both leave such a chunk as it is."""
    return text is not None and text.strip() != ""


def anchor_of(match: re.Match[str]) -> Anchor:
    """The ticket and the subject, as a reader of the Markdown sees it, of an anchor or title line's match."""
    return Anchor(int(match["id"]), _unescaped((match["subject"] or "").strip()))


def _matches(pattern: re.Pattern[str], text: str) -> list[Anchor]:
    return [anchor_of(m) for m in pattern.finditer(text)]


def _unescaped(subject: str) -> str:
    """The subject as a reader of the Markdown sees it (``\\#`` → ``#``, ``\\<`` → ``<``)."""
    return _MARKDOWN_ESCAPE.sub(r"\1", subject) if "\\" in subject else subject


def find_anchors(text: str) -> list[Anchor]:
    """The genuine anchor lines of a document or of a chunk of one, in order."""
    return _matches(ANCHOR_PATTERN, text)


def find_titles(text: str) -> list[Anchor]:
    """The genuine title lines (``# チケット #ID: subject``) of a document or chunk."""
    return _matches(TITLE_PATTERN, text)


def identified_ticket_ids(text: str) -> set[int]:
    """Ticket ids that a text identifies itself by: its genuine anchors and title lines."""
    return {a.ticket_id for a in find_anchors(text)} | {a.ticket_id for a in find_titles(text)}


def neutralize_forgeries(text: str, keep: int | None = None) -> str:
    """Escape the ``#`` of everything shaped like an anchor or a title, wherever it starts in a line
    (``\\#`` renders as ``#``), but for those naming ticket ``keep``: a retrieved chunk whose ticket is
    known keeps its own anchors and loses any other ticket's."""
    if not (_FORGERY_HINT.search(text) or (("＃" in text or "﹟" in text) and _WIDE_FORGERY_HINT.search(text))):
        return text  # the cheap necessary condition: most texts have no "#<id>:"
    if keep is None:
        return _FORGERY.sub(r"\g<lead>\\\g<hash>", text)
    return _FORGERY.sub(lambda m: m[0] if _forged_id(m) == keep else f"{m['lead']}\\{m['hash']}", text)


def _forged_id(match: re.Match[str]) -> int:
    """The ticket a forgery's number reads as (its digits, hidden characters and blanks left out)."""
    return int("".join(_DIGIT.findall(match["number"])))


def exposed_ticket_ids(text: str) -> set[int]:
    """Ids that some chunk of ``text`` would identify itself by: the anchors and titles a chunk
    starting anywhere (not only at a line start) would find. In an anchorkit document these are
    its own ticket's only; any other id is a forgery a chunker can lay open."""
    return set(map(int, _EXPOSED.findall(text)))


# How an anchor sits in a document. It always stands alone as a top-level blockquote with a blank
# line before it, and the number of blank lines after it says what it replaced, so that
# ``strip_anchors`` gives back the text exactly (``X`` and ``Y`` are the lines around it):
#
#   between blocks          X, "", A, "", Y              "X\n\nY"  (every anchor after a heading too)
#   at a line break         X, "", A, "", "", Y          "X\nY"     (paragraph, list, quote, code lines)
#   inside a line           X, "", A, "", "", "", Y      "X" + "Y"  (a paragraph, at a sentence end)
#
# Inside fenced code the fence is closed before and reopened after (X, FENCE, "", A, "", "",
# OPENER, Y), and so is a ``<pre>`` HTML block (X, "</pre>", "", A, "", "", "<pre>", Y, the
# opening line repeated as it was: ``<pre><code class="x">`` is closed by ``</code></pre>``), inside a table the header
# and delimiter rows are repeated (X, "", A, "", "", HEADER,
# DELIMITER, Y): those are the extra lines stripping takes out as well.
BETWEEN_BLOCKS, AT_LINE_BREAK, INSIDE_LINE = 1, 2, 3  # blank lines after the anchor
_QUOTED_LINE = re.compile(r">(?<![^\n]>) ")  # where a line that may be an anchor starts (as ANCHOR_PATTERN)
_FENCE = re.compile(r"( {0,3})(`{3,}|~{3,})")
# A line that is only the opening tag(s) of a CommonMark HTML block of type 1 (it ends at the first
# line holding "</pre>", blank lines included); Redmine lets only lowercase <pre> through.
_PRE_OPENER = re.compile(r"<pre(?:[ \t][^<>]*)?>(<code(?:[ \t][^<>]*)?>)?")
# (No "^": for .match, also from a position inside a line.)
TABLE_DELIMITER = re.compile(r" {0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")


def strip_anchors(document: str) -> str:
    """The document without its anchors and the lines they brought: the exact inverse of placing them."""
    cuts = anchor_cuts(document)
    kept_from = [0, *(end for _, end in cuts)]
    kept_to = [*(start for start, _ in cuts), len(document)]
    return "".join(document[start:end] for start, end in zip(kept_from, kept_to))


def anchor_cuts(document: str) -> list[tuple[int, int]]:
    """The character ranges ``strip_anchors`` takes out, ascending: whole lines (an anchor, the blank
    lines around it, a repeated fence or table head), or, for a cut inside a line, everything from
    the end of the line's first half to the start of its second half."""
    lines = document.split("\n")
    starts = list(accumulate(map(add, map(len, lines), repeat(1)), initial=0))
    # Only lines starting with "> " can be anchors: they are found by one scan of the text, and the
    # other lines (most of them) are passed over without a step each.
    quoted = [bisect_left(starts, match.start()) for match in _QUOTED_LINE.finditer(document)]
    cuts: list[tuple[int, int]] = []
    index = 0  # the first line not yet taken by a cut
    for candidate in quoted:
        if candidate < index:
            continue
        index = candidate
        line = lines[index]
        if not ((index + 1 == len(lines) or lines[index + 1] == "") and ANCHOR_PATTERN.fullmatch(line)):
            continue
        blanks = 0
        while index + 1 + blanks < len(lines) and lines[index + 1 + blanks] == "":
            blanks += 1
        after = index + 1 + blanks
        first = index - 1 if index and lines[index - 1] == "" else index  # the blank line before goes too
        inside = first > 0 and after < len(lines) and blanks in (AT_LINE_BREAK, INSIDE_LINE) and first != index
        if not inside:
            last = index  # between blocks: the blank line after the anchor stays
        elif blanks == INSIDE_LINE:
            cuts.append((starts[first] - 1, starts[after]))
            index = after
            continue
        elif _reopened_code(lines[first - 1], lines[after]):
            first, last = first - 1, after
        elif _repeated_table_head(lines, first, after):
            last = after + 1
        else:
            last = after - 1
        cuts.append(
            (starts[first], starts[last + 1]) if last + 1 < len(lines) else (max(starts[first] - 1, 0), len(document))
        )
        index = last + 1
    return cuts


def code_closer(opener: str) -> str | None:
    """The line that closes the code block opened by the line ``opener``: a fence, or ``<pre>`` (with
    ``<code ...>``) alone on its line (None: neither)."""
    fence = _FENCE.match(opener)
    if fence:
        return fence[1] + fence[2]
    pre = _PRE_OPENER.fullmatch(opener)
    if pre:
        return "</code></pre>" if pre[1] else "</pre>"
    return None


def _reopened_code(closer: str, opener: str) -> bool:
    return code_closer(opener) == closer


def _repeated_table_head(lines: list[str], before: int, after: int) -> bool:
    """Whether lines[after:after+2] repeat the header and delimiter rows of the table that ends
    just before line ``before`` (its delimiter row: the last one in the lines since a blank line,
    as a table is cut only if no row of it looks like one; pipe-led lines may come before it)."""
    start = before
    while start > 0 and lines[start - 1] != "":
        start -= 1
    delimiter = next(
        (
            index
            for index in range(before - 2, start, -1)
            if "|" in lines[index] and "|" in lines[index - 1] and TABLE_DELIMITER.match(lines[index])
        ),
        None,
    )
    return delimiter is not None and lines[after : after + 2] == lines[delimiter - 1 : delimiter + 1]


def insert_anchors(
    document: str,
    ticket_id: int,
    subject: str,
    label: str = DEFAULT_LABEL,
    *,
    unanchored_headings: Iterable[str] = (),
) -> str:
    """Give every heading of level >= 2 its anchor line; idempotent.

    - The anchor goes right after the heading, as its own blockquote between blank lines; an anchor
      already there is kept (or brought up to date if the subject changed).
    - Headings whose text is in ``unanchored_headings`` (the basic-info section) get none.
    - Only top-level blocks are considered, so an anchor never lands inside a code block, a table,
      a list, a quote or an HTML block.
    (The anchors that bound the distance between anchors are ``spacing.space_anchors``'.)
    """
    if not may_hold_a_heading(document):
        return document  # no heading, so no anchor to place or to bring up to date
    anchor = anchor_line(ticket_id, subject, label)
    lines = document.split("\n")
    skip = frozenset(unanchored_headings)
    blocks = _top_level_blocks(document, lines)
    output: list[str] = []
    copied = 0  # lines[:copied] are in output already
    want_anchor = False
    for block in blocks:
        if _is_anchor_block(block, lines):
            if want_anchor and lines[block.start] != anchor:
                output.extend(lines[copied : block.start])
                output.append(anchor)
                copied = block.end
            want_anchor = False
            continue
        if want_anchor:
            output.extend(lines[copied : block.start])
            if output and output[-1] != "":
                output.append("")
            output.extend([anchor, ""])
            copied = block.start
            want_anchor = False
        if block.kind == "heading":
            want_anchor = block.level >= 2 and block.text.strip() not in skip
    output.extend(lines[copied:])
    if want_anchor:
        # The last heading has no block after it: its anchor goes at the end (before the final newline).
        trailing_newline = output and output[-1] == ""
        while output and output[-1] == "":
            output.pop()
        output.extend(["", anchor] + ([""] if trailing_newline else []))
    return "\n".join(output)


def _is_anchor_block(block: Block, lines: list[str]) -> bool:
    return (
        block.kind == "blockquote"
        and block.end - block.start == 1
        and bool(ANCHOR_PATTERN.fullmatch(lines[block.start]))
    )


# An ATX heading's first character, or a setext heading's underline (one scan of the text, after a line
# break: see markdown_blocks.holds_complex_lines).
_MAY_HOLD_A_HEADING = re.compile(r"\n {0,3}(?:#|=+[ \t]*$|-+[ \t]*$)", re.M)


def may_hold_a_heading(text: str) -> bool:
    """False when ``text`` has no heading (``insert_anchors`` leaves it as it is); True when it may."""
    return _MAY_HOLD_A_HEADING.search("\n" + text) is not None


_ATX_HEADING = re.compile(r"(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")


def _top_level_blocks(document: str, lines: list[str]) -> list[Block]:
    """Top-level blocks of a text, by the line scan when it can tell them: a text whose COMPLEX_LINE
    constructs are all in closed code blocks and tables that the scan delimits
    (markdown_blocks.scannable_code_lines), and whose anchor lines stand between blank lines; else parsed."""
    code = scannable_code_lines(lines) if holds_complex_lines(document) else set()
    blocks = None if code is None else _scan_blocks(lines, code)
    return top_level_blocks(parse_blocks(document)) if blocks is None else blocks


def _scan_blocks(lines: list[str], code: set[int]) -> list[Block] | None:
    """Top-level blocks of a text whose only COMPLEX_LINE constructs are on the lines ``code`` (closed
    code blocks and tables), by a line scan.

    There, a line starting with '#' is always a top-level ATX heading (headings interrupt
    paragraphs and close lists and quotes), and an anchor line between a blank line (or a heading)
    and a blank line is a one-line blockquote. Every other run of non-blank lines is reported as one
    "text" block: only its start matters. A code line is never a heading. (Nothing else about code
    blocks matters: only the block right after a heading does, and there a code block's opening line
    starts one, as it does for the parser.) None for an anchor line right after a blank line or a heading
    and right before a line that is not blank: whether a block that line starts ends the quote (a fence,
    a heading, a list item) or continues it (a table row, text) is the parser's to say. Documents never
    have one (their anchors stand between blank lines, forged ones in the text are escaped).
    """
    blocks: list[Block] = []
    previous_blank = True
    for number, line in enumerate(lines):
        heading = _ATX_HEADING.match(line) if line.startswith("#") and number not in code else None
        if heading:
            blocks.append(Block("heading", number, number + 1, len(heading[1]), heading[2] or ""))
        elif (previous_blank or blocks[-1].kind == "heading") and ANCHOR_PATTERN.fullmatch(line):
            if number + 1 < len(lines) and lines[number + 1] != "":
                return None
            blocks.append(Block("blockquote", number, number + 1))
        elif line and (previous_blank or blocks[-1].kind != "text"):
            blocks.append(Block("text", number, number + 1))
        elif line:
            blocks[-1] = Block("text", blocks[-1].start, number + 1)
        previous_blank = line == ""
    return blocks
