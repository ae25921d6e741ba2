"""Where a retrieved chunk is in Redmine, and which of a ticket's notes an answer cites.

A chunk's ``url`` (its metadata's: the Redmine issue, or ``…#note-n`` for the note it starts in) is
the link a person follows from a report. The notes a chunk holds come from its metadata:
``chunk_notes`` (anchorkit's chunks: every note the chunk holds text of, ``"3-6"``), ``note_numbers``
(a document's sidecar: the notes of the whole document, which is all the document layout can say),
``note`` and the url's ``#note-n``. An anchorkit chunk of the details or the description (its
``section``) that says nothing of notes and runs on into no journal holds none. A chunk that says
nothing of notes holds none when another chunk of its ticket names a note it holds (anchorkit's
chunker writes ``chunk_notes`` on every chunk holding a note when it knows the numbers); otherwise its
notes cannot be checked.

An answer cites a note with a ticket mention followed by the note (``#12345-note-3``,
``#12345#note-3``, ``チケット #12345 の note-3``, ``#12345 の #note-3``, ``#12345 の注記 #3``,
``#12345 のコメント #3``, ``#12345 (note 3)``, ``#12345, note 3``, ``#12345 - note 3``, in any
width), a Redmine URL with its
fragment (``https://host/issues/12345#note-3``), the same as a citation's source id
(``"12345#note-3"``), or a structured citation ``{"ticket_id": 12345, "note": 3}``.

Pure: chunks and answers in, facts out; nothing is built from untrusted text but what it matched.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any

from anchorkit.note_ranges import format_note_numbers, metadata_int, parse_note_numbers
from anchorkit.verify.folding import Folded, fold
from anchorkit.verify.ids import Mention, iter_mentions

# What follows a ticket mention to name one of its notes, read in the folded view (verify.folding: "＃",
# "（", "－" and "ｎｏｔｅ" are "#", "(", "-" and "note" there): "-note-3", "#note-3", " の note-3",
# " の #note-3" and " #note-3" (Redmine's own fragment, as a model copies it from the note's URL),
# "の注記 #3", "のノート 7", "のコメント #7", "(note-7)", ", note 7", " - note 7". The word is singular
# and the number no count: "のコメント 3件" (3 comments) is no note. Not after a colon: "#12345: Note 3 …"
# is how anchors and title lines write a ticket and its subject.
_NOTE_WORD = r"(?i:note|comment)(?![A-Za-z])|注記|ノート|コメント"
_COUNTER = r"[ \t]*(?:件|個|つ|回|通)"
_NOTE_AFTER_MENTION = re.compile(
    rf"(?:[-#]|[ \t]*(?:[(,、-][ \t]*|の[ \t]*)?#?)(?:{_NOTE_WORD})[-_ \t]*#?(?P<note>\d+)(?!\d|{_COUNTER})"
)
# A Redmine URL's note fragment ("…/issues/12345#note-3"; the URL may run into the sentence's "。").
_NOTE_FRAGMENT = re.compile(r"#note-(?P<note>\d+)(?!\d)")
# What a source id naming a note must hold somewhere (full-width and half-width forms before NFKC too).
_MAY_NAME_NOTE = re.compile(r"(?i:note|ｎｏｔｅ|comment|ｃｏｍｍｅｎｔ)|注記|ノート|コメント|ﾉｰﾄ|ｺﾒﾝﾄ")
# A note number longer than this can be no note of any ticket; it is kept short, never converted whole.
_MAX_NOTE_DIGITS = 12
# anchorkit's chunk metadata: the sections before the history (chunk/core.py, a chunk's "section" is the
# one it begins in), and a journal's heading in its text (render/document.py "### [2024-06-12] 佐藤 次郎":
# the document's own headings are #, ## and ###, the content's are put below them).
_BEFORE_HISTORY = frozenset({"details", "description"})
_JOURNAL_HEADING = re.compile(r"^### ", re.M)


@dataclass(frozen=True)
class NoteReference:
    """A note of a ticket named in a text: ``text[start:end]`` is the mention with its note."""

    ticket_id: int
    note: int
    start: int
    end: int


def _number(digits: str) -> int:
    return int(digits[:_MAX_NOTE_DIGITS])


def note_of(view: Folded, mention: Mention) -> NoteReference | None:
    """The note a ticket mention of the folded text ``view`` goes on to name, if it does (in original
    offsets: ``start`` is the mention's, ``end`` the note number's)."""
    if mention.url:  # a Redmine URL: its fragment
        fragment = _NOTE_FRAGMENT.search(view.text, mention.view_start, mention.view_end)
        if fragment is None:
            return None
        return NoteReference(mention.ticket_id, _number(fragment["note"]), mention.start, mention.end)
    after = _NOTE_AFTER_MENTION.match(view.text, mention.view_end)
    if after is None:
        return None
    return NoteReference(mention.ticket_id, _number(after["note"]), mention.start, view.end(after.end()))


def note_references(text: str, min_digits: int, known: Set[int] = frozenset()) -> list[NoteReference]:
    """The notes a text names, in order (a mention counts as for ``ids.mentioned_ids``)."""
    view = fold(text)
    return [ref for mention in iter_mentions(view, min_digits, known) if (ref := note_of(view, mention)) is not None]


def note_source(source_id: str) -> NoteReference | None:
    """The note a citation's source id names: the whole id is one note reference (``"12345#note-3"``,
    ``"#12345-note-3"``, ``"チケット #12345 の note-3"``, a Redmine URL with ``#note-3``); None for any
    other id."""
    if _MAY_NAME_NOTE.search(source_id) is None:  # most ids: a chunk id, a URI (one scan, no normalising)
        return None
    text = unicodedata.normalize("NFKC", source_id).strip()
    if text[:1].isdigit():  # a bare ticket number: "12345#note-3"
        text = "#" + text
    references = note_references(text, 1)
    if len(references) != 1 or references[0].end != len(text):
        return None
    before = text[: references[0].start]  # nothing but the label words of the mention ("チケット ")
    return references[0] if not any(c.isdigit() for c in before) else None


def url_note(url: str | None) -> int | None:
    """The note a Redmine URL's fragment names (``…#note-3``)."""
    fragment = _NOTE_FRAGMENT.search(url) if url else None
    return _number(fragment["note"]) if fragment else None


