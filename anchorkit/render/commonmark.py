"""Redmine CommonMark → Markdown: it is Markdown already, so only Redmine's own additions are converted
(macros, ``[[wiki]]`` links, optional issue links), GFM's tagfilter tags are escaped and an unterminated
fence is closed.
"""

from __future__ import annotations

import re
from bisect import bisect_right

from anchorkit.render.markdown_text import (
    TOC_LINE,
    WIKI_LINK,
    Shelf,
    escape_text,
    inline_macros,
    issue_links,
    next_block_macro,
    wiki_link_label,
)

# ---------------------------------------------------------------------------------------------
# CommonMark
# ---------------------------------------------------------------------------------------------

_BACKTICKS = re.compile(r"`+")
_FENCE_OPEN = re.compile(r"^( {0,3})(`{3,}(?!.*`)|~{3,})")


def common_mark(text: str, link_issues: str | None) -> str:
    """Redmine CommonMark is Markdown already: convert Redmine's additions outside code only, and
    close a fence left open (CommonMark would run it to the end of the document anyway)."""
    convert = "{{" in text or "[[" in text or bool(link_issues and "#" in text)
    out: list[str] = []
    plain: list[str] = []
    fence: str | None = None
    for line in text.split("\n"):
        if fence is not None:
            out.append(line)
            stripped = line.strip()
            if stripped.startswith(fence) and not stripped.strip(fence[0]):
                fence = None
            continue
        opening = _FENCE_OPEN.match(line)
        if opening is None and not (convert and line.startswith("    ")):
            plain.append(line)
            continue
        if plain:
            out.append(_common_mark_plain("\n".join(plain), link_issues, convert))
            plain = []
        if opening:
            fence = opening[2]
        out.append(line)
    if plain:
        out.append(_common_mark_plain("\n".join(plain), link_issues, convert))
    if fence is not None:
        out.append(fence)
    return "\n".join(out)


# GFM's tagfilter (which Redmine's commonmarker applies): these tags are shown as text.
_FILTERED_TAG = re.compile(r"<(?=/?(?:title|textarea|style|xmp|iframe|noembed|noframes|script|plaintext)\b)", re.I)


def _common_mark_plain(text: str, link_issues: str | None, convert: bool) -> str:
    if "<" in text:
        text = _FILTERED_TAG.sub("&lt;", text)
    return _common_mark_inline(text, link_issues) if convert else text


def _common_mark_inline(text: str, link_issues: str | None) -> str:
    shelve = Shelf()
    if "`" in text:  # code spans are shelved first so that nothing inside them is touched
        text = _shelve_code_spans(text, shelve)
    if "{{" in text:
        text = _common_mark_macros(text, shelve)
    if "[[" in text:
        text = WIKI_LINK.sub(lambda m: escape_text(wiki_link_label(m)), text)
    if link_issues and "#" in text:
        text = issue_links(text, link_issues, shelve)
    return shelve.restore(text)


def _shelve_code_spans(text: str, shelve: Shelf) -> str:
    """CommonMark code spans: a backtick run up to the next run of the same length."""
    runs = list(_BACKTICKS.finditer(text))
    by_length: dict[int, list[int]] = {}
    for index, run in enumerate(runs):
        by_length.setdefault(len(run[0]), []).append(index)
    out: list[str] = []
    position = 0
    index = 0
    while index < len(runs):
        run = runs[index]
        same_length = by_length[len(run[0])]
        following = bisect_right(same_length, index)
        if following == len(same_length):
            index += 1
            continue
        closing = runs[same_length[following]]
        out += [text[position : run.start()], shelve(text[run.start() : closing.end()])]
        position = closing.end()
        index = same_length[following] + 1
    out.append(text[position:])
    return "".join(out)


def _common_mark_macros(text: str, shelve: Shelf) -> str:
    out: list[str] = []
    position = 0
    while (macro := next_block_macro(text, position, len(text))) is not None:
        opening, close = macro
        title = (opening[3] or "").strip()  # block macro: keep the title and the body
        out += [text[position : opening.start()], title + "\n\n" if title else "", text[opening.end() : close]]
        position = close + len("\n}}")
    out.append(text[position:])
    return inline_macros(TOC_LINE.sub("", "".join(out)), shelve)
