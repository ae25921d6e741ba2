"""Where the chunker may cut inside a segment, beyond what the cut plan (render/spacing.py) says: inside a line
that is longer than a chunk, never right after a heading, and which code block a line belongs to; and where a
subject too long for a chunk's header is cut. Pure."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping

from anchorkit.anchors import code_closer, one_line

HEADING_LINE = re.compile(r" {0,3}#{1,6}(?:[ \t]|$)")


def cut_before(content: str, start: int, limit: int, stretch: int = 0) -> int:
    """Where to cut inside a line at or before ``limit``: before a word that follows a space (in the
    last quarter), else before any letter or digit, else between two characters a reader sees apart (not
    inside an emoji's ZWJ sequence, flag or skin tone, nor before a combining mark or a variation selector),
    else (one such character from ``start`` past ``limit``) the first place after ``limit`` that is, if there
    is one before ``stretch`` (0: none is looked for), else at ``limit``."""
    floor = start + (limit - start) * 3 // 4
    for position in range(limit, floor, -1):
        if content[position].isalnum() and content[position - 1] in " \t":
            return position
    for position in range(limit, start, -1):
        if content[position].isalnum() and content[position - 1] != ZWJ:
            return position
    for position in range(limit, start, -1):
        if not _joined(content, position):
            return position
    for position in range(limit + 1, stretch):
        if not _joined(content, position):
            return position
    return limit


ZWJ = "\u200d"
# What continues the character before it: variation selectors, emoji skin tones, the keycap mark, emoji tags.
_CONTINUING = re.compile("[\u200d\ufe00-\ufe0f\U000e0100-\U000e01ef\U0001f3fb-\U0001f3ff\u20e3\U000e0020-\U000e007f]")


def _joined(content: str, position: int) -> bool:
    """Whether ``content[position]`` belongs to the same user-perceived character as the one before it."""
    char, before = content[position], content[position - 1]
    if before == ZWJ or _CONTINUING.match(char) or unicodedata.combining(char):
        return True
    if _regional(char) and _regional(before):  # a flag is a pair of regional indicators: a cut between pairs only
        run = position
        while run > 0 and _regional(content[run - 1]):
            run -= 1
        return (position - run) % 2 == 1
    return False


def _regional(char: str) -> bool:
    return "\U0001f1e6" <= char <= "\U0001f1ff"


def after_heading(lines: list[str], number: int) -> bool:
    """Whether the line before ``lines[number]`` (blank lines aside) is a heading: a chunk must not end with one."""
    before = number - 1
    while before > 0 and not lines[before]:
        before -= 1
    return "#" in lines[before][:4] and HEADING_LINE.match(lines[before]) is not None


def code_lines(lines: list[str], blocks: Mapping[int, int]) -> dict[int, tuple[str, str]]:
    """Line number → (opening line, closing line) of the fenced or ``<pre>`` code block it is a code line
    of (``blocks``: the top-level code blocks' lines, from the cut plan)."""
    inside: dict[int, tuple[str, str]] = {}
    for start, end in blocks.items():
        closer = code_closer(lines[start])
        if closer is None:
            continue
        last = end - 1 if end - 1 > start and lines[end - 1].strip() == closer.strip() else end
        for number in range(start + 1, last):
            inside[number] = (lines[start], closer)
    return inside


def cut_subject(subject: str, max_chars: int) -> str:
    """A written subject (escaped as plain Markdown text) cut as ``anchors.shortened`` cuts one, but never
    between a backslash and the character it escapes: that backslash would show before the ``…``."""
    subject = one_line(subject)
    if len(subject) <= max_chars:
        return subject
    kept = subject[: max_chars - 1].rstrip()
    if (len(kept) - len(kept.rstrip("\\"))) % 2:
        kept = kept[:-1].rstrip()
    return kept + "…"
