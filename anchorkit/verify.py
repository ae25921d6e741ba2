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

import re
import unicodedata
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar


from anchorkit.anchors import DEFAULT_LABEL, identified_ticket_ids

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

# A ticket id as an answer writes it: "#12345", "＃12345", "チケット #12345". Not after "&" (an HTML
# entity "&#123;"), "/" or an ASCII word character (a URL fragment "page#12"); at most 12 digits.
_MENTION = re.compile(r"(?<![&/0-9A-Za-z_])[#＃](?P<id>\d{1,12})(?!\d)")
# The same with the label words in front, removed before measuring a claim's overlap: otherwise the
# label ("チケット") would count as shared content with every anchored chunk.
_LABELLED_MENTION = re.compile(
    rf"(?:(?:{re.escape(DEFAULT_LABEL)}|ticket|issue)[ \t\u3000]*)?" + _MENTION.pattern, re.IGNORECASE
)
# A text that ends in a possibly incomplete mention ("…#123" may still become "…#12345").
_TRAILING_PARTIAL_MENTION = re.compile(r"[#＃]\d*\Z")
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

    ``ticket_id``: the ticket id the knowledge base stored with the document (the ``ticket_id``
    attribute of anchorkit's Bedrock sidecar), when the retrieval reports it.
    """

    id: str
    text: str
    uri: str | None = None
    ticket_id: int | None = None


@dataclass(frozen=True)
class Citation:
    """A claim's reference to a retrieved chunk, optionally quoting it."""

    source_id: str
    quoted_span: str | None = None


@dataclass(frozen=True)
class Claim:
    text: str
    citations: tuple[Citation, ...] = ()


AnswerShape = Literal["claims", "results", "text", "retrieve_and_generate"]


@dataclass(frozen=True)
class Answer:
    """An answer in any accepted shape, normalised.

    ``text``: free text outside claims (a plain-text answer, a RetrieveAndGenerate ``output.text``, a
    structured answer's top-level ``answer``); ``claims``: structured claims; ``results``: ticket
    result objects ``{"issue_id": …}`` (kept as given, they are the product).
    """

    shape: AnswerShape
    text: str = ""
    claims: tuple[Claim, ...] = ()
    results: tuple[Mapping[str, Any], ...] = ()


# --------------------------------------------------------------------------- valid ids


def compile_uri_pattern(pattern: str | re.Pattern[str]) -> re.Pattern[str]:
    """The operator's URI pattern (configuration, never untrusted text); exactly one group: the id."""
    compiled = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern)
    if compiled.groups != 1:
        raise ValueError(f"URI pattern {compiled.pattern!r} must have exactly one group (the ticket id)")
    return compiled


def uri_ticket_id(uri: str | None, uri_pattern: re.Pattern[str]) -> int | None:
    if not uri:
        return None
    match = uri_pattern.search(uri)
    if match is None or not match.group(1).isdigit():
        return None
    return int(match.group(1))


def chunk_ticket_ids(chunk: Chunk, uri_pattern: re.Pattern[str]) -> frozenset[int]:
    """The tickets a chunk is a source for: its document's ticket (from its URI or metadata), else
    the ids of the genuine anchors and title lines in its text.

    When the document is known, its anchors are not consulted: a document carries anchors of its own
    ticket only, so an anchor naming another ticket there can only be a forgery that a chunker laid
    open (content "… > チケット #99: …" cut right before the ">" starts a chunk with an anchor line).
    """
    stored = {i for i in (uri_ticket_id(chunk.uri, uri_pattern), chunk.ticket_id) if i is not None}
    return frozenset(stored or identified_ticket_ids(chunk.text))


def valid_ids(
    chunks: Iterable[Chunk],
    uri_pattern: str | re.Pattern[str] = DEFAULT_URI_PATTERN,
    context: str | Iterable[str] | None = None,
) -> set[int]:
    """Ticket ids an answer may name: those of the retrieved chunks, plus those of the context.

    ``context`` is the context message of a later conversation turn (the text the backend put into
    the prompt from earlier retrievals), or several of them: only its genuine anchors and title lines
    count, exactly as for a chunk's text.
    """
    pattern = compile_uri_pattern(uri_pattern)
    ids: set[int] = set()
    for chunk in chunks:
        ids |= chunk_ticket_ids(chunk, pattern)
    contexts = [context] if isinstance(context, str) else list(context or ())
    for text in contexts:
        ids |= identified_ticket_ids(text)
    return ids


