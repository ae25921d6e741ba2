"""Where the chunker may cut inside a segment, beyond what the cut plan (render/spacing.py) says: inside a line
that is longer than a chunk, never right after a heading, and which code block a line belongs to. Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping

from anchorkit.anchors import code_closer

HEADING_LINE = re.compile(r" {0,3}#{1,6}(?:[ \t]|$)")


def cut_before(content: str, start: int, limit: int) -> int:
    """Where to cut inside a line at or before ``limit``: before a word that follows a space (in the
    last quarter), else before any letter or digit, else at ``limit``."""
    floor = start + (limit - start) * 3 // 4
    for position in range(limit, floor, -1):
        if content[position].isalnum() and content[position - 1] in " \t":
            return position
    for position in range(limit, start, -1):
        if content[position].isalnum():
            return position
    return limit


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
