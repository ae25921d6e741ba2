"""A public ticket's document written with ``transform --include-private``, without its private notes. Pure.

Such a document holds the journals whose notes are private among the others; the folder's private marks
(render/private_marks.py) say which, by position in the history. Left out, the document is what transform
writes without ``--include-private`` (a journal with private notes is left out whole there too, and so is
a history left without journals), so its chunks are the chunks of that document, links to notes included.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from anchorkit.note_ranges import format_note_numbers, parse_note_numbers
from anchorkit.render.document import Outline


def without_journals(outline: Outline, positions: Collection[int]) -> Outline:
    """``outline`` without the journals at ``positions`` (from 0, in the history's order), and without
    the history's heading when none of its journals is left.

    A journal runs from its heading to the next heading; the blank line that parts what is removed from
    what stays before it goes too when nothing follows (the content ends with one line break, as rendered).
    """
    content, headings = outline.content, outline.headings
    journals = [index for index, (_, level, _) in enumerate(headings) if level == "###"]
    removed = {journals[position] for position in positions if 0 <= position < len(journals)}
    if journals and len(removed) == len(journals) and journals[0] > 0:
        removed.add(journals[0] - 1)  # the history's own heading, whose next heading is its first journal
    if not removed:
        return outline
    spans: list[list[int]] = []
    for index in sorted(removed):
        start = headings[index][0]
        end = headings[index + 1][0] if index + 1 < len(headings) else len(content)
        if spans and spans[-1][1] == start:
            spans[-1][1] = end
        else:
            spans.append([start, end])
    if spans[-1][1] == len(content) and content[spans[-1][0] - 1 : spans[-1][0]] == "\n":
        spans[-1][0] -= 1
    pieces, kept, shift, position = [], [], 0, 0
    for index, (offset, level, line) in enumerate(headings):
        while position < len(spans) and spans[position][1] <= offset:
            shift += spans[position][1] - spans[position][0]
            position += 1
        if index not in removed:
            kept.append((offset - shift, level, line))
    start = 0
    for span_start, span_end in spans:
        pieces.append(content[start:span_start])
        start = span_end
    pieces.append(content[start:])
    return Outline("".join(pieces), kept)


def without_journal_notes(metadata: Mapping[str, Any], positions: Collection[int]) -> dict[str, Any]:
    """A document's metadata for its document without the journals at ``positions``: their note numbers
    dropped from ``note_numbers`` (the others keep Redmine's own), and no ``private`` mark."""
    kept = {key: value for key, value in metadata.items() if key != "private"}
    numbers = parse_note_numbers(metadata.get("note_numbers"))
    if numbers is not None:
        kept["note_numbers"] = format_note_numbers([n for i, n in enumerate(numbers) if i not in positions])
    return kept
