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
``#12345 のコメント #3``, ``#12345 (note 3)``, ``#12345, note 3``, ``#12345 - note 3``,
``#12345 の #3 の注記``, ``(#12345: note 3)``, in any width) or preceded by it (``note 3 of #12345``), a
Redmine URL with its fragment (``https://host/issues/12345#note-3``), the same as a citation's source id
(``"12345#note-3"``), or a structured citation ``{"ticket_id": 12345, "note": 3}``. A list or a range
names every note in it (``#12345 の注記 3 と 4``, ``#12345 notes 3-5``, ``#12345#note-3, #note-4``).

Pure: chunks and answers in, facts out; nothing is built from untrusted text but what it matched.
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any

from anchorkit.note_ranges import format_note_numbers, metadata_int, parse_note_numbers
from anchorkit.verify.folding import Folded, fold
from anchorkit.verify.ids import (
    DATE_OR_TIME,
    LABEL_WORDS,
    UNIT_WORDS,
    VERSION,
    Mention,
    as_requested,
    bare_number_is_ticket,
    iter_mentions,
)

# How an answer names notes, read in the folded view (verify.folding: "＃", "（", "－", "～" and "ｎｏｔｅ"
# are "#", "(", "-", "~" and "note" there). After a ticket mention: "-note-3", "#note-3", " の note-3",
# " の #note-3" and " #note-3" (Redmine's own fragment, as a model copies it from the note's URL), "の注記 #3",
# "のノート 7", "のコメント #7", "(note-7)", ", note 7", " - note 7", "の注記番号 3", "note No. 3", "注記(3)";
# "の #3 の注記" (Redmine shows a note's number as "#3"); after a colon only where the note ends the phrase
# ("#12345: note 3)", "#12345: note 3。"), as "#12345: Note 3 の同期に失敗する" is how anchors and title lines
# write a ticket and its subject. Before it, in English: "note 3 of #12345", "comment #3 on ticket 12345".
# The word is singular, or plural before a list: "#12345 notes 3" and "#12345 has 3 notes" are counts.
_NOTE_WORD = r"(?i:note|comment)(?![A-Za-z])|注記|ノート|コメント"
_NOTES_WORD = r"(?i:notes|comments)(?![A-Za-z])"
_DESIGNATOR = r"(?:(?i:no\.?|nr\.?|number)[ \t]*|番号[ \t]*)?"
# A note number is no date, time or version ("のコメント 3月5日", "note 12:30"), no quantity or ordinal, also
# after a space ("のコメント 3件", "注記 3 と 4 台の PC", "注記 3、4 月に", "3 番目の注記": the third note need
# not be Redmine's note 3), and does not run into letters ("note 4GB").
_QUANTITY = (
    r"[ \t]*(?:[件台個人回通名枚本円%つ行年月日時分秒週歳点章節項段頁版号度倍冊社]|番目|ページ|[かヶヵカ][月所]|箇所"
    rf"|{UNIT_WORDS})"
)
# A note number may be written as a word, one to twenty ("注記 三", "note three"); a kanji numeral is no number
# inside a word ("注記一覧" is the list of notes). Ordinals ("三番目", "the third note") are no note numbers, as
# "3 番目" is not.
_NUMBER_WORDS = [
    *("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"),
    *("thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"),
]
_KANJI_DIGITS = "一二三四五六七八九"
_KANJI_NUMBERS = [*_KANJI_DIGITS, "十", *(f"十{digit}" for digit in _KANJI_DIGITS), "二十"]
_WORD_VALUES = {word: value for words in (_NUMBER_WORDS, _KANJI_NUMBERS) for value, word in enumerate(words, 1)}
_NUMBER_WORD = rf"(?i:{'|'.join(sorted(_NUMBER_WORDS, key=len, reverse=True))})(?![A-Za-z-]|{_QUANTITY})" + (
    rf"|(?:二十|十?[{_KANJI_DIGITS}]|十)(?![\u3400-\u9fff々〇]|{_QUANTITY})"
)
_NUMBER = rf"(?!{DATE_OR_TIME}|{VERSION})(?P<note>\d+(?!\d|{_QUANTITY}|[A-Za-z])|{_NUMBER_WORD})"
_HEAD = rf"(?:(?P<plural>{_NOTES_WORD})|{_NOTE_WORD})[-_ \t]*{_DESIGNATOR}(?P<paren>\()?#?{_NUMBER}(?(paren)\))"
_AFTER_MENTION = re.compile(rf"(?:[-#]|[ \t]*(?:[(,、-][ \t]*|の[ \t]*)?#?){_HEAD}")
_AFTER_COLON = re.compile(rf"[ \t]*:[ \t]*#?{_HEAD}")
_PHRASE_END = re.compile(r"[ \t]*(?:[)\]」』】>,、。.;!?\n]|\Z)")
_HASH_BEFORE_WORD = re.compile(rf"[ \t]*の[ \t]*#{_NUMBER}")
_WORD_AFTER_HASH = re.compile(r"[ \t]*の[ \t]*(?:注記|ノート|コメント)")
_BEFORE_MENTION = re.compile(rf"(?<![A-Za-z]){_HEAD}")
_OF_MENTION = re.compile(
    rf"[ \t]+(?i:of|in|on|from)[ \t]+(?:(?i:the)[ \t]+)?"
    rf"(?:(?:{LABEL_WORDS})[ \t]*(?:(?i:no\.?|number|id)[ \t]*)?:?[ \t]*)?"
)
# "Galaxy Note 3 in #12345" is a phone: a capitalised word right before a capitalised note word; not one of the
# words a sentence says a note with ("See Note 3 of #12345", "Per Note 3", "Also Note 3").
_PRODUCT_NAME = re.compile(
    r"(?<![A-Za-z])(?!(?:See|Per|Cf|Check|Read|Also|And|Or|In|On|From|Under|As|By|To|At|With|Via|Refer|Review|Quote"
    r"|Quoting|Following|The|This|That|Its|According|Unlike|Like|Only|Both|Later|Earlier|Then)[ \t])"
    r"[A-Z][A-Za-z0-9]*[ \t]+\Z"
)
# A list or a range of notes goes on from the first ("注記 3 と 4", "notes 3 and 4", "注記3、4", "notes 3-5",
# "#note-3, #note-4", "注記 3～5"), each number a note when it has at most one digit more than the one before
# it ("注記 3 と 12399" is no note 12399), or when it repeats the note word; a "#n" without the word only when
# it names no ticket ("注記 #3 と #12399": #12399 is a ticket mention, ids.bare_number_is_ticket).
_RANGE_SEPARATOR = r"[ \t]*[-~〜‐‑–—][ \t]*"
_LIST_SEPARATOR = (
    r"[ \t]*(?:,[ \t]*(?i:and|or)(?![A-Za-z])|[,、・&]|(?i:and|or)(?![A-Za-z])|と|や|および|及び|または|又は)[ \t]*"
)
_LIST_ITEM = re.compile(
    rf"(?:(?P<range>{_RANGE_SEPARATOR})|{_LIST_SEPARATOR})"
    rf"(?:(?P<word>#?(?:{_NOTES_WORD}|{_NOTE_WORD})[-_ \t]*{_DESIGNATOR}#?)|(?P<hash>#))?{_NUMBER}"
)
# A range longer than this is read as its two ends: no ticket has that many notes to cite at once.
_MAX_NOTE_RANGE = 100
# A Redmine URL's note fragment ("…/issues/12345#note-3"; the URL may run into the sentence's "。"). A reader
# sees note 3 in "#NOTE-3" and in "#note-%33" too.
_NOTE_FRAGMENT = re.compile(r"#(?i:note)-(?P<note>\d+)(?!\d)")
# Redmine's anchor of a journal by its id ("…/issues/12345#change-45678"): no note number and no ticket. No
# retrieved chunk says which journal ids it holds (chunk_notes and note_numbers are note numbers), so such a
# link or source id cites the ticket, and nothing below it is checked.
_CHANGE_FRAGMENT = re.compile(r"#(?i:change)-\d+\Z")
# Whether a text may name a note at all: one search, and most texts need no more.
_MAY_NAME_NOTE = re.compile(r"(?i:note|comment)|注記|ノート|コメント")
# What a source id naming a note must hold somewhere (full-width and half-width forms before NFKC too).
_SOURCE_MAY_NAME_NOTE = re.compile(r"(?i:note|ｎｏｔｅ|comment|ｃｏｍｍｅｎｔ)|注記|ノート|コメント|ﾉｰﾄ|ｺﾒﾝﾄ")
# A note number longer than this can be no note of any ticket; it is kept short, never converted whole.
_MAX_NOTE_DIGITS = 12
# anchorkit's chunk metadata: the sections before the history (chunk/core.py, a chunk's "section" is the
# one it begins in), and a journal's heading in its text (render/document.py "### [2024-06-12] 佐藤 次郎":
# the document's own headings are #, ## and ###, the content's are put below them).
_BEFORE_HISTORY = frozenset({"details", "description"})
_JOURNAL_HEADING = re.compile(r"^### ", re.M)


@dataclass(frozen=True)
class NoteReference:
    """A note of a ticket named in a text: ``text[start:end]`` shows it (the first note of a mention with
    the mention, each further note of a list by itself; the notes inside a range share its last number)."""

    ticket_id: int
    note: int
    start: int
    end: int


def _number(written: str) -> int:
    """The note number ``written`` (ASCII digits or a number word) names."""
    return _WORD_VALUES.get(written.lower()) or int(written[:_MAX_NOTE_DIGITS])


def _width(written: str) -> int:
    """How many digits the note number ``written`` has (a list goes on with numbers about as long)."""
    return len(written) if written.isdigit() else len(str(_number(written)))


@dataclass(frozen=True)
class _Reading:
    """What the notes of a text are read against: its folded view, and which bare "#n" are tickets."""

    view: Folded
    min_digits: int
    known: Set[int]

    def listed(self, ticket_id: int, first: re.Match[str], start: int) -> tuple[list[NoteReference], int]:
        """The note ``first`` matched (shown from ``start``, view offsets) and the notes of the list or range
        that goes on from it; and where they end in the view. A plural word with no list after it: none."""
        text = self.view.text
        references = [NoteReference(ticket_id, _number(first["note"]), start, first.end("note"))]
        previous, position = first["note"], first.end()
        while (item := _LIST_ITEM.match(text, position)) is not None:
            digits = item["note"]
            if item["word"] is None and (
                _width(digits) > _width(previous) + 1
                or (
                    item["hash"] is not None
                    and digits.isdigit()
                    and bare_number_is_ticket(digits, self.min_digits, self.known)
                )
            ):
                break
            low, note = _number(previous), _number(digits)
            shown = item.start("word" if item["word"] else "hash" if item["hash"] else "note")
            inside = (
                range(low + 1, note) if item["range"] and not item["word"] and note - low <= _MAX_NOTE_RANGE else ()
            )
            references += [NoteReference(ticket_id, n, shown, item.end("note")) for n in [*inside, note]]
            previous, position = digits, item.end()
        if first.groupdict().get("plural") and len(references) == 1:
            return [], first.start()
        view = self.view
        return [NoteReference(r.ticket_id, r.note, view.start(r.start), view.end(r.end)) for r in references], position

    def after(self, mention: Mention) -> list[NoteReference]:
        """The notes a ticket mention goes on to name (``#12345 の注記 3 と 4``, a URL's ``#note-3``)."""
        text, start = self.view.text, mention.view_start
        if mention.url and (fragment := _NOTE_FRAGMENT.search(text, start, mention.view_end)) is not None:
            references, _ = self.listed(mention.ticket_id, fragment, start)
            return [dataclasses.replace(references[0], end=max(references[0].end, mention.end)), *references[1:]]
        if mention.url and (escaped := _NOTE_FRAGMENT.search(as_requested(text[start : mention.view_end]))):
            return [NoteReference(mention.ticket_id, _number(escaped["note"]), mention.start, mention.end)]
        if (after := _AFTER_MENTION.match(text, mention.view_end)) is not None:
            return self.listed(mention.ticket_id, after, start)[0]
        if (after := _AFTER_COLON.match(text, mention.view_end)) is not None:
            references, end = self.listed(mention.ticket_id, after, start)
            return references if _PHRASE_END.match(text, end) else []
        if (after := _HASH_BEFORE_WORD.match(text, mention.view_end)) is not None:
            if after["note"].isdigit() and bare_number_is_ticket(after["note"], self.min_digits, self.known):
                return []
            references, end = self.listed(mention.ticket_id, after, start)
            return references if _WORD_AFTER_HASH.match(text, end) else []
        return []

    def before(self, mentions: Iterable[Mention]) -> dict[int, list[NoteReference]]:
        """The notes named before a mention (``note 3 of #12345``), by where the mention starts in the view."""
        text = self.view.text
        starts = {m.view_start: m for m in mentions}
        named: dict[int, list[NoteReference]] = {}
        for head in _BEFORE_MENTION.finditer(text):
            if head[0][0].isupper() and _PRODUCT_NAME.search(text, max(0, head.start() - 32), head.start()):
                continue
            probe, end = self.listed(0, head, head.start())
            connector = _OF_MENTION.match(text, end) if probe else None
            mention = starts.get(connector.end()) if connector else None
            if mention is not None:
                named[mention.view_start] = [dataclasses.replace(r, ticket_id=mention.ticket_id) for r in probe]
        return named


def notes_named(view: Folded, mentions: Sequence[Mention], min_digits: int, known: Set[int]) -> list[NoteReference]:
    """The notes of the tickets of ``mentions`` (found in ``view``) that the text names, in order of their
    mentions: a mention's notes before it, then after it."""
    if not mentions or _MAY_NAME_NOTE.search(view.text) is None:
        return []
    reading = _Reading(view, min_digits, known)
    before = reading.before(mentions)
    return [r for m in mentions for r in [*before.get(m.view_start, ()), *reading.after(m)]]


def note_references(text: str, min_digits: int, known: Set[int] = frozenset()) -> list[NoteReference]:
    """The notes a text names, in order (a mention counts as for ``ids.mentioned_ids``)."""
    view = fold(text)
    return notes_named(view, list(iter_mentions(view, min_digits, known)), min_digits, known)


def note_source(source_id: str) -> NoteReference | None:
    """The note a citation's source id names: the whole id is one note reference (``"12345#note-3"``,
    ``"#12345-note-3"``, ``"チケット #12345 の note-3"``, a Redmine URL with ``#note-3``); None for any
    other id."""
    if _SOURCE_MAY_NAME_NOTE.search(source_id) is None:  # most ids: a chunk id, a URI (one scan, no normalising)
        return None
    text = unicodedata.normalize("NFKC", source_id).strip()
    if text[:1].isdigit():  # a bare ticket number: "12345#note-3"
        text = "#" + text
    references = note_references(text, 1)
    if len(references) != 1 or references[0].end != len(text):
        return None
    before = text[: references[0].start]  # nothing but the label words of the mention ("チケット ")
    return references[0] if not any(c.isdigit() for c in before) else None


def without_change_anchor(source_id: str) -> str:
    """A source id without Redmine's journal anchor (``"12345#change-45678"`` is ``"12345"``): it cites the ticket."""
    return _CHANGE_FRAGMENT.sub("", source_id.strip())


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
