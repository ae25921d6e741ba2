"""Answer-time verification: only ticket IDs and citations that come from what was retrieved.

A ticket id is *valid* for an answer when it came from a retrieved chunk: from the chunk's source URI
(``s3://bucket/tickets/12345.md``) or from a genuine anchor/title line in its text (anchors.py, the one
place that knows the anchor format). A free-text mention such as ``#12300 と同様`` inside a chunk is
not a source: any ticket could otherwise vouch for any other ticket's id. In later turns of a
conversation the ids of earlier retrievals come from the context message the backend put into the
prompt (its genuine anchors), or from the earlier retrievals themselves.

This module is the pure core: chunks and answers come in as the data types below (see
verify_shapes.py for reading Bedrock and plain JSON), findings go out as data. Untrusted text
(chunks, answers) is only ever matched against fixed patterns; nothing is built from it.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar


from anchorkit.anchors import ANCHOR_PATTERN, DEFAULT_LABEL, TITLE_PATTERN, find_anchors, find_titles, identified_ticket_ids, one_line

DEFAULT_URI_PATTERN = r"/(\d+)\.md$"
"""Source URI → ticket id: ``…/12345.md`` (flat layout) and ``…/<project>/12345.md`` (by-project)."""
DEFAULT_QUOTE_THRESHOLD = 0.8
"""A quoted span must match some part of the cited chunk with at least this similarity (0..1)."""
DEFAULT_GROUNDING_THRESHOLD = 0.3
"""At least this share of a claim's tokens (CJK bigrams / words) must occur in its cited chunks."""
UNVERIFIED_MARKER = "[unverified]"
"""What a dropped ``#12345`` mention becomes in a filtered text answer."""

OnInvalid = Literal["drop", "flag"]
OnEmpty = Literal["pass", "block"]
Severity = Literal["critical", "warning", "info"]
T = TypeVar("T")

DEFAULT_MIN_ID_DIGITS = 3
"""A bare ``#n`` (no label, not in a Redmine URL) is a ticket id only with at least this many digits
(or when ``n`` is a retrieved ticket): ``手順 #2`` is step 2, not ticket #2. Labelled forms
(``チケット #2``, ``Ticket#2``, ``Redmine #2``) and Redmine issue URLs always are."""

# Words that name a ticket right before its number. "Bug"/"Feature"/"Support" are Redmine's default
# trackers ("Bug #123" is how Redmine itself writes a ticket).
_LABEL_WORDS = rf"{re.escape(DEFAULT_LABEL)}(?:番号)?|課題|(?i:ticket|issue|redmine|bug|feature|support)"
# A ticket number: digits, or digits in groups of three ("#12,300" is ticket 12300, not 12).
# Not a ticket: the start of a date, a time or a version ("#2024-03-14", "#12:30", "ticket 2024年", "#3.2").
_NUMBER = r"(?:\d{1,3}(?:,\d{3})+(?!\d)|\d{1,12}(?!\d))(?![-./:：]\d|[年月日時分秒])"
_URL = r"(?i:https?)://[^\s<>\"'`\]\)）」』】]+"
# One scan finds the three ways an answer names a ticket. URLs come first: a fragment ("page#12")
# or a path inside one is not a mention, a Redmine issue URL ("…/issues/12345#note-3") is.
_MENTION = re.compile(
    # The look-ahead at the first characters of the alternatives lets the scan skip other positions fast.
    rf"(?=[hH#＃{DEFAULT_LABEL[0]}課TtIiRrBbFfSs])(?:(?P<url>{_URL})"
    rf"|(?<![A-Za-z0-9_])(?:{_LABEL_WORDS})[ \t\u3000]*(?i:no\.?|number)?[ \t\u3000:：]*"
    rf"(?:(?P<lhash>[#＃])[ \t]*)?(?P<lid>{_NUMBER})"
    rf"|(?<![&A-Za-z0-9_])[#＃](?P<bid>{_NUMBER}))"
)
# Redmine's issue URL: /issues/<id> at the root or under one sub-URI segment ("/redmine/issues/5");
# not GitHub's or GitLab's (/owner/repo/issues/5, /group/project/-/issues/5).
_REDMINE_ISSUE = re.compile(r"\Ahttps?://[^/\s]+(?:/[^/\s]+)?/issues/(\d{1,12})(?!\d)", re.IGNORECASE)
# Inline citation markers: "[2]", "[1, 3]", "【2】", "[^2]" (seed 004: a 1-based position in the retrieval) and
# seed 000's "[SRC:id]" (a source id). Not after an ASCII word character: "a[1]" is an index.
_MARKER = re.compile(r"(?=[\[［【])(?<![A-Za-z0-9_])(?:[\[［【]\^?(?P<numbers>\d{1,4}(?:[ \t]*[,，、][ \t]*\d{1,4})*)[\]］】]|\[SRC:(?P<src>[^\]\s]+)\])")
# The end of a text that may still grow into a mention ("…#123" → "…#12345", "チケ" → "チケット12345",
# "https://red" → a Redmine URL): a streaming filter holds it back.
_TRAILING_PARTIAL_MENTION = re.compile(
    r"(?:(?i:https?):/?/?\S*|[A-Za-z\u30a0-\u30ff番号課題]*[ \t\u3000]*(?i:no\.?|number)?[ \t\u3000:：]*(?:[#＃][ \t]*)?[\d,]*[-./:：]?)\Z"
)
# How much already emitted text a streaming filter looks back at (labels and look-behinds before a cut).
_STREAM_LOOKBACK = 48
# Content characters of Japanese (katakana, kanji, 々), Chinese and Korean. Hiragana is left out on
# purpose: it is mostly grammar (particles, endings) that any two Japanese texts share, so it
# separates runs instead of counting as overlap.
_CJK = "\u30a0-\u30ff\u3005\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_FULL_WIDTH = re.compile("[\uff01-\uff5e\u3000]")  # full-width ASCII (NFKC: U+FF01..FF5E -> U+0021..007E)
# Words: runs of digits and Latin, Greek or Cyrillic letters (after NFKC and case folding).
_WORD_PATTERN = r"[0-9a-z\u00b5\u00df-\u024f\u0370-\u03ff\u0400-\u04ff]+"
_WORD = re.compile(_WORD_PATTERN)
# Runs of CJK characters (measured in character bigrams) or words.
_TOKEN_RUN = re.compile(rf"([{_CJK}]+)|({_WORD_PATTERN})")
# English function words carry no content; like hiragana they would only dilute the overlap.
_STOPWORDS = frozenset(
    "a an and are as at be by for from has have in is it of on or that the this to was were will with".split()
)


