"""The verify and eval pages: each answer with numbered citations, its sources and its findings.

A page a person can file: the record of how it was made (when, which anchorkit, which files, which
thresholds) and the verdict come first; then the answer, each claim with one numbered mark per
cited source, its quotes printed under it, phantom ticket ids and sources struck through and
explained in words (not only in a tooltip); then every source with its title, its link (the
Redmine note where the chunk's metadata has a ``url``) and its text as rendered Markdown; then the
findings. Nothing scrolls inside the page and the print style sheet shows all of it.

Answers and chunks are untrusted: every piece of them is escaped; chunk Markdown is rendered by
markdown-it with raw HTML off (a ``<script>`` in a ticket is shown as text), images off (nothing
loads) and markdown-it's link check (no ``javascript:``/``data:`` links); only ``http(s)`` source
URLs become links.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from markdown_it import MarkdownIt

from anchorkit import pages
from anchorkit.pages import escape, link, plural
from anchorkit.verify.citations import Finding, VerifyOptions, VerifyReport, cited_note
from anchorkit.verify.evaluation import CaseResult, EvalGates, EvalSummary
from anchorkit.verify.folding import without_bidi_controls
from anchorkit.verify.hosts import leads_elsewhere
from anchorkit.verify.ids import MARKER, chunk_subjects, mentioned_ids
from anchorkit.verify.links import shown_notes
from anchorkit.verify.model import Chunk, Citation

_CSS = """
.facts span{display:inline-block;margin-right:1.2rem}
ol.claims>li{margin:.6rem 0}.claim p{margin:.2rem 0}.text{white-space:pre-wrap}
.dropped>p.claim-text{text-decoration:line-through;color:#777}
del.phantom{color:#b00020;text-decoration-thickness:2px}
blockquote.quote{margin:.2rem 0 .2rem 1.2rem;padding-left:.6rem;border-left:3px solid #9ab;font-size:.92rem}
blockquote.quote.drift{border-color:#a15c00}
sup a{text-decoration:none;font-weight:600;padding:0 .1rem}
a.ok,.check.ok{color:#0b5cad}a.drift,.drift .source-head,.badge.drift{color:#a15c00}
a.phantom,.phantom .source-head,.badge.phantom,td.phantom,tr.phantom td:first-child{color:#b00020}
tr.critical td{color:#b00020}tr.warning td{color:#a15c00}td.ticket{white-space:nowrap}
.problems{margin:.2rem 0 .4rem;padding-left:1.2rem;font-size:.9rem}
.problems .critical{color:#b00020}.problems .warning{color:#a15c00}.problems .info{color:#555}
.badge{font-size:.75rem;border-radius:.3rem;padding:0 .35rem;margin-left:.3rem;border:1px solid currentColor}
ol.sources{padding-left:0;list-style:none}
ol.sources>li{border:1px solid #ddd;border-radius:.4rem;padding:.5rem .8rem;margin:.6rem 0}
ol.sources>li.phantom{border-color:#b00020;background:#fdf3f4}
.source-head{font-weight:600}.source-meta{font-size:.85rem;color:#555}
.chunk{border-top:1px dashed #ccc;margin-top:.4rem;padding-top:.2rem;font-size:.92rem}
.chunk h1,.chunk h2,.chunk h3,.chunk h4,.chunk h5,.chunk h6{font-size:1rem;margin:.6rem 0 .2rem;border:0}
.chunk blockquote{margin:.3rem 0;padding:0 .6rem;border-left:3px solid #2b7bb9;color:#2b5d86;background:#f2f7fb}
.chunk table{font-size:.88rem}
table.results td.phantom{text-decoration:line-through}
"""


@dataclass(frozen=True)
class PageRecord:
    """How a page was made, for its record: the input files by role (``retrieval``, ``answer``,
    ``context``, ``cases``) and the options the answers were checked with."""

    inputs: tuple[tuple[str, str], ...] = ()
    options: VerifyOptions = field(default_factory=VerifyOptions)
    generated_at: str | None = None  # default: when the page is rendered

    @classmethod
    def of_files(
        cls, options: VerifyOptions, *files: tuple[str, Path | None], generated_at: str | None = None
    ) -> PageRecord:
        """A record naming each file by its absolute path (``-`` is stdin); files given as None are left out."""
        inputs = tuple(
            (role, "<stdin>" if str(path) == "-" else str(path.absolute())) for role, path in files if path is not None
        )
        return cls(inputs, options, generated_at)

    def rows(self) -> list[tuple[str, str]]:
        options = self.options
        pattern = getattr(options.uri_pattern, "pattern", options.uri_pattern)
        return [
            *pages.provenance(self.generated_at),
            *self.inputs,
            ("ticket id in a source URI", f"{pattern} (--uri-pattern)"),
            (
                "quote drift below",
                f"{options.quote_threshold:.0%} similarity (--quote-threshold {options.quote_threshold})",
            ),
            (
                "weak grounding below",
                f"{options.grounding_threshold:.0%} of a claim's words in its source "
                f"(--grounding-threshold {options.grounding_threshold})",
            ),
            ("a bare #n is a ticket id from", f"{options.min_id_digits} digits (--min-id-digits)"),
            (
                "retrieval counts as empty",
                "never" if options.min_score is None else f"every chunk scored below {options.min_score} (--min-score)",
            ),
            (
                "phantoms in the filtered answer",
                f"{'removed' if options.on_invalid == 'drop' else 'kept, flagged'} (--on-invalid {options.on_invalid})",
            ),
            (
                "no ticket id in the retrieval",
                ("ids pass unchecked" if options.on_empty == "pass" else "every id is a phantom")
                + f" (--on-empty {options.on_empty})",
            ),
        ]


_MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable("table").disable("image")
_FLAG_RANK = {"ok": 0, "drift": 1, "phantom": 2}
_KIND_WORDS = {
    "phantom_ticket_id": "phantom ticket id",
    "phantom_source_id": "phantom source",
    "not_refused": "should have refused",
    "quote_drift": "quote drift",
    "weak_grounding": "weak grounding",
    "wrong_ticket": "wrong ticket",
    "url_mismatch": "URL of another ticket",
    "ticket_conflict": "metadata and URI disagree",
    "note_not_retrieved": "note not retrieved",
    "foreign_link": "link to another host",
    "bidi_control": "shown reordered",
    "subject_mismatch": "subject of another ticket",
    "uncited_claim": "no citation",
    "unchecked": "unchecked",
    "nothing_retrieved": "nothing retrieved",
    "skipped_chunk": "skipped chunk",
}


def _words(kind: str) -> str:
    return _KIND_WORDS.get(kind, kind.replace("_", " "))


def _tickets(ticket_ids: Iterable[int]) -> str:
    return ", ".join(f"#{i}" for i in sorted(ticket_ids)) or "none"


def render_markdown(text: str) -> str:
    """A chunk's Markdown as HTML: raw HTML in it is escaped, images are not loaded."""
    return _MARKDOWN.render(text)


class _Page:
    """One answer's part of a page: its sources numbered in order of first citation (one number per
    source however often it is cited); ``prefix`` keeps element ids apart on a page of many answers."""

    def __init__(self, report: VerifyReport, prefix: str, level: int) -> None:
        self.report = report
        self.prefix = prefix
        self.h = f"h{level}"
        self.numbers: dict[tuple[str, ...], int] = {}
        self.labels: dict[tuple[str, ...], str] = {}
        self.chunks: dict[tuple[str, ...], list[Chunk]] = {}
        self.flags: dict[tuple[str, ...], str] = {}
        self.missing_note: dict[tuple[str, ...], str] = {}  # a cited note that was not retrieved: why
        self.phantom_ids = {
            f.ticket_id for f in report.findings if f.kind == "phantom_ticket_id" and f.ticket_id is not None
        }
        self.positions = {chunk: index + 1 for index, chunk in enumerate(report.retrieved)}

    @staticmethod
    def key(citation: Citation, chunks: list[Chunk]) -> tuple[str, ...]:
        """What one number stands for: the chunks cited, or what a citation of nothing wrote."""
        return tuple(f"{c.id}\0{c.uri}" for c in chunks) or ("\0phantom", citation.source_id, str(citation.note))

    def number(self, citation: Citation, chunks: list[Chunk], flag: str) -> int:
        key = self.key(citation, chunks)
        if key not in self.numbers:
            self.numbers[key] = len(self.numbers) + 1
            self.labels[key] = citation.source_id + (f" (note {citation.note})" if citation.note is not None else "")
            self.chunks[key] = chunks
        # A source cited several times shows its worst state.
        self.flags[key] = max(self.flags.get(key, "ok"), flag, key=_FLAG_RANK.__getitem__)
        return self.numbers[key]

    def heading(self, text: str) -> str:
        return f"<{self.h}>{escape(text)}</{self.h}>"

    # ------------------------------------------------------------------ the answer

    def marked(self, text: str, markers: bool = True) -> str:
        """Escaped text: phantom ticket ids struck through; inline ``[n]`` markers linked to the n-th
        retrieved chunk (struck through when there is none), or dropped when ``markers`` is False
        (a claim's markers are shown as its numbered marks)."""
        spans: list[tuple[int, int, str]] = []
        for mention in mentioned_ids(text, known=self.phantom_ids):
            if mention.ticket_id in self.phantom_ids:
                shown = escape(text[mention.start : mention.end])
                spans.append((mention.start, mention.end, f'<del class="phantom" title="not retrieved">{shown}</del>'))
        # Where verify read a note that was not retrieved, or a Redmine URL on another host.
        for start, end, why in self.report.unverified_spans.get(text, ()):
            spans.append((start, end, f'<del class="phantom" title="{escape(why)}">{escape(text[start:end])}</del>'))
        for match in MARKER.finditer(text):
            if any(start < match.end() and match.start() < end for start, end, _ in spans):
                continue
            spans.append(
                (
                    match.start(),
                    match.end(),
                    self.inline_marker(match[0], match["numbers"], match["src"]) if markers else "",
                )
            )
        pieces: list[str] = []
        position = 0
        for start, end, replacement in sorted(spans):
            if start < position:  # inside one already struck (a note after the fragment of a URL struck whole)
                continue
            pieces += [escape(text[position:start]), replacement]
            position = end
        pieces.append(escape(text[position:]))
        return "".join(pieces)

    def inline_marker(self, written: str, numbers: str | None, source: str | None) -> str:
        if numbers is None:
            found = [index for chunk, index in self.positions.items() if chunk.id == source]
            targets = [(written, found[0] if found else None)]
        else:
            positions = [int(n) for n in "".join(c if "0" <= c <= "9" else " " for c in numbers).split()]
            targets = [(f"[{n}]", n if 1 <= n <= len(self.report.retrieved) else None) for n in positions]
        return "".join(
            f'<sup><a class="ok" href="#{self.prefix}chunk-{n}">{escape(label)}</a></sup>'
            if n is not None
            else f'<sup><del class="phantom" title="no such retrieved chunk">{escape(label)}</del></sup>'
            for label, n in targets
        )

    def problems(self, findings: Iterable[Finding]) -> str:
        items = "".join(
            f'<li class="{f.severity}"><strong>{escape(_words(f.kind))}</strong>: {escape(f.message)}</li>'
            for f in findings
            if f.severity != "info"
        )
        return f'<ul class="problems">{items}</ul>' if items else ""

    def claims(self) -> list[str]:
        report = self.report
        by_claim: dict[int, list[Finding]] = {}
        for finding in report.findings:
            if finding.claim is not None:
                by_claim.setdefault(finding.claim, []).append(finding)
        items: list[str] = []
        for claim_index, claim in enumerate(report.answer.claims):
            findings = by_claim.get(claim_index, [])
            marks: dict[int, str] = {}  # number -> worst flag: two citations of one source show one mark
            quotes: list[str] = []
            for citation_index, citation in enumerate(report.claim_citations.get(claim_index, claim.citations)):
                kinds = {f.kind for f in findings if f.citation == citation_index}
                missing = kinds & {"phantom_source_id", "note_not_retrieved"}
                flag = "phantom" if missing else "drift" if "quote_drift" in kinds else "ok"
                chunks = report.citation_chunks.get((claim_index, citation_index), [])
                number = self.number(citation, chunks, flag)
                for finding in findings:
                    if finding.citation == citation_index and finding.kind == "note_not_retrieved":
                        # Not retrieved at all, or cited from a chunk that does not hold it (the message
                        # then says which chunk does, when one was retrieved).
                        if (finding.ticket_id, cited_note(citation)) in report.missing_notes:
                            why = f"The ticket was retrieved, but not this note: {finding.message}."
                        else:
                            why = f"The cited chunk does not hold this note: {finding.message}."
                        self.missing_note[self.key(citation, chunks)] = why
                marks[number] = max(marks.get(number, "ok"), flag, key=_FLAG_RANK.__getitem__)
                if citation.quoted_span:
                    label = ' <span class="badge drift">quote drift</span>' if flag == "drift" else ""
                    quote = f"[{number}] {escape(citation.quoted_span)}{label}"
                    quotes.append(f'<blockquote class="quote {flag}">{quote}</blockquote>')
            sups = "".join(self.mark(number, flag) for number, flag in marks.items())
            dropped = claim_index in report.dropped_claims
            note = (
                '<p class="note">Dropped from the filtered answer: it names a ticket or a note that was not '
                "retrieved, or none of its citations is a retrieved chunk (that holds the note it cites).</p>"
                if dropped
                else ""
            )
            items.append(
                f'<li class="claim{" dropped" if dropped else ""}" id="{self.prefix}claim-{claim_index + 1}">'
                f'<p class="claim-text">{self.marked(claim.text, markers=False)}{sups}</p>'
                f"{''.join(quotes)}"
                f"{self.problems(findings)}{note}</li>"
            )
        return ['<ol class="claims">', *items, "</ol>"] if items else []

    def mark(self, number: int, flag: str) -> str:
        target = f'href="#{self.prefix}ref-{number}"'
        if flag == "phantom":
            return f'<sup><a class="phantom" {target} title="not a retrieved chunk"><del>[{number}]</del></a></sup>'
        title = ' title="the quote does not match the source"' if flag == "drift" else ""
        return f'<sup><a class="{flag}" {target}{title}>[{number}]</a></sup>'

    def prose(self, text: str, part: str) -> list[str]:
        findings = [f for f in self.report.findings if f.part == part]
        return [f'<p class="text">{self.marked(text)}</p>', self.problems(findings)]

    def results(self) -> list[str]:
        """Ticket results as a table: the ticket, its subject and link, the other fields, what is wrong."""
        report = self.report
        if not report.answer.results:
            return []
        by_result: dict[int, list[Finding]] = {}
        for finding in report.findings:
            if finding.result is not None:
                by_result.setdefault(finding.result, []).append(finding)
        rows = []
        for index, result in enumerate(report.answer.results):
            findings = by_result.get(index, [])
            phantom = any(f.kind == "phantom_ticket_id" for f in findings)
            subject = next((str(result[k]) for k in ("subject", "title") if isinstance(result.get(k), str)), "")
            url = next((str(result[k]) for k in ("url", "uri", "link") if isinstance(result.get(k), str)), None)
            others = [
                f"{escape(key)}: {escape(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))}"
                for key, value in result.items()
                if key not in ("issue_id", "subject", "title", "url", "uri", "link")
            ]
            problems = self.problems(findings) or '<span class="check ok">ok</span>'
            shown_url = (
                "-"
                if not url
                else f"<code>{escape(url)}</code> (another host: not linked)"
                if leads_elsewhere(url, report.redmine_hosts)
                else link(url)
            )
            ticket = escape(f"#{result['issue_id']}")
            ticket_cell = (
                f'<td class="ticket phantom"><del>{ticket}</del></td>'
                if phantom
                else f'<td class="ticket">{ticket}</td>'
            )
            rows.append(
                f'<tr><td class="num">{index + 1}</td>{ticket_cell}'
                f"<td>{self.marked(subject)}</td><td>{shown_url}</td><td>{'<br>'.join(others)}</td>"
                f"<td>{problems}</td></tr>"
            )
        return [
            f"<p>{len(rows)} ticket result{'s' if len(rows) != 1 else ''}:</p>",
            '<table class="results"><thead><tr><th></th><th>ticket</th><th>subject</th><th>link</th>'
            "<th>other fields</th><th>check</th></tr></thead><tbody>",
            *rows,
            "</tbody></table>",
        ]

    def answer(self) -> list[str]:
        report = self.report
        answer = report.answer
        parts = [self.heading("Answer")]
        # A RetrieveAndGenerate answer's claims are the cited parts of its text: show them instead.
        if answer.text and not (answer.shape == "retrieve_and_generate" and answer.claims):
            parts += self.prose(answer.text, "text")
        parts += self.claims()
        if answer.summary:
            parts += [self.heading("Summary"), *self.prose(answer.summary, "summary")]
        parts += self.results()
        others = [
            f for f in report.findings if f.claim is None and f.result is None and f.part not in ("text", "summary")
        ]
        if others:
            parts += [self.problems(others)]
        if self.phantom_ids:
            parts.append(
                f'<p class="note">Struck through: {escape(_tickets(self.phantom_ids))}, named in the answer but '
                "no retrieved chunk (nor the context) is from these tickets; the filtered answer leaves them out "
                "(unless --on-invalid flag).</p>"
            )
        return parts

    # ------------------------------------------------------------------ the sources

    def title(self, chunk: Chunk) -> str:
        """The source's title, else its ticket and subject as its metadata or anchors give them."""
        if chunk.title:
            return chunk.title
        tickets = self.report.chunk_tickets.get(chunk.id, frozenset())
        subjects = sorted(chunk_subjects(chunk, tickets))
        return (_tickets(tickets) if tickets else f"chunk {chunk.id}") + (f": {subjects[0]}" if subjects else "")

    def source(self, chunk: Chunk, label: str, element_id: str, flag: str = "ok", cited_as: str = "") -> str:
        tickets = self.report.chunk_tickets.get(chunk.id, frozenset())
        facts = [f"chunk {chunk.id}", f"retrieved {self.positions.get(chunk, '?')} of {len(self.report.retrieved)}"]
        if tickets:
            facts.append(f"ticket {_tickets(tickets)}")
        if chunk.score is not None:
            facts.append(f"score {chunk.score:.2f}")
        notes = self.report.chunk_notes.get(chunk)
        if notes:
            facts.append(shown_notes(notes))
        if cited_as:
            facts.append(cited_as)
        where = [link(self.report.links[chunk])] if chunk in self.report.links else []
        if chunk.url and chunk not in self.report.links:  # not a web URL, or one naming another ticket
            foreign = self.report.foreign_urls.get(chunk)
            why = f" (names #{foreign}, not this chunk's ticket: not linked)" if foreign is not None else ""
            where.append(f"<code>{escape(chunk.url)}</code>{escape(why)}")
        if chunk.uri and chunk.uri != chunk.url:
            where.append(link(chunk.uri))
        badge = ' <span class="badge drift">quote drift</span>' if flag == "drift" else ""
        return (
            f'<li id="{element_id}" class="source {flag}"><div class="source-head">{escape(label)} '
            f"{escape(self.title(chunk))}{badge}</div>"
            f'<div class="source-meta">{" · ".join(escape(f) for f in facts)}'
            f"{' · ' + ' · '.join(where) if where else ''}</div>"
            f'<div class="chunk">{render_markdown(chunk.text)}</div></li>'
        )

    def sources(self) -> list[str]:
        parts: list[str] = []
        cited: set[Chunk] = set()
        if self.numbers:
            items = []
            for key, number in self.numbers.items():
                chunks = self.chunks[key]
                if not chunks:
                    why = self.missing_note.get(key) or (
                        "Not a retrieved chunk: the answer cites a source it was not given (a phantom source)."
                    )
                    items.append(
                        f'<li id="{self.prefix}ref-{number}" class="source phantom">'
                        f'<div class="source-head">[{number}] '
                        f"<del>{escape(self.labels[key])}</del></div><p>{escape(why)} Claims that cite nothing "
                        "but such sources are dropped from the filtered answer.</p></li>"
                    )
                    continue
                for position, chunk in enumerate(chunks):
                    element = (
                        f"{self.prefix}ref-{number}" if position == 0 else f"{self.prefix}ref-{number}-{position + 1}"
                    )
                    items.append(self.source(chunk, f"[{number}]", element, self.flags[key]))
                    cited.add(chunk)
            parts += [self.heading("Sources cited"), '<ol class="sources">', *items, "</ol>"]
        rest = [chunk for chunk in self.report.retrieved if chunk not in cited]
        if rest:
            title = "Also retrieved, not cited" if self.numbers else "Retrieved chunks"
            parts += [
                self.heading(title),
                '<p class="note">Numbered as retrieved: a [n] in the answer\'s text is the n-th chunk.</p>',
                '<ol class="sources">',
                *(
                    self.source(chunk, f"[{self.positions[chunk]}]", f"{self.prefix}chunk-{self.positions[chunk]}")
                    for chunk in rest
                ),
                "</ol>",
            ]
        elif not self.report.retrieved:
            parts += [self.heading("Retrieved chunks"), "<p>Nothing was retrieved.</p>"]
        return parts

    def findings(self) -> list[str]:
        rows = [
            f'<tr class="{f.severity}"><td>{escape(f.severity)}</td><td>{escape(f.kind)}</td>'
            f"<td>{escape(f.where)}</td><td>{escape(f.message)}</td></tr>"
            for f in self.report.findings
        ]
        if not rows:
            return [self.heading("Findings"), "<p>No findings.</p>"]
        return [
            self.heading("Findings"),
            "<table><thead><tr><th>severity</th><th>kind</th><th>where</th><th>message</th></tr></thead><tbody>",
            *rows,
            "</tbody></table>",
        ]

    def body(self) -> list[str]:
        """The answer first: numbering its citations decides the sources' numbers."""
        answer = self.answer()
        return [*answer, *self.sources(), *self.findings()]


def answer_verdict(report: VerifyReport, prefix: str = "") -> str:
    """The banner of one answer: passed when nothing critical was found, with the counts beside it."""
    critical = [f.message for f in report.findings if f.severity == "critical"]
    facts = (
        f"grounding score {report.grounding_score:.2f} · {report.critical} critical · "
        f"{report.warnings} warning{'s' if report.warnings != 1 else ''} · "
        f"valid ticket ids: {_tickets(report.valid_ids)}"
    )
    if critical:
        headline = f"FAILED: {len(critical)} critical finding{'s' if len(critical) != 1 else ''} ({facts})"
        return pages.verdict(False, headline, critical, f"{prefix}verdict")
    return pages.verdict(True, f"Passed: nothing critical ({facts})", (), f"{prefix}verdict")


def _answer_block(report: VerifyReport, prefix: str, level: int) -> list[str]:
    return [answer_verdict(report, prefix), *_Page(report, prefix, level).body()]


def _record_rows(record: PageRecord | None, report: VerifyReport | None = None) -> list[tuple[str, str]]:
    rows = (record or PageRecord()).rows()
    if report is not None:
        rows.insert(2 + len((record or PageRecord()).inputs), ("answer shape", report.answer.shape))
    return rows


def _page(title: str, body: Iterable[str]) -> str:
    """The page, without a bidirectional control anywhere: an answer's or a chunk's would show a browser
    its text in another order than verify checked it (U+202E before "99321#" shows "#12399"); verify
    reports them."""
    return without_bidi_controls(pages.page(title, body, _CSS))


def render_report(report: VerifyReport, title: str = "anchorkit verify", record: PageRecord | None = None) -> str:
    """The page of one answer (UTF-8 when written). ``record``: the input files and options to show
    (default: the default options, no file names)."""
    body = [
        f"<h1>{escape(title)}</h1>",
        answer_verdict(report),
        pages.record("verify record", _record_rows(record, report)),
        *_Page(report, "", 2).body(),
    ]
    return _page(title, body)


def render_reports(
    reports: Sequence[tuple[str, VerifyReport]],
    title: str = "anchorkit verify",
    record: PageRecord | None = None,
    errors: Sequence[str] = (),
) -> str:
    """One page for many answers (a JSON Lines answer file): an overview table, then each answer as
    on its own page. ``errors``: the lines that could not be read, listed (they fail the verdict)."""
    failed = sum(report.critical > 0 for _, report in reports)
    headline = (
        f"{plural(len(reports), 'answer')}: "
        + (f"{failed} with critical findings" if failed else "nothing critical in any")
        + (f", {len(errors)} unreadable" if errors else "")
    )
    rows = "".join(
        f'<tr><td><a href="#a{index}">{escape(origin or f"answer {index}")}</a></td>'
        f"<td>{escape(report.answer.shape)}</td>"
        f'<td class="num">{report.grounding_score:.2f}</td><td class="num">{report.critical}</td>'
        f'<td class="num">{report.warnings}</td></tr>'
        for index, (origin, report) in enumerate(reports, start=1)
    )
    body = [
        f"<h1>{escape(title)}</h1>",
        pages.verdict(not failed and not errors, headline, [*errors]),
        pages.record("verify record", _record_rows(record)),
        '<table id="answers"><thead><tr><th>answer</th><th>shape</th><th>grounding</th><th>critical</th>'
        f"<th>warnings</th></tr></thead><tbody>{rows}</tbody></table>",
    ]
    for index, (origin, report) in enumerate(reports, start=1):
        body += [
            f'<section id="a{index}"><h2>{escape(origin or f"answer {index}")} ({escape(report.answer.shape)})</h2>',
            *_answer_block(report, f"a{index}-", 3),
            "</section>",
        ]
    return _page(title, body)


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _case_row(index: int, result: CaseResult) -> str:
    report = result.report
    kinds = ", ".join(sorted({_words(f.kind) for f in report.findings if f.severity != "info"})) or "-"
    hit = {None: "-", True: "yes", False: "no"}[result.hit]
    return (
        f'<tr class="{"phantom" if result.has_phantom else ""}">'
        f'<td><a href="#case-{index}">{escape(result.case.case_id)}</a></td>'
        f'<td>{escape(result.case.query)}</td><td class="num">{report.grounding_score:.2f}</td>'
        f"<td>{'yes' if result.has_phantom else 'no'}</td><td>{escape(_tickets(result.case.expected_ids))}</td>"
        f"<td>{escape(_tickets(report.cited_ids))}</td><td>{hit}</td>"
        f'<td class="num">{_rate(result.precision)}</td><td>{escape(kinds)}</td></tr>'
    )


def render_eval(
    summary: EvalSummary,
    gates: EvalGates = EvalGates(),
    record: PageRecord | None = None,
    title: str = "anchorkit eval",
) -> str:
    """The eval page: the aggregate metrics against the gates on top (the verdict ``eval`` exits
    with), a table of the cases, then each case with its query, what it expected and its answer as
    the verify page shows it."""
    failures = gates.failures(summary)
    cases = len(summary.results)
    headline = (
        f"FAILED: {len(failures)} gate{'s' if len(failures) != 1 else ''} failed (exit code 1)"
        if failures
        else "Passed: every gate met (exit code 0)"
        if gates.active
        else "No gate set: measured only (exit code 0)"
    )
    metrics = [
        ("cases", str(cases), "", ""),
        ("unreadable case lines", str(len(summary.errors)), "0", "failed" if summary.errors else "passed"),
        (
            "mean grounding score",
            _rate(summary.mean_grounding),
            *_gate(gates.min_grounding, ">=", gates.min_grounding_met(summary)),
        ),
        (
            "phantom rate",
            _rate(summary.phantom_rate),
            *_gate(gates.max_phantom_rate, "<=", gates.max_phantom_rate_met(summary)),
        ),
        (
            "cases with a critical finding",
            str(sum(r.has_phantom for r in summary.results)),
            *(
                ("0 (--strict)", "failed" if any(r.has_phantom for r in summary.results) else "passed")
                if gates.strict
                else ("", "")
            ),
        ),
        ("source recall by ticket", _rate(summary.source_recall), "", ""),
        ("source recall by source id", _rate(summary.source_id_recall), "", ""),
        ("citation precision", _rate(summary.citation_precision), "", ""),
    ]
    metric_rows = "".join(
        f'<tr><td>{escape(name)}</td><td class="num">{escape(value)}</td><td>{escape(gate)}</td>'
        f'<td class="{"phantom" if result == "failed" else "ok" if result else ""}">{escape(result)}</td></tr>'
        for name, value, gate, result in metrics
    )
    body = [
        f"<h1>{escape(title)}</h1>",
        pages.verdict(None if not gates.active and not summary.errors else not failures, headline, failures),
        '<table id="metrics"><thead><tr><th>metric</th><th>value</th><th>gate</th><th>result</th></tr></thead>'
        f"<tbody>{metric_rows}</tbody></table>",
        pages.record("eval record", _record_rows(record)),
    ]
    if summary.errors:
        body += ["<h2>Unreadable cases</h2>", "<ul>", *(f"<li>{escape(e)}</li>" for e in summary.errors), "</ul>"]
    body += [
        "<h2>Cases</h2>",
        '<table id="cases"><thead><tr><th>case</th><th>query</th><th>grounding</th><th>phantom</th><th>expected</th>'
        "<th>cited</th><th>hit</th><th>precision</th><th>findings</th></tr></thead><tbody>",
        *(_case_row(index, result) for index, result in enumerate(summary.results, start=1)),
        "</tbody></table>",
    ]
    for index, result in enumerate(summary.results, start=1):
        case = result.case
        expected = [f"expected tickets {_tickets(case.expected_ids)}"] if case.expected_ids else []
        if case.expected_source_ids:
            expected.append("expected sources " + ", ".join(sorted(case.expected_source_ids)))
        body += [
            f'<section id="case-{index}"><h2>{escape(case.case_id)}: {escape(case.query)}</h2>',
            f'<p class="facts">{"".join(f"<span>{escape(e)}</span>" for e in expected)}</p>' if expected else "",
            *_answer_block(result.report, f"case-{index}-", 3),
            "</section>",
        ]
    return _page(title, body)


def _gate(threshold: float | None, relation: str, met: bool) -> tuple[str, str]:
    if threshold is None:
        return "", ""
    return f"{relation} {threshold}", "passed" if met else "failed"
