"""Verification of an answer's citations against the retrieved chunks: the findings and the report.

The pure core: chunks and answers come in as the data types of verify.model (see verify.shapes for
reading Bedrock and plain JSON), findings go out as data.
"""

from __future__ import annotations

import re
from collections.abc import (
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field
from typing import Any

from anchorkit.errors import UsageError
from anchorkit.settings import ON_EMPTY, ON_INVALID, default
from anchorkit.untrusted import BIDI_CONTROLS, map_strings
from anchorkit.verify.folding import fold, without_bidi_controls
from anchorkit.verify.hosts import shown_hosts, url_host
from anchorkit.verify.ids import (
    IdChecker,
    Mention,
    checked_uri_pattern,
    citation_markers,
    compile_uri_pattern,
    filter_markers,
    filter_text,
    issue_id_of,
    iter_mentions,
    uri_ticket_id,
    valid_ids,
)
from anchorkit.verify.links import NoteReference, note_not_held, note_source, notes_named, shown_notes
from anchorkit.verify.model import (
    DEFAULT_GROUNDING_THRESHOLD,
    DEFAULT_MIN_ID_DIGITS,
    DEFAULT_QUOTE_THRESHOLD,
    DEFAULT_URI_PATTERN,
    UNVERIFIED_MARKER,
    Answer,
    Chunk,
    Citation,
    Claim,
    OnEmpty,
    OnInvalid,
    Severity,
    T,
)
from anchorkit.verify.similarity import (
    CitedSentences,
    claim_overlap,
    claim_tokens,
    normalize_for_match,
    quote_similarity,
)
from anchorkit.verify.sources import Sources

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
    on_invalid: OnInvalid = default("on_invalid")
    on_empty: OnEmpty = default("on_empty")
    min_id_digits: int = DEFAULT_MIN_ID_DIGITS
    min_score: float | None = default("min_score")  # every chunk scored below it: as if nothing was retrieved

    @classmethod
    def from_settings(cls, values: Mapping[str, Any]) -> VerifyOptions:
        """verify's or eval's settings, checked up front: a bad pattern or mode is a usage error (exit 2).
        eval has no --on-invalid: it keeps everything and only reports (``flag``)."""
        on_invalid = values.get("on_invalid", "flag")
        for name, value, allowed in (
            ("on_invalid", on_invalid, ON_INVALID),
            ("on_empty", values["on_empty"], ON_EMPTY),
        ):
            if value not in allowed:
                raise UsageError(f"--{name.replace('_', '-')} must be {' or '.join(allowed)}")
        return cls(
            checked_uri_pattern(values["uri_pattern"]),
            values["quote_threshold"],
            values["grounding_threshold"],
            on_invalid,
            values["on_empty"],
            values["min_id_digits"],
            values["min_score"],
        )


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
    claim_citations: dict[int, tuple[Citation, ...]] = field(
        default_factory=dict
    )  # claim -> its citations, markers included
    cited_sources: frozenset[str] = frozenset()  # source ids as cited, and the ids of the chunks they resolve to
    dropped_claims: frozenset[int] = frozenset()
    nothing_retrieved: bool = False
    citations: int = 0  # citations of claims (markers included)
    retrieved: tuple[Chunk, ...] = ()  # every chunk checked against, in order: what ``[n]`` markers count
    links: dict[Chunk, str] = field(default_factory=dict)  # chunk -> its url, where it is one to follow
    foreign_urls: dict[Chunk, int] = field(default_factory=dict)  # chunk -> the other ticket its url names
    chunk_notes: dict[Chunk, frozenset[int] | None] = field(default_factory=dict)  # chunk -> the notes it holds
    missing_notes: frozenset[tuple[int, int]] = frozenset()  # (ticket, note) cited but not retrieved
    cited_chunks: tuple[Chunk, ...] = ()  # the chunks citations resolved to, in order of first citation
    redmine_hosts: frozenset[str] = frozenset()  # where the retrieved chunks' Redmine is (verify.hosts.url_host)
    # text of the answer -> the (start, end, why) of each note in it that was not retrieved and each Redmine URL
    # on another host: what a page strikes through
    unverified_spans: dict[str, tuple[tuple[int, int, str], ...]] = field(default_factory=dict)

    @property
    def critical(self) -> int:
        return sum(f.severity == "critical" for f in self.findings)

    @property
    def warnings(self) -> int:
        return sum(f.severity == "warning" for f in self.findings)

    @property
    def grounding_score(self) -> float:
        if self.answer.claims and not self.citations:
            return 0.0  # claims without any citation are not grounded at all
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
            "sources": [self.source_json(chunk) for chunk in self.cited_chunks],
        }

    def source_json(self, chunk: Chunk) -> dict[str, Any]:
        """A cited chunk for ``--json``: where a person reads it (``url``: only a link to follow, the
        Redmine note where the metadata names it) and where it is stored (``uri``)."""
        notes = self.chunk_notes.get(chunk)
        return {
            "chunk_id": chunk.id,
            "ticket_ids": sorted(self.chunk_tickets.get(chunk.id, ())),
            "url": self.links.get(chunk),
            "uri": chunk.uri,
            "notes": None if notes is None else sorted(notes),
        }