# --------------------------------------------------------------------------- input data


@dataclass(frozen=True)
class Chunk:
    """One retrieved chunk: the id an answer cites it by, its text and its source URI.

    ``ticket_id``/``subject``: what the knowledge base stored with the document (the ``ticket_id`` and
    ``subject`` attributes of anchorkit's sidecars), when the retrieval reports them; ``title``: the
    source's title (seed 000's ``Source.title``); ``score``: the retriever's relevance score.
    """

    id: str
    text: str
    uri: str | None = None
    ticket_id: int | None = None
    title: str | None = None
    subject: str | None = None
    score: float | None = None


@dataclass(frozen=True)
class Citation:
    """A claim's reference to a retrieved chunk, optionally quoting it.

    ``position``: the 0-based position of the chunk in the retrieval, for citations that name a
    position instead of an id (``[2]`` markers, LangChain's integer source ids); ``source_id`` is
    then how the answer wrote it.
    """

    source_id: str
    quoted_span: str | None = None
    position: int | None = None


@dataclass(frozen=True)
class Claim:
    text: str
    citations: tuple[Citation, ...] = ()


@dataclass(frozen=True)
class Answer:
    """An answer in any accepted shape, normalised (verify_shapes.py says which shape fills what).

    ``text``: free text outside claims (a plain-text answer, ``output.text``, a top-level ``answer``);
    ``summary``: a GroundedAnswer's summary; ``claims``: structured claims; ``results``: ticket result
    objects ``{"issue_id": …}`` (kept as given, they are the product); ``extra``: (where, text) of every
    other string the answer holds, checked for ticket ids too; ``retrieved``: chunks the answer carries
    itself (RetrieveAndGenerate references, LlamaIndex ``source_nodes``, LangChain ``context``).
    """

    shape: str
    text: str = ""
    claims: tuple[Claim, ...] = ()
    results: tuple[Mapping[str, Any], ...] = ()
    summary: str = ""
    extra: tuple[tuple[str, str], ...] = ()
    retrieved: tuple[Chunk, ...] = ()
    notes: tuple[str, ...] = ()  # what reading ``retrieved`` skipped


# --------------------------------------------------------------------------- valid ids


def compile_uri_pattern(pattern: str | re.Pattern[str]) -> re.Pattern[str]:
    """The operator's URI pattern (configuration, never untrusted text); exactly one group: the id."""
    compiled = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern)
    if compiled.groups != 1:
        raise ValueError(f"URI pattern {compiled.pattern!r} must have exactly one group (the ticket id)")
    return compiled


def uri_ticket_id(uri: str | None, uri_pattern: re.Pattern[str]) -> int | None:
    """The ticket a source URI names: by the operator's pattern (the knowledge base's layout), else as
    a Redmine issue URL (``https://host:3000/issues/12345#note-3``)."""
    if not uri:
        return None
    match = uri_pattern.search(uri)
    if match is not None and match.group(1) and match.group(1).isdigit():
        return int(match.group(1))
    issue = _REDMINE_ISSUE.match(uri)
    return int(issue.group(1)) if issue else None


def chunk_ticket_ids(chunk: Chunk, uri_pattern: re.Pattern[str]) -> frozenset[int]:
    """The tickets a chunk is a source for: its document's ticket (from its URI, its metadata or a
    title in the anchor format), else the ids of the genuine anchors and title lines in its text.

    When the document is known, its anchors are not consulted: a document carries anchors of its own
    ticket only, so an anchor naming another ticket there can only be a forgery that a chunker laid
    open (content "… > チケット #99: …" cut right before the ">" starts a chunk with an anchor line).
    """
    stored = {i for i in (uri_ticket_id(chunk.uri, uri_pattern), chunk.ticket_id) if i is not None}
    if chunk.title and not stored:
        stored = {a.ticket_id for a in find_titles("# " + one_line(chunk.title))}
    return frozenset(stored or identified_ticket_ids(chunk.text))


def chunk_subjects(chunk: Chunk, ticket_ids: Iterable[int]) -> set[str]:
    """What the chunk says its tickets' subjects are: its metadata subject, its genuine anchors and
    title lines naming one of ``ticket_ids``."""
    wanted = set(ticket_ids)
    subjects = {chunk.subject} if chunk.subject else set()
    anchors = find_anchors(chunk.text) + find_titles(chunk.text)
    if chunk.title:
        anchors += find_titles("# " + one_line(chunk.title))
    return subjects | {a.subject for a in anchors if a.ticket_id in wanted and a.subject}


# JSON string escapes (a context message saved inside JSON: "\\n> チケット #1: …", "\\u30c1…").
_JSON_ESCAPE = re.compile(r'\\(?:u[0-9a-fA-F]{4}|["\\/bfnrt])')
# Whitespace (line breaks, indentation) before a blockquote marker: where a flattened or indented
# context had its anchor lines.
_BEFORE_QUOTE = re.compile(r"\s+(?=> \S)")


def context_ticket_ids(text: str) -> set[int]:
    """The ids a later turn's context message vouches for: its genuine anchors and title lines, also
    when the backend indented them, flattened them onto one line or JSON-escaped the message.

    Escapes are decoded and each ``> `` after whitespace is put at the start of its own line; a
    neutralised forgery (``> チケット \\#99: …``) keeps its backslash through both, so it stays no anchor.
    """
    if "\\" in text:
        text = _JSON_ESCAPE.sub(lambda m: json.loads(f'"{m[0]}"'), text)
    # Lines that are anchors or titles already count as they are; only the rest is unflattened, so
    # "> チケット #99: …" inside an anchor's subject never becomes an anchor of its own.
    rest = TITLE_PATTERN.sub("", ANCHOR_PATTERN.sub("", text))
    return identified_ticket_ids(text) | identified_ticket_ids(_BEFORE_QUOTE.sub("\n", rest))