# --------------------------------------------------------------------------- filtering


def parse_ticket_id(value: object) -> int | None:
    """A ticket id given as 12345, 12345.0 (Bedrock returns numeric metadata as floats), "12345" or
    "#12345"; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, str):
        digits = value.strip().removeprefix("#").removeprefix("＃")
        if digits.isdigit() and digits.isascii() and len(digits) <= 12:
            return int(digits)
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
    ticket_id: int
    start: int
    end: int


def mentioned_ids(text: str) -> list[Mention]:
    """The ticket ids a text names (``#12345``, ``チケット #12345``, full-width ``＃``), in order."""
    return [Mention(int(m["id"]), m.start(), m.end()) for m in _MENTION.finditer(text)]


def filter_text(
    text: str, valid: set[int] | frozenset[int], *, on_empty: OnEmpty = "pass", marker: str = UNVERIFIED_MARKER
) -> str:
    """Replace every mention of a ticket id that is not valid with ``marker``.

    With an empty ``valid`` set, ``on_empty="pass"`` leaves the text as it is (the caller flags it)
    and ``"block"`` replaces every mention.
    """
    if not valid and on_empty == "pass":
        return text
    return _MENTION.sub(lambda m: m[0] if int(m["id"]) in valid else marker, text)


async def filter_text_stream(
    deltas: AsyncIterable[str],
    valid: set[int] | frozenset[int],
    *,
    on_empty: OnEmpty = "pass",
    marker: str = UNVERIFIED_MARKER,
) -> AsyncIterator[str]:
    """filter_text for a token stream: a mention cut between two deltas is held back until complete,
    so the output equals ``filter_text`` of the whole text."""
    pending = ""
    previous = ""  # the last character already emitted: the mention pattern looks behind one character
    async for delta in deltas:
        pending += delta
        hold = _TRAILING_PARTIAL_MENTION.search(pending)
        ready, pending = (pending[: hold.start()], pending[hold.start() :]) if hold else (pending, "")
        if ready:
            yield filter_text(previous + ready, valid, on_empty=on_empty, marker=marker)[len(previous) :]
            previous = ready[-1]
    if pending:
        yield filter_text(previous + pending, valid, on_empty=on_empty, marker=marker)[len(previous) :]


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


def claim_overlap(claim_text: str, sources: Sequence[str | MatchText]) -> float:
    """The share of the claim's tokens (ticket-id mentions removed) that occur in any of the sources.

    A CJK bigram occurs in a source when it is a substring of its text (two adjacent CJK characters
    there are one of its bigrams); a word when it is one of the source's words.
    """
    bigrams, words = _split_tokens(_LABELLED_MENTION.sub(" ", claim_text))
    if not bigrams and not words:
        return 1.0
    prepared = [s if isinstance(s, MatchText) else MatchText.of(s) for s in sources]
    found = sum(any(b in p.folded for p in prepared) for b in bigrams)
    found += sum(any(w in p.words for p in prepared) for w in words)
    return found / (len(bigrams) + len(words))


# --------------------------------------------------------------------------- verification


@dataclass(frozen=True)
class Finding:
    """One problem. ``claim``/``citation``/``result`` are 0-based positions in the answer."""

    kind: str
    severity: Severity
    message: str
    claim: int | None = None
    citation: int | None = None
    result: int | None = None
    source_id: str | None = None
    ticket_id: int | None = None
    score: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "severity": self.severity,
            "message": self.message,
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

    @property
    def critical(self) -> int:
        return sum(f.severity == "critical" for f in self.findings)

    @property
    def warnings(self) -> int:
        return sum(f.severity == "warning" for f in self.findings)

    @property
    def grounding_score(self) -> float:
        return grounding_score(self.critical, self.warnings, self.units)

    def to_json(self) -> dict[str, Any]:
        """The stable ``--json`` schema (README, section verify)."""
        return {
            "answer_shape": self.answer.shape,
            "valid_ids": sorted(self.valid_ids),
            "cited_ids": sorted(self.cited_ids),
            "unchecked": self.unchecked,
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
        self.by_id: dict[str, list[Chunk]] = {}
        self.by_uri: dict[str, list[Chunk]] = {}
        self.by_ticket: dict[int, list[Chunk]] = {}
        self.tickets: dict[str, frozenset[int]] = {}
        self._prepared: dict[int, MatchText] = {}
        for chunk in chunks:
            ids = chunk_ticket_ids(chunk, uri_pattern)
            self.tickets[chunk.id] = self.tickets.get(chunk.id, frozenset()) | ids
            self.by_id.setdefault(chunk.id, []).append(chunk)
            if chunk.uri:
                self.by_uri.setdefault(chunk.uri, []).append(chunk)
            for ticket_id in ids:
                self.by_ticket.setdefault(ticket_id, []).append(chunk)

    def resolve(self, source_id: str) -> list[Chunk]:
        """A citation's source: a chunk id, else a source URI, else a ticket id ("12345"/"#12345")."""
        if source_id in self.by_id:
            return self.by_id[source_id]
        if source_id in self.by_uri:
            return self.by_uri[source_id]
        ticket_id = parse_ticket_id(source_id)
        return self.by_ticket.get(ticket_id, []) if ticket_id is not None else []

    def ticket_ids(self, chunks: Iterable[Chunk]) -> set[int]:
        return set().union(*(self.tickets[c.id] for c in chunks))

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
) -> VerifyReport:
    """Check an answer against the chunks retrieved for it.

    Findings (severity): ``phantom_ticket_id`` (critical: the answer names an id no retrieved chunk or
    context vouches for), ``phantom_source_id`` (critical: a citation names no retrieved chunk),
    ``quote_drift`` (warning: the quoted span is not in the cited chunk), ``weak_grounding`` (warning:
    the claim shares too little with its cited chunks), ``wrong_ticket`` (warning: the claim names a
    valid ticket id that is not the cited chunks' ticket), ``uncited_claim`` (warning), and
    ``unchecked`` (info: nothing retrieved carried a ticket id, so ids could not be checked).
    ``extra_valid_ids``: ids known valid from elsewhere (e.g. chunks of earlier retrievals).
    """
    sources = _Sources(chunks, compile_uri_pattern(options.uri_pattern))
    return _Verification(answer, sources, context, extra_valid_ids, options).run()


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
        self.checker: _IdChecker[Any] = _IdChecker(self.valid, options.on_invalid, options.on_empty, issue_id_of)
        self.findings: list[Finding] = []
        self.cited: set[int] = set()
        self.reported_phantoms: set[int] = set()
        self.units = 0
        self.citation_chunks: dict[tuple[int, int], list[Chunk]] = {}

    @property
    def dropping(self) -> bool:
        return self.options.on_invalid == "drop"

    def is_phantom(self, ticket_id: int | None) -> bool:
        return self.checker.status(ticket_id) == "invalid"

    def run(self) -> VerifyReport:
        unchecked = self.checker.unchecked
        if unchecked:
            self.findings.append(
                Finding("unchecked", "info", "no retrieved chunk carries a ticket id: ticket ids were passed through unchecked")
            )
        kept_claims = [kept for index, claim in enumerate(self.answer.claims) if (kept := self.claim(index, claim))]
        named_in_text = self.mentions(self.answer.text, None)
        if not self.answer.claims:
            self.units += len(named_in_text)  # a plain-text answer: every distinct id it names is one unit
        kept_results = self.results()
        text = self.answer.text
        if self.dropping:
            text = filter_text(text, self.valid, on_empty=self.options.on_empty)
        return VerifyReport(
            answer=self.answer,
            valid_ids=self.valid,
            findings=self.findings,
            units=self.units,
            filtered_answer={"text": text, "claims": kept_claims, "results": kept_results},
            cited_ids=frozenset(self.cited),
            unchecked=unchecked,
            chunk_tickets=dict(self.sources.tickets),
            citation_chunks=self.citation_chunks,
        )

    def mentions(self, text: str, claim: int | None) -> set[int]:
        """The ids a text names; each phantom id is reported once per answer."""
        named = {m.ticket_id for m in mentioned_ids(text)}
        for ticket_id in sorted(named):
            if self.is_phantom(ticket_id) and ticket_id not in self.reported_phantoms:
                self.reported_phantoms.add(ticket_id)
                message = f"ticket #{ticket_id} is named but was not retrieved"
                self.findings.append(Finding("phantom_ticket_id", "critical", message, claim=claim, ticket_id=ticket_id))
        self.cited |= named
        return named

    def claim(self, index: int, claim: Claim) -> dict[str, Any] | None:
        """Check one claim; return it as it stays in the filtered answer (None: dropped)."""
        named = self.mentions(claim.text, index)
        claim_chunks: list[Chunk] = []
        kept_citations: list[dict[str, Any]] = []
        for citation_index, citation in enumerate(claim.citations):
            resolved = self.citation(index, citation_index, citation)
            claim_chunks += resolved
            if resolved or not self.dropping:
                kept_citations.append({"source_id": citation.source_id, "quoted_span": citation.quoted_span})
        if not claim.citations:
            self.units += 1
            self.findings.append(Finding("uncited_claim", "warning", "claim has no citation", claim=index))
        if claim_chunks:
            cited_tickets = self.sources.ticket_ids(claim_chunks)
            self.cited |= cited_tickets
            self.grounding(index, claim, claim_chunks)
            for ticket_id in sorted(named & self.valid - cited_tickets):
                shown = ", ".join(f"#{t}" for t in sorted(cited_tickets)) or "chunks without a ticket id"
                message = f"claim names ticket #{ticket_id} but cites {shown}"
                self.findings.append(Finding("wrong_ticket", "warning", message, claim=index, ticket_id=ticket_id))
        names_phantom = any(self.is_phantom(t) for t in named)
        lost_all_citations = bool(claim.citations) and not kept_citations
        if self.dropping and (names_phantom or lost_all_citations):
            return None
        return {"text": claim.text, "citations": kept_citations}

    def citation(self, claim_index: int, index: int, citation: Citation) -> list[Chunk]:
        """Resolve one citation and check its quote; return the chunks it names (none: phantom)."""
        self.units += 1
        resolved = self.sources.resolve(citation.source_id)
        self.citation_chunks[(claim_index, index)] = resolved
        source_id = citation.source_id
        if not resolved:
            message = f"source {source_id!r} is not a retrieved chunk"
            self.findings.append(
                Finding("phantom_source_id", "critical", message, claim=claim_index, citation=index, source_id=source_id)
            )
        elif citation.quoted_span:
            similarity = max(quote_similarity(citation.quoted_span, self.sources.match_text(c)) for c in resolved)
            if similarity < self.options.quote_threshold:
                message = (
                    f"quoted span matches source {source_id!r} only {similarity:.0%}"
                    f" (threshold {self.options.quote_threshold:.0%})"
                )
                self.findings.append(
                    Finding(
                        "quote_drift", "warning", message, claim=claim_index, citation=index, source_id=source_id, score=similarity
                    )
                )
        return resolved

    def grounding(self, index: int, claim: Claim, claim_chunks: list[Chunk]) -> None:
        overlap = claim_overlap(claim.text, [self.sources.match_text(c) for c in claim_chunks])
        if overlap < self.options.grounding_threshold:
            message = (
                f"claim shares {overlap:.0%} of its content with its sources"
                f" (threshold {self.options.grounding_threshold:.0%})"
            )
            self.findings.append(Finding("weak_grounding", "warning", message, claim=index, score=overlap))

    def results(self) -> list[dict[str, Any]]:
        """Check ticket results; return those that stay in the filtered answer."""
        checked_results = [self.checker.check(result) for result in self.answer.results]
        for index, checked in enumerate(checked_results):
            self.units += 1
            if checked.ticket_id is None:
                message = f"result {index}: missing or malformed issue_id"
            else:
                self.cited.add(checked.ticket_id)
                message = f"result {index}: ticket id #{checked.ticket_id} was not retrieved"
            if checked.status == "invalid":
                self.findings.append(
                    Finding("phantom_ticket_id", "critical", message, result=index, ticket_id=checked.ticket_id)
                )
        return [dict(checked.item) for checked in checked_results if self.checker.keeps(checked)]