def grounding_score(critical: int, warnings: int, units: int) -> float:
    """1 − (critical + 0.5·warnings) / units, clamped to 0..1; 1.0 when the answer claims nothing."""
    if units == 0 and critical == 0 and warnings == 0:
        return 1.0
    return max(0.0, 1.0 - (critical + 0.5 * warnings) / max(units, 1))


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
    (critical: a citation, ``[n]`` or ``[SRC:id]`` marker names no retrieved chunk), ``note_not_retrieved``
    (critical: a note of a retrieved ticket that no retrieved chunk holds, verify.links), ``not_refused``
    (critical: nothing was retrieved, or every chunk scored below ``min_score``, yet the answer asserts
    something), ``quote_drift``, ``weak_grounding`` (per citation), ``wrong_ticket``, ``url_mismatch`` (a
    result's url, or a retrieved chunk's url naming another ticket than the chunk's: not used),
    ``subject_mismatch``, ``uncited_claim`` (warnings), ``unchecked`` and ``nothing_retrieved`` (info).
    ``extra_valid_ids``: ids known valid from elsewhere (e.g. chunks of earlier retrievals); ``notes``:
    what reading the retrieval skipped (reported as ``skipped_chunk``, info).
    """
    sources = Sources([*answer.retrieved, *chunks], compile_uri_pattern(options.uri_pattern))
    verification = _Verification(answer, sources, context, extra_valid_ids, options)
    for note in [*answer.notes, *notes]:
        verification.add("skipped_chunk", "info", note, part="retrieval")
    return verification.run()


class _Verification:
    """One verify_citations call: walks the answer once, collecting findings and the filtered answer."""

    def __init__(
        self,
        answer: Answer,
        sources: Sources,
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
            options.min_score is not None
            and bool(scores)
            and all(s is not None and s < options.min_score for s in scores)
        )
        # Nothing retrieved is not the fallback for an unknown URI format: every id is then phantom. Nor
        # are chunks that name tickets in two ways that disagree: they are no source for either.
        disagreeing = not self.valid and bool(sources.conflicts)
        on_empty = "block" if self.nothing_retrieved or disagreeing else options.on_empty
        self.checker: IdChecker[Any] = IdChecker(self.valid, options.on_invalid, on_empty, issue_id_of)
        self.findings: list[Finding] = []
        self.cited: set[int] = set()
        self.cited_sources: set[str] = set()
        self.reported_phantoms: set[int] = set()
        self.units = 0
        self.citations = 0
        self.citation_chunks: dict[tuple[int, int], list[Chunk]] = {}
        self.claim_citations: dict[int, tuple[Citation, ...]] = {}
        self.tokens: dict[str, tuple[set[str], set[str]]] = {}
        self.cited_chunks: dict[Chunk, None] = {}  # in order of first citation
        self.reported_notes: set[tuple[int, int]] = set()
        self.missing_notes: set[tuple[int, int]] = set()
        self.reported_links: set[str] = set()
        # claims whose text names a note that was not retrieved or links to another host than the retrieval's
        self.unverified_claims: set[int] = set()
        self.unverified_spans: dict[str, dict[tuple[int, int], str]] = {}
        self.reordering = False  # the answer holds bidirectional controls (reordered())

    @property
    def dropping(self) -> bool:
        return self.options.on_invalid == "drop"

    def is_phantom(self, ticket_id: int | None) -> bool:
        return self.checker.status(ticket_id) == "invalid"

    def add(self, kind: str, severity: Severity, message: str, **where: Any) -> None:
        self.findings.append(Finding(kind, severity, message, **where))

    def run(self) -> VerifyReport:
        unchecked = self.checker.unchecked
        self.reordered()
        if unchecked:
            self.add(
                "unchecked", "info", "no retrieved chunk carries a ticket id: ticket ids were passed through unchecked"
            )
        for chunk, ticket_id in self.sources.foreign_urls.items():
            own = ", ".join(f"#{t}" for t in sorted(self.sources.tickets[chunk.id])) or "none"
            message = f"retrieved chunk {chunk.id!r}: its url names #{ticket_id}, not its own ticket ({own}): not used"
            self.add("url_mismatch", "warning", message, source_id=chunk.id, ticket_id=ticket_id, part="retrieval")
        for chunk, (metadata, uri) in self.sources.conflicts.items():
            message = (
                f"retrieved chunk {chunk.id!r}: its metadata ticket_id is #{metadata} but its source URI names"
                f" #{uri}: it is a source for neither"
            )
            self.add("ticket_conflict", "warning", message, source_id=chunk.id, ticket_id=metadata, part="retrieval")
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
        return VerifyReport(
            answer=self.answer,
            valid_ids=self.valid,
            findings=self.findings,
            units=self.units,
            filtered_answer={
                "text": self.filtered(self.answer.text),
                "summary": self.filtered(self.answer.summary),
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
            retrieved=tuple(self.sources.ordered),
            links=dict(self.sources.links),
            foreign_urls=dict(self.sources.foreign_urls),
            chunk_notes=dict(self.sources.notes),
            missing_notes=frozenset(self.missing_notes),
            cited_chunks=tuple(self.cited_chunks),
            redmine_hosts=self.sources.redmine_hosts,
            unverified_spans={
                text: tuple((*span, why) for span, why in spans.items())
                for text, spans in self.unverified_spans.items()
            },
        )

    def filtered(self, text: str) -> str:
        """A text of the answer as the filtered answer shows it (claims, text, summary)."""
        return self.without_phantom_ids(self.without_phantom_markers(self.shown(text)))

    def without_phantom_ids(self, text: str) -> str:
        """Under ``--on-invalid drop``: each mention of a phantom id replaced with the marker."""
        if not self.dropping:
            return text
        return filter_text(
            text,
            self.valid,
            on_empty=self.checker.on_empty,
            min_digits=self.options.min_id_digits,
            elsewhere=self.sources.elsewhere,
        )

    def without_phantom_markers(self, text: str) -> str:
        """Under ``--on-invalid drop``: each inline marker citing no retrieved chunk replaced with the marker."""
        if not self.dropping:
            return text
        return filter_markers(text, lambda m: bool(self.sources.resolve(Citation(m.source_id, position=m.position))))

    def reordered(self) -> None:
        """Bidirectional overrides, embeddings and isolates show a text in another order than it is checked
        (U+202E before "99321#" shows "#12399"): critical wherever they are; the filtered answer loses them."""
        located = list(self.answer_strings())
        self.reordering = BIDI_CONTROLS.search("".join(text for text, _ in located)) is not None
        for text, where in located if self.reordering else ():  # one search for most answers: none
            controls = sorted(set(BIDI_CONTROLS.findall(text)))
            if controls:
                shown = ", ".join(f"U+{ord(c):04X}" for c in controls)
                message = (
                    f"holds bidirectional controls ({shown}): it is shown in another order than it is checked"
                    " (they are removed from the filtered answer)"
                )
                self.add("bidi_control", "critical", message, **where)

    def shown(self, value: T) -> T:
        """A part of the filtered answer as it was checked: without bidirectional controls (reordered())."""
        return without_bidi_controls(value) if self.reordering else value

    def answer_strings(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every string of the answer, with where it is."""
        for index, claim in enumerate(self.answer.claims):
            yield claim.text, {"claim": index, "part": "claim"}
            for number, citation in enumerate(claim.citations):
                for text in (citation.source_id, citation.quoted_span or ""):
                    yield text, {"claim": index, "citation": number, "part": "claim"}
        yield self.answer.text, {"part": "text"}
        yield self.answer.summary, {"part": "summary"}
        for part, text in self.answer.extra:
            yield text, {"part": part}
        for index, result in enumerate(self.answer.results):
            for text in _strings(result):
                yield text, {"result": index, "part": "result"}

    def refusal(self) -> None:
        """When nothing (relevant) was retrieved the answer should refuse, not assert."""
        if not (self.nothing_retrieved or self.below_min_score):
            return
        why = (
            "nothing was retrieved" if self.nothing_retrieved else f"every chunk scored below {self.options.min_score}"
        )
        asserts = bool(self.answer.claims or self.answer.results or self.cited or self.citations)
        if asserts:
            self.add(
                "not_refused", "critical", f"{why}, yet the answer names tickets or cites sources: it should refuse"
            )
        else:
            self.add("nothing_retrieved", "info", f"{why}: only a refusal is grounded")

    def mentions(self, text: str, claim: int | None = None, part: str = "claim", **at: int) -> set[int]:
        """The ids a text names (``at``: its ``citation`` or ``result``); each phantom id is reported once
        per answer, as is each note that was not retrieved and each Redmine URL on another host."""
        view = fold(text)
        found = list(iter_mentions(view, self.options.min_id_digits, self.valid))
        if not found:  # most quotes and many claims
            return set()
        where = {"claim": claim, "part": part} | at
        named = {m.ticket_id for m in found}
        for ticket_id in sorted(named):
            self.named(ticket_id, **where)
        linked = []  # the mentions whose notes to check: a URL to another host leads to no retrieved note
        for mention in found:
            if mention.url and self.linked_elsewhere(text, mention, **where):
                self.unverified(text, mention.start, mention.end, "not on the Redmine the chunks come from", claim)
            else:
                linked.append(mention)
        for reference in notes_named(view, linked, self.options.min_id_digits, self.valid):
            if self.note_named(reference, **where):
                self.unverified(text, reference.start, reference.end, "this note was not retrieved", claim)
        return named

    def unverified(self, text: str, start: int, end: int, why: str, claim: int | None) -> None:
        """``text[start:end]`` names a note or links to a place nothing retrieved vouches for: its claim is
        dropped (the text or summary keeps it, reported), a page strikes it through."""
        self.unverified_spans.setdefault(text, {}).setdefault((start, end), why)
        if claim is not None:
            self.unverified_claims.add(claim)

    def linked_elsewhere(self, text: str, mention: Mention, **where: Any) -> bool:
        """A Redmine URL of a retrieved ticket on another host than the retrieval's Redmine: True, and
        reported once per URL (a phantom ticket's URL is its phantom id's)."""
        url = text[mention.start : mention.end]
        if self.is_phantom(mention.ticket_id) or self.checker.unchecked or not self.sources.elsewhere(url):
            return False
        if url not in self.reported_links:
            self.reported_links.add(url)
            host = url_host(url)
            message = (
                f"{url} leads to {'host ' + shown_hosts([host]) if host else 'no host a browser can reach'}, not to"
                f" the Redmine the retrieved chunks come from ({shown_hosts(self.sources.redmine_hosts)})"
            )
            self.add("foreign_link", "critical", message, ticket_id=mention.ticket_id, **where)
        return True

    def note_named(self, reference: NoteReference, **where: Any) -> bool:
        """The answer names a note of a ticket: True when the ticket was retrieved but that note was
        not. Each note is reported once per answer; a phantom ticket's notes are its phantom id's."""
        key = (reference.ticket_id, reference.note)
        if self.is_phantom(reference.ticket_id) or self.checker.unchecked:
            return False
        if key in self.reported_notes:
            return key in self.missing_notes
        self.reported_notes.add(key)
        chunks = self.sources.by_ticket.get(reference.ticket_id, [])
        # No chunk of it: the context of an earlier turn vouches for the ticket, and says nothing of notes.
        return bool(chunks) and not self.noted(chunks, reference.note, **where)

    def noted(self, chunks: list[Chunk], note: int, **where: Any) -> list[Chunk]:
        """The chunks that hold the cited note; all of them when it is not known which notes they hold
        (the note cannot be checked); none, with ``note_not_retrieved``, when the note is in none."""
        held, known = self.sources.holding(chunks, note)
        if held:
            return held
        if not known:
            return chunks
        tickets = sorted(self.sources.ticket_ids(chunks))
        shown = ", ".join(f"#{t}" for t in tickets) or "the cited chunk"
        where.setdefault("ticket_id", tickets[0] if tickets else None)
        # The message says what is true of the whole retrieval, not only of the chunks cited: the note
        # may be in another chunk of the ticket, or it may not be known whether it is.
        retrieved = list(dict.fromkeys(c for t in tickets for c in self.sources.by_ticket.get(t, [])))
        elsewhere, known_elsewhere = self.sources.holding(retrieved, note)
        if elsewhere or not known_elsewhere:
            notes = set().union(*(self.sources.notes.get(c) or () for c in chunks))
            message = note_not_held(note, shown, [c.id for c in chunks], notes, [c.id for c in elsewhere])
        else:
            self.missing_notes.update((t, note) for t in tickets)
            notes = set().union(*(self.sources.notes.get(c) or () for c in retrieved or chunks))
            message = f"note {note} of {shown} was not retrieved (the retrieved chunks hold {shown_notes(notes)})"
        self.add("note_not_retrieved", "critical", message, **where)
        return []

    def named(self, ticket_id: int, **where: Any) -> None:
        """The answer names this ticket; a phantom id is reported once per answer."""
        self.cited.add(ticket_id)
        if self.is_phantom(ticket_id) and ticket_id not in self.reported_phantoms:
            self.reported_phantoms.add(ticket_id)
            self.add(
                "phantom_ticket_id",
                "critical",
                f"ticket #{ticket_id} is named but was not retrieved",
                ticket_id=ticket_id,
                **where,
            )

    def prose(self, text: str, part: str) -> set[int]:
        """Text outside claims: its ids, and its inline markers each checked as a citation of its sentence."""
        named = self.mentions(text, part=part)
        sentences = CitedSentences(text) if text else None
        for marker in citation_markers(text) if text else []:
            self.units += 1
            citation = Citation(marker.source_id, position=marker.position)
            resolved = self.resolve(citation, part=part)
            if resolved and sentences is not None:
                self.grounding(sentences.before(marker.start), resolved, part=part)
        return named

    def resolve(self, cited: Citation, **where: Any) -> list[Chunk]:
        resolved = self.sources.resolve(cited)
        self.cited_sources.add(cited.source_id)
        self.cited_sources.update(c.id for c in resolved)
        if not resolved:
            message = f"source {cited.source_id!r} is not a retrieved chunk"
            if cited.position is not None:
                message += f" (the retrieval has {len(self.sources.ordered)})"
            elif self.sources.elsewhere(cited.source_id):
                message += f" (the retrieved chunks come from {shown_hosts(self.sources.redmine_hosts)})"
            self.add("phantom_source_id", "critical", message, source_id=cited.source_id, **where)
            return resolved
        note = cited_note(cited)
        if note is not None:
            resolved = self.noted(resolved, note, source_id=cited.source_id, **where)
        self.cited_chunks.update(dict.fromkeys(resolved))
        return resolved

    def citation_link(self, citation: Citation, chunks: list[Chunk]) -> dict[str, Any]:
        """What a kept citation of the filtered answer gains: the note it names, the url to follow (the
        note's, else its chunk's, else its ticket's page when its chunks are of one issue)."""
        extra: dict[str, Any] = {}
        note = cited_note(citation)
        if note is not None:
            extra["note"] = note
        if not self.sources.links:  # nothing retrieved has a link (an s3 layout without urls)
            return extra
        links = [self.sources.links[c] for c in chunks if c in self.sources.links]
        pages = {link.split("#", 1)[0] for link in links}
        if note is not None and len(pages) == 1:
            extra["url"] = f"{pages.pop()}#note-{note}"
        elif len(links) == 1 and len(chunks) == 1:
            extra["url"] = links[0]
        elif len(pages) == 1:
            extra["url"] = pages.pop()
        return extra

    def claim(self, index: int, claim: Claim) -> dict[str, Any] | None:
        """Check one claim; return it as it stays in the filtered answer (None: dropped)."""
        named = self.mentions(claim.text, index)
        # A quote is the answer's text too: an id in it is checked as in the claim (a chunk's free-text
        # mention vouches for nothing), but names no ticket the claim is about (no wrong_ticket).
        quoted = set().union(
            *(self.mentions(c.quoted_span or "", index, citation=i) for i, c in enumerate(claim.citations))
        )
        markers = tuple(Citation(m.source_id, position=m.position) for m in citation_markers(claim.text))
        citations = claim.citations + markers
        self.claim_citations[index] = citations
        claim_chunks: list[Chunk] = []
        kept_citations: list[dict[str, Any]] = []
        for citation_index, citation in enumerate(citations):
            resolved = self.citation(index, citation_index, citation)
            claim_chunks += resolved
            if (resolved or not self.dropping) and citation_index < len(claim.citations):
                kept = {"source_id": self.shown(citation.source_id), "quoted_span": self.shown(citation.quoted_span)}
                kept_citations.append(kept | self.citation_link(citation, resolved))
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
        names_phantom = any(self.is_phantom(t) for t in named | quoted) or index in self.unverified_claims
        lost_all_citations = bool(citations) and not claim_chunks
        if self.dropping and (names_phantom or lost_all_citations):
            return None
        return {"text": self.filtered(claim.text), "citations": kept_citations}

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
        return [self.filtered_result(c.item) for c in checked_results if self.checker.keeps(c)]

    def filtered_result(self, result: Mapping[str, Any]) -> dict[str, Any]:
        """A kept result as the filtered answer shows it: under ``--on-invalid drop`` every phantom id in
        its strings, nested ones too, replaced with the marker, as is a url naming a phantom ticket by the
        knowledge base's URI layout (``s3://kb/tickets/12399.md``), which no mention scan reads."""
        shown = self.shown(dict(result))
        if not self.dropping:
            return shown
        for key in _URL_KEYS:
            value = shown.get(key)
            if isinstance(value, str) and self.is_phantom(uri_ticket_id(value, self.sources.uri_pattern)):
                shown[key] = UNVERIFIED_MARKER
        return map_strings(shown, self.without_phantom_ids)

    def result_fields(self, index: int, result: Mapping[str, Any], ticket_id: int | None) -> None:
        """A result's other fields: its URL must name its own ticket, its subject must be that ticket's
        (not another retrieved ticket's: a model that swapped two tickets' subjects), and no other string,
        nested in lists and objects too, may name a ticket that was not retrieved."""
        where = {"result": index, "part": "result"}
        for key, value in result.items():
            if key == "issue_id":
                continue
            if key in _URL_KEYS and isinstance(value, str):
                url_ticket = uri_ticket_id(value, self.sources.uri_pattern)
                if url_ticket is not None and url_ticket != ticket_id:
                    message = f"result {index + 1}: {key} names #{url_ticket}, its issue_id #{ticket_id}"
                    self.add("url_mismatch", "warning", message, ticket_id=url_ticket, **where)
                    self.named(url_ticket, **where)
            elif key in ("subject", "title") and isinstance(value, str):
                self.subject(index, value, ticket_id)
            for text in _strings({key: value}):
                self.mentions(text, part="result", result=index)

    def subject(self, index: int, subject: str, ticket_id: int | None) -> None:
        known = self.sources.subjects(ticket_id) if ticket_id is not None else set()
        if not known or any(_same_subject(subject, s) for s in known):
            return
        others = sorted(
            t
            for t in self.sources.by_ticket
            if t != ticket_id and any(_same_subject(subject, s) for s in self.sources.subjects(t))
        )
        also = f" (it is the subject of #{others[0]})" if others else ""
        message = f"result {index + 1}: subject is not that of #{ticket_id}{also}"
        self.add("subject_mismatch", "warning", message, result=index, ticket_id=ticket_id, part="result")


# The fields of a ticket result that hold its link.
_URL_KEYS = ("url", "uri", "link")


def _strings(value: Any) -> Iterator[str]:
    """The strings of a JSON value (keys too), depth first."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def cited_note(citation: Citation) -> int | None:
    """The note a citation names: its own ``note``, else its source id's (``"12345#note-3"``)."""
    if citation.note is not None:
        return citation.note
    reference = note_source(citation.source_id)
    return reference.note if reference is not None else None


def _same_subject(given: str, known: str) -> bool:
    from rapidfuzz import fuzz  # lazily, as in quote_similarity

    a, b = normalize_for_match(given), normalize_for_match(known)
    return bool(a) and (a in b or b in a or fuzz.ratio(a, b) >= 80)