def valid_ids(
    chunks: Iterable[Chunk],
    uri_pattern: str | re.Pattern[str] = DEFAULT_URI_PATTERN,
    context: str | Iterable[str] | None = None,
) -> set[int]:
    """Ticket ids an answer may name: those of the retrieved chunks, plus those of the context.

    ``context`` is the context message of a later conversation turn (the text the backend put into
    the prompt from earlier retrievals), or several of them: only its genuine anchors and title lines
    count (context_ticket_ids), exactly as for a chunk's text.
    """
    pattern = compile_uri_pattern(uri_pattern)
    ids: set[int] = set()
    for chunk in chunks:
        ids |= chunk_ticket_ids(chunk, pattern)
    contexts = [context] if isinstance(context, str) else list(context or ())
    for text in contexts:
        ids |= context_ticket_ids(text)
    return ids


# --------------------------------------------------------------------------- filtering


def parse_ticket_id(value: object) -> int | None:
    """A ticket id given as 12345, 12345.0 (Bedrock returns numeric metadata as floats), "12345",
    "#12345" or full-width "１２３４５"; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, str):
        # NFKC: "１２３４５" and "＃１２３４５" are read like the same ids written in a text.
        digits = unicodedata.normalize("NFKC", value).strip().removeprefix("#")
        if digits.isdigit() and digits.isascii() and len(digits) <= 12:
            return int(digits) or None
    return None


def issue_id_of(item: Any) -> int | None:
    """The ticket id of a ticket result ``{"issue_id": 12345, …}``."""
    return parse_ticket_id(item.get("issue_id")) if isinstance(item, Mapping) else None


Status = Literal["valid", "invalid", "unchecked"]


@dataclass(frozen=True)
class Checked(Generic[T]):
    """An item with its verdict: ``valid``, ``invalid`` (id missing or not retrieved) or ``unchecked``
    (nothing retrieved carried an id and ``on_empty="pass"``: passed through, flagged)."""

    item: T
    ticket_id: int | None
    status: Status


@dataclass(frozen=True)
class FilterResult(Generic[T]):
    """``checked``: every item with its verdict, in order; ``kept``: the items to show (under
    ``on_invalid="flag"`` these include the ``rejected`` ones, which the caller marks)."""

    checked: list[Checked[T]]
    kept: list[T]

    @property
    def rejected(self) -> list[T]:
        return [c.item for c in self.checked if c.status == "invalid"]

    @property
    def unchecked(self) -> bool:
        return any(c.status == "unchecked" for c in self.checked)


class _IdChecker(Generic[T]):
    """The one decision behind filter_ids and filter_stream."""

    def __init__(
        self, valid: set[int] | frozenset[int], on_invalid: OnInvalid, on_empty: OnEmpty, id_of: Callable[[T], int | None]
    ) -> None:
        if on_invalid not in ("drop", "flag") or on_empty not in ("pass", "block"):
            raise ValueError(f"on_invalid must be drop|flag and on_empty pass|block, not {on_invalid!r}/{on_empty!r}")
        self.valid = valid
        self.on_invalid = on_invalid
        self.on_empty = on_empty
        self.id_of = id_of

    @property
    def unchecked(self) -> bool:
        """Nothing is valid and ``on_empty="pass"``: every item passes through unchecked."""
        return not self.valid and self.on_empty == "pass"

    def status(self, ticket_id: int | None) -> Status:
        if self.unchecked:
            return "unchecked"
        return "valid" if ticket_id in self.valid else "invalid"

    def check(self, item: T) -> Checked[T]:
        ticket_id = self.id_of(item)
        return Checked(item, ticket_id, self.status(ticket_id))

    def keeps(self, checked: Checked[T]) -> bool:
        return checked.status != "invalid" or self.on_invalid == "flag"


def filter_ids(
    items: Iterable[T],
    valid: set[int] | frozenset[int],
    *,
    on_invalid: OnInvalid = "drop",
    on_empty: OnEmpty = "pass",
    id_of: Callable[[T], int | None] = issue_id_of,
) -> FilterResult[T]:
    """Drop (``on_invalid="drop"``) or only flag (``"flag"``) items whose ticket id is not valid.

    When ``valid`` is empty (nothing retrieved carried a ticket id), ``on_empty="pass"`` passes every
    item through marked ``unchecked``, so a backend never answers with a silently empty list;
    ``on_empty="block"`` treats every item as invalid instead (the strict variant).
    """
    checker = _IdChecker(valid, on_invalid, on_empty, id_of)
    checked = [checker.check(item) for item in items]
    return FilterResult(checked, [c.item for c in checked if checker.keeps(c)])


async def filter_stream(
    items: AsyncIterable[T],
    valid: set[int] | frozenset[int],
    *,
    on_invalid: OnInvalid = "drop",
    on_empty: OnEmpty = "pass",
    id_of: Callable[[T], int | None] = issue_id_of,
) -> AsyncIterator[Checked[T]]:
    """filter_ids for a streaming backend: yields each item's verdict as soon as the item arrives
    (invalid items are not yielded under ``on_invalid="drop"``)."""
    checker = _IdChecker(valid, on_invalid, on_empty, id_of)
    async for item in items:
        checked = checker.check(item)
        if checker.keeps(checked):
            yield checked


@dataclass(frozen=True)
class Mention:
    """A ticket id named in a text; ``start``/``end``: what a filter replaces (``#12345``, the digits
    of ``チケット12345``, or a whole Redmine URL), the label words stay."""

    ticket_id: int
    start: int
    end: int


def _mentions(text: str, min_digits: int, known: Set[int], offset: int = 0) -> Iterator[Mention]:
    for match in _MENTION.finditer(text):
        if match["url"] is not None:
            issue = _REDMINE_ISSUE.match(match["url"])
            if issue and match.start() >= offset:
                yield Mention(int(issue[1]), match.start(), match.end())
            continue
        group = "lid" if match["lid"] is not None else "bid"
        digits = match[group].replace(",", "")
        ticket_id = int(digits)
        # Labelled with "#" always counts; labelled without it or bare only when long enough (or known).
        counts = match["lhash"] is not None or len(digits) >= min_digits or (group == "bid" and ticket_id in known)
        if group == "bid":
            start = match.start()
        else:
            start = match.start("lhash") if match["lhash"] is not None else match.start("lid")
        if counts and ticket_id > 0 and start >= offset:
            yield Mention(ticket_id, start, match.end())


def mentioned_ids(text: str, min_digits: int = DEFAULT_MIN_ID_DIGITS, known: Set[int] = frozenset()) -> list[Mention]:
    """The ticket ids a text names, in order: ``#12345``, ``＃１２３４５``, ``チケット #12345``,
    ``チケット12345``, ``Ticket#12345``, ``Redmine #12,345``, ``https://host/issues/12345#note-3``.

    A bare ``#n`` needs ``min_digits`` digits unless ``n`` is in ``known`` (the retrieved ids): see
    DEFAULT_MIN_ID_DIGITS. Not a mention: ``&#123;``, ``page#12``, fragments of other URLs.
    """
    return list(_mentions(text, min_digits, known))


def _replace_mentions(
    text: str, valid: Set[int], marker: str, min_digits: int, start: int = 0, end: int | None = None
) -> str:
    """text[start:end] with every mention there of an id not in ``valid`` replaced; the text around
    that window is context only (labels before it, what follows a number after it)."""
    end = len(text) if end is None else end
    pieces: list[str] = []
    position = start
    for mention in _mentions(text, min_digits, valid, start):
        if mention.start >= end:
            break
        if mention.ticket_id not in valid:
            pieces += [text[position : mention.start], marker]
            position = mention.end
    pieces.append(text[position:end])
    return "".join(pieces)


def filter_text(
    text: str,
    valid: Set[int],
    *,
    on_empty: OnEmpty = "pass",
    marker: str = UNVERIFIED_MARKER,
    min_digits: int = DEFAULT_MIN_ID_DIGITS,
) -> str:
    """Replace every mention of a ticket id that is not valid with ``marker``.

    With an empty ``valid`` set, ``on_empty="pass"`` leaves the text as it is (the caller flags it)
    and ``"block"`` replaces every mention.
    """
    if not valid and on_empty == "pass":
        return text
    return _replace_mentions(text, valid, marker, min_digits)


async def filter_text_stream(
    deltas: AsyncIterable[str],
    valid: Set[int],
    *,
    on_empty: OnEmpty = "pass",
    marker: str = UNVERIFIED_MARKER,
    min_digits: int = DEFAULT_MIN_ID_DIGITS,
) -> AsyncIterator[str]:
    """filter_text for a token stream: the end of what has arrived that may still grow into a mention
    is held back until it cannot, so the output equals ``filter_text`` of the whole text."""
    if not valid and on_empty == "pass":
        async for delta in deltas:
            yield delta
        return
    pending = ""
    emitted = ""  # the last characters already emitted: labels and look-behinds reach back into them
    async for delta in deltas:
        pending += delta
        hold = _TRAILING_PARTIAL_MENTION.search(pending)
        cut = hold.start() if hold else len(pending)
        if cut:
            # What is held back is still context: a number followed by "-0" is a date, not a mention.
            yield _replace_mentions(emitted + pending, valid, marker, min_digits, len(emitted), len(emitted) + cut)
            emitted = (emitted + pending[:cut])[-_STREAM_LOOKBACK:]
            pending = pending[cut:]
    if pending:
        yield _replace_mentions(emitted + pending, valid, marker, min_digits, len(emitted))


@dataclass(frozen=True)
class Marker:
    """An inline citation marker: ``[2]`` (``position`` 1, 0-based) or ``[SRC:doc#sec3]`` (``source_id``)."""

    source_id: str
    position: int | None
    start: int


def citation_markers(text: str) -> list[Marker]:
    """The inline citation markers of a text, one per cited number (``[1, 3]`` cites two)."""
    markers: list[Marker] = []
    for match in _MARKER.finditer(text):
        if match["src"] is not None:
            markers.append(Marker(match["src"], None, match.start()))
            continue
        for number in re.split(r"[^\d]+", match["numbers"]):
            markers.append(Marker(f"[{int(number)}]", int(number) - 1, match.start()))
    return markers


# --------------------------------------------------------------------------- text similarity


def _narrow(match: re.Match[str]) -> str:
    return " " if match[0] == "\u3000" else chr(ord(match[0]) - 0xFEE0)


def _fold(text: str) -> str:
    """NFKC, case-folded. Full-width ASCII and the ideographic space are replaced by what NFKC makes
    of them first (single starters: the normal form is the same): Japanese text is then usually
    normalised already, and checking that is ten times cheaper than normalising again."""
    narrowed = _FULL_WIDTH.sub(_narrow, text)
    if not unicodedata.is_normalized("NFKC", narrowed):
        narrowed = unicodedata.normalize("NFKC", narrowed)
    return narrowed.casefold()


def _squeeze(folded: str) -> str:
    return "".join(folded.replace("\\", "").split())


def normalize_for_match(text: str) -> str:
    """NFKC (full-width → half-width), case-folded, without whitespace and Markdown escapes: a quote
    copied from a chunk that a line break or an anchor's ``\\#`` interrupts still matches."""
    return _squeeze(_fold(text))


@dataclass(frozen=True)
class MatchText:
    """A chunk's text prepared once for every quote and overlap check against it."""

    folded: str  # NFKC, case-folded
    squeezed: str  # normalize_for_match
    words: frozenset[str]

    @classmethod
    def of(cls, text: str) -> MatchText:
        folded = _fold(text)
        return cls(folded, _squeeze(folded), frozenset(_WORD.findall(folded)))


def quote_similarity(quoted_span: str, chunk: str | MatchText) -> float:
    """How well the span matches its best-aligned part of the chunk: 1.0 = verbatim, 0..1
    (rapidfuzz partial_ratio: the best window of the chunk's length-of-span substrings)."""
    span = normalize_for_match(quoted_span)
    if not span:
        return 1.0
    text = (chunk if isinstance(chunk, MatchText) else MatchText.of(chunk)).squeezed
    if span in text:
        return 1.0
    from rapidfuzz import fuzz  # here, not at the top: only verify and eval need it, every command imports this module

    return fuzz.partial_ratio(span, text) / 100.0


def _split_tokens(text: str) -> tuple[set[str], set[str]]:
    """(CJK bigrams, words) of a text, NFKC and case-folded; hiragana and stop words skipped."""
    bigrams: set[str] = set()
    words: set[str] = set()
    for cjk, word in _TOKEN_RUN.findall(_fold(text)):
        if cjk:
            bigrams.update(cjk[i : i + 2] for i in range(max(len(cjk) - 1, 1)))
        elif word not in _STOPWORDS:
            words.add(word)
    return bigrams, words


def content_tokens(text: str) -> set[str]:
    """Tokens for overlap: character bigrams of CJK runs (Japanese has no spaces to split on), words
    elsewhere. A single CJK character stands for itself; hiragana and English stop words are skipped."""
    bigrams, words = _split_tokens(text)
    return bigrams | words


def claim_tokens(claim_text: str) -> tuple[set[str], set[str]]:
    """The (CJK bigrams, words) a claim is measured by: ticket-id mentions and citation markers removed."""
    return _split_tokens(_MARKER.sub(" ", _MENTION.sub(" ", claim_text)))


def claim_overlap(claim: str | tuple[set[str], set[str]], sources: Sequence[str | MatchText]) -> float:
    """The share of the claim's tokens (claim_tokens, or the claim's text) that occur in any of the sources.

    A CJK bigram occurs in a source when it is a substring of its text (two adjacent CJK characters
    there are one of its bigrams); a word when it is one of the source's words.
    """
    bigrams, words = claim_tokens(claim) if isinstance(claim, str) else claim
    if not bigrams and not words:
        return 1.0
    prepared = [s if isinstance(s, MatchText) else MatchText.of(s) for s in sources]
    # Joined by a character no bigram contains, the sources are searched once per bigram.
    folded = "\0".join(p.folded for p in prepared)
    found = sum(1 for b in bigrams if b in folded)
    vocabulary = prepared[0].words if len(prepared) == 1 else frozenset().union(*(p.words for p in prepared))
    found += len(words & vocabulary)
    return found / (len(bigrams) + len(words))


# --------------------------------------------------------------------------- verification


@dataclass(frozen=True)
class Finding:
    """One problem. ``part``: where in the answer (``claim``, ``text``, ``summary``, ``result``, or the
    path of another string such as ``$.note``); ``claim``/``citation``/``result``: 0-based positions."""

    kind: str
    severity: Severity
    message: str
    claim: int | None = None
    citation: int | None = None
    result: int | None = None
    source_id: str | None = None
    ticket_id: int | None = None
    score: float | None = None
    part: str | None = None

    @property
    def where(self) -> str:
        """Where the finding is, for people: "claim 2, citation 1", "summary", "result 3" (1-based)."""
        if self.claim is not None:
            return f"claim {self.claim + 1}" + (f", citation {self.citation + 1}" if self.citation is not None else "")
        if self.result is not None:
            return f"result {self.result + 1}"
        return self.part or "answer"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "severity": self.severity,
            "message": self.message,
            "part": self.part,
            "claim": self.claim,
            "citation": self.citation,
            "result": self.result,
            "source_id": self.source_id,
            "ticket_id": self.ticket_id,
            "score": None if self.score is None else round(self.score, 3),
        }