def metadata_notes(metadata: Mapping[str, Any]) -> frozenset[int] | None:
    """The Redmine notes a chunk holds text of, by its metadata; None when the metadata does not say
    (its url's fragment may, see ``url_note``)."""
    notes: set[int] = set()
    said = False
    for key in ("chunk_notes", "note_numbers"):
        numbers = parse_note_numbers(metadata.get(key))
        if numbers is not None:
            notes.update(numbers)
            said = True
    note = metadata_int(metadata.get("note"))
    if note is not None:
        notes.add(note)
        said = True
    return frozenset(n for n in notes if n > 0) if said else None


def chunk_notes(text: str, *metadata: Mapping[str, Any]) -> frozenset[int] | None:
    """The Redmine notes a chunk holds: what its metadata says (``metadata_notes`` of the first of the
    ``metadata`` mappings that says anything); none for an anchorkit chunk of the details or the
    description whose ``text`` holds no journal's heading; else None (not known). Such a chunk runs on
    into the history only in a short ticket, and then names the notes it holds there when the numbers
    were known; without them it may hold journals that no metadata numbers."""
    for mapping in metadata:
        notes = metadata_notes(mapping)
        if notes is not None:
            return notes
    section = next((mapping["section"] for mapping in metadata if "section" in mapping), None)
    before_history = isinstance(section, str) and section in _BEFORE_HISTORY
    return frozenset() if before_history and _JOURNAL_HEADING.search(text) is None else None


def note_not_held(note: int, tickets: str, cited: Sequence[str], notes: Iterable[int], holders: Sequence[str]) -> str:
    """What to say of a note of ``tickets`` cited from the chunks ``cited`` (ids), which hold ``notes``
    and not that one: and which retrieved chunks hold it (``holders``), when any does."""
    one = len(cited) == 1
    message = (
        f"{_chunks(cited)} of {tickets} {'does' if one else 'do'} not hold note {note} "
        f"({'it holds' if one else 'they hold'} {shown_notes(notes)})"
    )
    return message + (f"; note {note} is in {_chunks(holders)}" if holders else "")


def _chunks(ids: Sequence[str]) -> str:
    return ("chunk " if len(ids) == 1 else "chunks ") + ", ".join(repr(i) for i in ids)


def shown_notes(notes: Iterable[int]) -> str:
    """Notes for people: ``notes 1-3,7`` (``no note`` for none)."""
    ordered = sorted(set(notes))
    if not ordered:
        return "no note"
    return ("note " if len(ordered) == 1 else "notes ") + format_note_numbers(ordered)
