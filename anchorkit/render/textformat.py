"""Redmine text (Textile or CommonMark) → faithful Markdown: the entry point.

Output keeps the ORIGINAL heading levels (``h2.`` → ``## ``); demoting them below the document's
own levels is the document renderer's job (``anchorkit.render.document``). The converter never drops
text: what it does not understand is passed through, escaped so that it reads as text.
"""

from __future__ import annotations

from anchorkit.render.commonmark import common_mark
from anchorkit.render.markdown_text import CONTROL_CHARS, SHELF_CLOSE, SHELF_OPEN
from anchorkit.render.textile import TextileConverter, normalize_textile
from anchorkit.settings import TEXT_FORMATS

# ---------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------


def to_markdown(text: str, fmt: str, *, link_issues: str | None = None) -> str:
    """Convert Redmine text in ``fmt`` ("textile" or "common_mark") to Markdown.

    ``link_issues``: base URL of the Redmine; ``#123`` then becomes ``[#123](URL/issues/123)``.
    Headings keep their original levels; code blocks are always fenced and closed.
    """
    if fmt not in TEXT_FORMATS:
        raise ValueError(f"unknown text format {fmt!r} (expected one of {', '.join(TEXT_FORMATS)})")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if CONTROL_CHARS.search(text):
        text = CONTROL_CHARS.sub(lambda m: "\ufffd" if m[0] in (SHELF_OPEN, SHELF_CLOSE) else "", text)
    if fmt == "common_mark":
        return common_mark(text, link_issues).strip("\n")
    converter = TextileConverter(link_issues)
    return "\n\n".join(block for block in converter.document(normalize_textile(text)) if block)