@dataclass(frozen=True)
class VerifyOptions:
    uri_pattern: str | re.Pattern[str] = DEFAULT_URI_PATTERN
    quote_threshold: float = DEFAULT_QUOTE_THRESHOLD
    grounding_threshold: float = DEFAULT_GROUNDING_THRESHOLD
    on_invalid: OnInvalid = "drop"
    on_empty: OnEmpty = "pass"
    min_id_digits: int = DEFAULT_MIN_ID_DIGITS
    min_score: float | None = None  # every chunk scored below it: as if nothing was retrieved (refuse)


@dataclass
class VerifyReport:
    answer: Answer
    valid_ids: frozenset[int]
    findings: list[Finding]
    units: int  # what the grounding score is measured over: citations (+ uncited claims), results, or mentioned ids
    filtered_answer: dict[str, Any]
    cited_ids: frozenset[int]  # ticket ids the answer names or cites (whether valid or not)
    unchecked: bool  # nothing retrieved carried a ticket id: ids were passed through (on_empty="pass")
    chunk_tickets: dict[str, frozenset[int]] = field(default_factory=dict)  # chunk id -> its ticket ids
    citation_chunks: dict[tuple[int, int], list[Chunk]] = field(default_factory=dict)  # (claim, citation) -> sources
    claim_citations: dict[int, tuple[Citation, ...]] = field(default_factory=dict)  # claim -> its citations, markers included
    cited_sources: frozenset[str] = frozenset()  # source ids as cited, and the ids of the chunks they resolve to
    dropped_claims: frozenset[int] = frozenset()
    nothing_retrieved: bool = False
    citations: int = 0  # citations of claims (markers included)

    @property
    def critical(self) -> int:
        return sum(f.severity == "critical" for f in self.findings)

    @property
    def warnings(self) -> int:
        return sum(f.severity == "warning" for f in self.findings)

    @property
    def grounding_score(self) -> float:
        if self.answer.claims and not self.citations:
            return 0.0  # seed 000: claims without any citation are not grounded at all
        return grounding_score(self.critical, self.warnings, self.units)

    def to_json(self) -> dict[str, Any]:
        """The stable ``--json`` schema (docs/verify.md); ``ok``: nothing critical was found."""
        return {
            "ok": self.critical == 0,
            "answer_shape": self.answer.shape,
            "valid_ids": sorted(self.valid_ids),
            "cited_ids": sorted(self.cited_ids),
            "cited_source_ids": sorted(self.cited_sources),
            "unchecked": self.unchecked,
            "nothing_retrieved": self.nothing_retrieved,
            "grounding_score": round(self.grounding_score, 4),
            "counts": {"critical": self.critical, "warning": self.warnings, "units": self.units},
            "findings": [f.to_json() for f in self.findings],
            "filtered_answer": self.filtered_answer,
        }


def grounding_score(critical: int, warnings: int, units: int) -> float:
    """1 − (critical + 0.5·warnings) / units, clamped to 0..1; 1.0 when the answer claims nothing."""
    if units == 0 and critical == 0 and warnings == 0:
        return 1.0
    return max(0.0, 1.0 - (critical + 0.5 * warnings) / max(units, 1))


class _Sources:
    """Retrieved chunks, indexed the ways a citation may name them, with cached derived values."""

    def __init__(self, chunks: Sequence[Chunk], uri_pattern: re.Pattern[str]) -> None:
        self.ordered = list(dict.fromkeys(chunks))  # the same chunk given twice (answer and --retrieval) counts once
        self.uri_pattern = uri_pattern
        self.by_id: dict[str, list[Chunk]] = {}
        self.by_uri: dict[str, list[Chunk]] = {}
        self.by_ticket: dict[int, list[Chunk]] = {}
        self.tickets: dict[str, frozenset[int]] = {}
        self._prepared: dict[int, MatchText] = {}
        for chunk in self.ordered:
            ids = chunk_ticket_ids(chunk, uri_pattern)
            self.tickets[chunk.id] = self.tickets.get(chunk.id, frozenset()) | ids
            self.by_id.setdefault(chunk.id, []).append(chunk)
            if chunk.uri:
                self.by_uri.setdefault(chunk.uri, []).append(chunk)
            for ticket_id in ids:
                self.by_ticket.setdefault(ticket_id, []).append(chunk)

    def resolve(self, citation: Citation) -> list[Chunk]:
        """A citation's source: the chunk at its position; else a chunk id, a source URI, a ticket (a
        URI or Redmine URL naming it, "12345", "#12345": the chunks of that ticket), or a bare number
        as the chunk's 1-based position."""
        if citation.position is not None:
            in_range = 0 <= citation.position < len(self.ordered)
            return [self.ordered[citation.position]] if in_range else []
        source_id = citation.source_id
        if source_id in self.by_id:
            return self.by_id[source_id]
        if source_id in self.by_uri:
            return self.by_uri[source_id]
        ticket_id = uri_ticket_id(source_id, self.uri_pattern) or parse_ticket_id(source_id)
        if ticket_id is not None and ticket_id in self.by_ticket:
            return self.by_ticket[ticket_id]
        # A bare number that names nothing else is the chunk's 1-based number in the prompt (seed 004).
        if source_id.isdigit() and 1 <= int(source_id) <= len(self.ordered):
            return [self.ordered[int(source_id) - 1]]
        return []

    def ticket_ids(self, chunks: Iterable[Chunk]) -> set[int]:
        return set().union(*(self.tickets[c.id] for c in chunks))

    def subjects(self, ticket_id: int) -> set[str]:
        return set().union(*(chunk_subjects(c, [ticket_id]) for c in self.by_ticket.get(ticket_id, [])))

    def match_text(self, chunk: Chunk) -> MatchText:
        key = id(chunk)  # the chunks outlive this index, so their ids stay unique
        if key not in self._prepared:
            self._prepared[key] = MatchText.of(chunk.text)
        return self._prepared[key]


def verify_citations(
    answer: Answer,
    chunks: Sequence[Chunk],
    *,
    context: str | Iterable[str] | None = None,
    extra_valid_ids: Iterable[int] = (),
    options: VerifyOptions = VerifyOptions(),
    notes: Iterable[str] = (),
) -> VerifyReport:
    """Check an answer against the chunks retrieved for it (and those the answer carries itself).

    Findings (severity): ``phantom_ticket_id`` (critical: the answer names an id no retrieved chunk or
    context vouches for, anywhere: claims, text, summary, results, any other string), ``phantom_source_id``
    (critical: a citation, ``[n]`` or ``[SRC:id]`` marker names no retrieved chunk), ``not_refused``
    (critical: nothing was retrieved, or every chunk scored below ``min_score``, yet the answer asserts
    something), ``quote_drift``, ``weak_grounding`` (per citation), ``wrong_ticket``, ``url_mismatch``,
    ``subject_mismatch``, ``uncited_claim`` (warnings), ``unchecked`` and ``nothing_retrieved`` (info).
    ``extra_valid_ids``: ids known valid from elsewhere (e.g. chunks of earlier retrievals); ``notes``:
    what reading the retrieval skipped (reported as ``skipped_chunk``, info).
    """
    sources = _Sources([*answer.retrieved, *chunks], compile_uri_pattern(options.uri_pattern))
    verification = _Verification(answer, sources, context, extra_valid_ids, options)
    for note in [*answer.notes, *notes]:
        verification.add("skipped_chunk", "info", note, part="retrieval")
    return verification.run()


# The end of a sentence, for the sentence an inline marker cites.
_SENTENCE_END = re.compile(r"[。．.!?！？\n]")


def _sentence_before(text: str, position: int) -> str:
    """The sentence an inline marker at ``position`` ends ("…解消しました[1]。" and "…解消しました。[1]")."""
    before = _MARKER.sub("", text[:position]).rstrip()
    before = before[:-1] if before[-1:] and _SENTENCE_END.match(before[-1]) else before
    ends = list(_SENTENCE_END.finditer(before))
    return before[ends[-1].end() :] if ends else before


class _Verification:
    """One verify_citations call: walks the answer once, collecting findings and the filtered answer."""

    def __init__(
        self,
        answer: Answer,
        sources: _Sources,
        context: str | Iterable[str] | None,
        extra_valid_ids: Iterable[int],
        options: VerifyOptions,
    ) -> None:
        self.answer = answer
        self.sources = sources
        self.options = options
        retrieved: set[int] = set().union(*sources.tickets.values())
        self.valid = frozenset(retrieved | valid_ids((), context=context) | set(extra_valid_ids))
        # A later turn may retrieve nothing new: its context still vouches for ids.
        self.nothing_retrieved = not sources.ordered and not self.valid
        scores = [c.score for c in sources.ordered]
        self.below_min_score = (
            options.min_score is not None and bool(scores) and all(s is not None and s < options.min_score for s in scores)
        )
        # Nothing retrieved is not the fallback for an unknown URI format: every id is then phantom.
        on_empty = "block" if self.nothing_retrieved else options.on_empty
        self.checker: _IdChecker[Any] = _IdChecker(self.valid, options.on_invalid, on_empty, issue_id_of)
        self.findings: list[Finding] = []
        self.cited: set[int] = set()
        self.cited_sources: set[str] = set()
        self.reported_phantoms: set[int] = set()
        self.units = 0
        self.citations = 0
        self.citation_chunks: dict[tuple[int, int], list[Chunk]] = {}
        self.claim_citations: dict[int, tuple[Citation, ...]] = {}
        self.tokens: dict[str, tuple[set[str], set[str]]] = {}

    @property
    def dropping(self) -> bool:
        return self.options.on_invalid == "drop"

    def is_phantom(self, ticket_id: int | None) -> bool:
        return self.checker.status(ticket_id) == "invalid"

    def add(self, kind: str, severity: Severity, message: str, **where: Any) -> None:
        self.findings.append(Finding(kind, severity, message, **where))

    def run(self) -> VerifyReport:
        unchecked = self.checker.unchecked
        if unchecked:
            self.add("unchecked", "info", "no retrieved chunk carries a ticket id: ticket ids were passed through unchecked")
        kept_claims: list[dict[str, Any]] = []
        dropped: set[int] = set()
        for index, claim in enumerate(self.answer.claims):
            kept = self.claim(index, claim)
            if kept is None:
                dropped.add(index)
            else:
                kept_claims.append(kept)
        named = self.prose(self.answer.text, "text") | self.prose(self.answer.summary, "summary")
        for where, text in self.answer.extra:
            self.mentions(text, part=where)
        if not self.answer.claims:
            self.units += len(named)  # a plain-text answer: every distinct id it names is one unit
        kept_results = self.results()
        self.refusal()
        on_empty = self.checker.on_empty
        return VerifyReport(
            answer=self.answer,
            valid_ids=self.valid,
            findings=self.findings,
            units=self.units,
            filtered_answer={
                "text": self.filtered(self.answer.text, on_empty),
                "summary": self.filtered(self.answer.summary, on_empty),
                "claims": kept_claims,
                "results": kept_results,
            },
            cited_ids=frozenset(self.cited),
            unchecked=unchecked,
            chunk_tickets=dict(self.sources.tickets),
            citation_chunks=self.citation_chunks,
            claim_citations=self.claim_citations,
            cited_sources=frozenset(self.cited_sources),
            dropped_claims=frozenset(dropped),
            nothing_retrieved=self.nothing_retrieved or self.below_min_score,
            citations=self.citations,
        )

    def filtered(self, text: str, on_empty: OnEmpty) -> str:
        if not self.dropping:
            return text
        return filter_text(text, self.valid, on_empty=on_empty, min_digits=self.options.min_id_digits)

    def refusal(self) -> None:
        """Seed 004: when nothing (relevant) was retrieved the answer should refuse, not assert."""
        if not (self.nothing_retrieved or self.below_min_score):
            return
        why = "nothing was retrieved" if self.nothing_retrieved else f"every chunk scored below {self.options.min_score}"
        asserts = bool(self.answer.claims or self.answer.results or self.cited or self.citations)
        if asserts:
            self.add("not_refused", "critical", f"{why}, yet the answer names tickets or cites sources: it should refuse")
        else:
            self.add("nothing_retrieved", "info", f"{why}: only a refusal is grounded")

    def mentions(self, text: str, claim: int | None = None, part: str | None = None) -> set[int]:
        """The ids a text names; each phantom id is reported once per answer."""
        if not text:
            return set()
        named = {m.ticket_id for m in _mentions(text, self.options.min_id_digits, self.valid)}
        for ticket_id in sorted(named):
            self.named(ticket_id, claim=claim, part=part or "claim")
        return named

    def named(self, ticket_id: int, **where: Any) -> None:
        """The answer names this ticket; a phantom id is reported once per answer."""
        self.cited.add(ticket_id)
        if self.is_phantom(ticket_id) and ticket_id not in self.reported_phantoms:
            self.reported_phantoms.add(ticket_id)
            self.add("phantom_ticket_id", "critical", f"ticket #{ticket_id} is named but was not retrieved", ticket_id=ticket_id, **where)

    def prose(self, text: str, part: str) -> set[int]:
        """Text outside claims: its ids, and its inline markers each checked as a citation of its sentence."""
        named = self.mentions(text, part=part)
        for marker in citation_markers(text) if text else []:
            self.units += 1
            citation = Citation(marker.source_id, position=marker.position)
            resolved = self.resolve(citation, part=part)
            if resolved:
                self.grounding(_sentence_before(text, marker.start), resolved, part=part)
        return named

    def resolve(self, cited: Citation, **where: Any) -> list[Chunk]:
        resolved = self.sources.resolve(cited)
        self.cited_sources.add(cited.source_id)
        self.cited_sources.update(c.id for c in resolved)
        if not resolved:
            message = f"source {cited.source_id!r} is not a retrieved chunk"
            if cited.position is not None:
                message += f" (the retrieval has {len(self.sources.ordered)})"
            self.add("phantom_source_id", "critical", message, source_id=cited.source_id, **where)
        return resolved

    def claim(self, index: int, claim: Claim) -> dict[str, Any] | None:
        """Check one claim; return it as it stays in the filtered answer (None: dropped)."""
        named = self.mentions(claim.text, index)
        markers = tuple(Citation(m.source_id, position=m.position) for m in citation_markers(claim.text))
        citations = claim.citations + markers
        self.claim_citations[index] = citations
        claim_chunks: list[Chunk] = []
        kept_citations: list[dict[str, Any]] = []
        for citation_index, citation in enumerate(citations):
            resolved = self.citation(index, citation_index, citation)
            claim_chunks += resolved
            if (resolved or not self.dropping) and citation_index < len(claim.citations):
                kept_citations.append({"source_id": citation.source_id, "quoted_span": citation.quoted_span})
        if not citations:
            self.units += 1
            self.add("uncited_claim", "warning", "claim has no citation", claim=index, part="claim")
        if claim_chunks:
            cited_tickets = self.sources.ticket_ids(claim_chunks)
            self.cited |= cited_tickets
            for ticket_id in sorted(named & self.valid - cited_tickets):
                shown = ", ".join(f"#{t}" for t in sorted(cited_tickets)) or "chunks without a ticket id"
                message = f"claim names ticket #{ticket_id} but cites {shown}"
                self.add("wrong_ticket", "warning", message, claim=index, ticket_id=ticket_id, part="claim")
        names_phantom = any(self.is_phantom(t) for t in named)
        lost_all_citations = bool(citations) and not claim_chunks
        if self.dropping and (names_phantom or lost_all_citations):
            return None
        return {"text": claim.text, "citations": kept_citations}

    def citation(self, claim_index: int, index: int, citation: Citation) -> list[Chunk]:
        """Resolve one citation, check its quote and how well it grounds the claim; return its chunks."""
        self.units += 1
        self.citations += 1
        where = {"claim": claim_index, "citation": index, "part": "claim"}
        resolved = self.resolve(citation, **where)
        self.citation_chunks[(claim_index, index)] = resolved
        if not resolved:
            return resolved
        if citation.quoted_span:
            similarity = max(quote_similarity(citation.quoted_span, self.sources.match_text(c)) for c in resolved)
            if similarity < self.options.quote_threshold:
                message = (
                    f"quoted span matches source {citation.source_id!r} only {similarity:.0%}"
                    f" (threshold {self.options.quote_threshold:.0%})"
                )
                self.add("quote_drift", "warning", message, source_id=citation.source_id, score=similarity, **where)
        self.grounding(self.answer.claims[claim_index].text, resolved, source_id=citation.source_id, **where)
        return resolved

    def grounding(self, text: str, chunks: list[Chunk], **where: Any) -> None:
        if text not in self.tokens:  # a claim is measured against each of its citations
            self.tokens[text] = claim_tokens(text)
        overlap = claim_overlap(self.tokens[text], [self.sources.match_text(c) for c in chunks])
        if overlap < self.options.grounding_threshold:
            message = (
                f"shares {overlap:.0%} of its content with the cited source"
                f" (threshold {self.options.grounding_threshold:.0%})"
            )
            self.add("weak_grounding", "warning", message, score=overlap, **where)

    def results(self) -> list[dict[str, Any]]:
        """Check ticket results; return those that stay in the filtered answer."""
        checked_results = [self.checker.check(result) for result in self.answer.results]
        for index, checked in enumerate(checked_results):
            self.units += 1
            where = {"result": index, "part": "result"}
            if checked.ticket_id is None:
                message = f"result {index + 1}: missing or malformed issue_id"
            else:
                self.cited.add(checked.ticket_id)
                message = f"result {index + 1}: ticket id #{checked.ticket_id} was not retrieved"
            if checked.status == "invalid":
                self.add("phantom_ticket_id", "critical", message, ticket_id=checked.ticket_id, **where)
            self.result_fields(index, checked.item, checked.ticket_id)
        return [dict(checked.item) for checked in checked_results if self.checker.keeps(checked)]

    def result_fields(self, index: int, result: Mapping[str, Any], ticket_id: int | None) -> None:
        """A result's other fields: its URL must name its own ticket, its subject must be that ticket's
        (not another retrieved ticket's: the mix-up of seed 002), and no other string may name a
        ticket that was not retrieved."""
        where = {"result": index, "part": "result"}
        for key, value in result.items():
            if key == "issue_id" or not isinstance(value, str):
                continue
            if key in ("url", "uri", "link"):
                url_ticket = uri_ticket_id(value, self.sources.uri_pattern)
                if url_ticket is not None and url_ticket != ticket_id:
                    message = f"result {index + 1}: {key} names #{url_ticket}, its issue_id #{ticket_id}"
                    self.add("url_mismatch", "warning", message, ticket_id=url_ticket, **where)
                    self.named(url_ticket, **where)
            elif key in ("subject", "title"):
                self.subject(index, value, ticket_id)
            else:
                self.mentions(value, part="result")

    def subject(self, index: int, subject: str, ticket_id: int | None) -> None:
        known = self.sources.subjects(ticket_id) if ticket_id is not None else set()
        if not known or any(_same_subject(subject, s) for s in known):
            return
        others = sorted(t for t in self.sources.by_ticket if t != ticket_id and any(_same_subject(subject, s) for s in self.sources.subjects(t)))
        also = f" (it is the subject of #{others[0]})" if others else ""
        message = f"result {index + 1}: subject is not that of #{ticket_id}{also}"
        self.add("subject_mismatch", "warning", message, result=index, ticket_id=ticket_id, part="result")


def _same_subject(given: str, known: str) -> bool:
    from rapidfuzz import fuzz  # lazily, as in quote_similarity

    a, b = normalize_for_match(given), normalize_for_match(known)
    return bool(a) and (a in b or b in a or fuzz.ratio(a, b) >= 80)
