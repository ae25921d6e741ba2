"""`verify --html`: the answer as one self-contained page with its citations and findings.

Answers and chunks are untrusted text: every piece of them goes through ``html.escape`` (attributes
included), and only ``http``/``https`` source URIs become links, so nothing in them can run or load.
No external assets: the style sheet is inline.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable

from anchorkit.verify.citations import Finding, VerifyReport
from anchorkit.verify.ids import chunk_subjects, mentioned_ids
from anchorkit.verify.model import Chunk, Citation, Severity

_STYLE = """
body{font-family:system-ui,"Hiragino Sans","Noto Sans JP",sans-serif;max-width:54rem;margin:2rem auto;
padding:0 1rem;line-height:1.6;color:#1d1d1f}
h1{font-size:1.4rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #ddd}
.summary span{display:inline-block;margin-right:1.2rem}
.claim{margin:.6rem 0}.text{white-space:pre-wrap}.dropped{text-decoration:line-through;color:#777}
blockquote.quote{margin:.2rem 0 .2rem 1.2rem;padding-left:.6rem;border-left:3px solid #ccc;font-size:.9rem}
blockquote.quote.drift{border-color:#a15c00}
sup a{text-decoration:none;font-weight:600;padding:0 .1rem}
.ok{color:#0b5cad}.drift{color:#a15c00}.phantom{color:#b00020}
mark.phantom{background:#fde2e4;color:#b00020}
.badge{font-size:.75rem;border-radius:.3rem;padding:0 .35rem;margin-left:.3rem;border:1px solid currentColor}
.ref pre{white-space:pre-wrap;background:#f6f6f6;padding:.5rem;font-size:.85rem;max-height:12rem;overflow:auto}
table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:.2rem .5rem;text-align:left;vertical-align:top}
"""
_EXCERPT_CHARS = 600
_FLAG_RANK = {"ok": 0, "drift": 1, "phantom": 2}
# The CSS class a finding is shown with, by severity (info findings are not highlighted).
_SEVERITY_CLASS: dict[Severity, str] = {"critical": "phantom", "warning": "drift", "info": ""}


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _marked_text(text: str, phantom_ids: set[int]) -> str:
    """Escaped text with the mentions of phantom ticket ids highlighted."""
    pieces: list[str] = []
    position = 0
    for mention in mentioned_ids(text, known=phantom_ids):
        if mention.ticket_id in phantom_ids:
            pieces.append(_e(text[position : mention.start]))
            pieces.append(f'<mark class="phantom" title="not retrieved">{_e(text[mention.start : mention.end])}</mark>')
            position = mention.end
    pieces.append(_e(text[position:]))
    return "".join(pieces)


def _tickets(ticket_ids: Iterable[int]) -> str:
    return ", ".join(f"#{i}" for i in sorted(ticket_ids)) or "no ticket id"


def _source_link(chunk: Chunk) -> str:
    if chunk.uri and chunk.uri.lower().startswith(("https://", "http://")):
        return f'<a href="{_e(chunk.uri)}">{_e(chunk.uri)}</a>'
    return f"<code>{_e(chunk.uri or '(no URI)')}</code>"


class _References:
    """Numbers sources in order of first citation: one number per source (the chunks a citation
    resolves to, or for a phantom the id it names), however many citations name it."""

    def __init__(self) -> None:
        self.numbers: dict[tuple[str, ...], int] = {}
        self.labels: dict[tuple[str, ...], str] = {}
        self.chunks: dict[tuple[str, ...], list[Chunk]] = {}
        self.flags: dict[tuple[str, ...], str] = {}

    def number(self, citation: Citation, chunks: list[Chunk], flag: str) -> int:
        key = tuple(f"{c.id}\0{c.uri}" for c in chunks) or ("\0phantom", citation.source_id)
        if key not in self.numbers:
            self.numbers[key] = len(self.numbers) + 1
            self.labels[key] = citation.source_id
            self.chunks[key] = chunks
        # A source cited several times shows its worst state.
        self.flags[key] = max(self.flags.get(key, "ok"), flag, key=_FLAG_RANK.__getitem__)
        return self.numbers[key]


_FLAG_LABEL = {"phantom": " (phantom source)", "drift": " (quote drift)", "ok": ""}


def _claims_html(report: VerifyReport, references: _References, phantom_ids: set[int]) -> list[str]:
    by_claim: dict[int, list[Finding]] = {}
    for finding in report.findings:
        if finding.claim is not None:
            by_claim.setdefault(finding.claim, []).append(finding)
    parts: list[str] = []
    for claim_index, claim in enumerate(report.answer.claims):
        findings = by_claim.get(claim_index, [])
        markers: dict[int, str] = {}  # number -> worst flag: two citations of one source show one marker
        quotes: list[str] = []
        for citation_index, citation in enumerate(report.claim_citations.get(claim_index, claim.citations)):
            kinds = {f.kind for f in findings if f.citation == citation_index}
            flag = "phantom" if "phantom_source_id" in kinds else "drift" if "quote_drift" in kinds else "ok"
            number = references.number(citation, report.citation_chunks.get((claim_index, citation_index), []), flag)
            markers[number] = max(markers.get(number, "ok"), flag, key=_FLAG_RANK.__getitem__)
            if citation.quoted_span:
                label = ' <span class="badge drift">quote drift</span>' if flag == "drift" else ""
                quotes.append(
                    f'<blockquote class="quote {flag}">[{number}] {_e(citation.quoted_span)}{label}</blockquote>'
                )
        sups = "".join(
            f'<sup><a class="{flag}" href="#ref-{number}">[{number}]{_e(_FLAG_LABEL[flag])}</a></sup>'
            for number, flag in markers.items()
        )
        badges = "".join(
            f'<span class="badge {_SEVERITY_CLASS[f.severity]}" title="{_e(f.message)}">{_e(f.kind)}</span>'
            for f in findings
            if f.citation is None
        )
        dropped = ' dropped" title="dropped from the filtered answer' if claim_index in report.dropped_claims else ""
        parts.append(
            f'<div class="claim{dropped}"><p>{_marked_text(claim.text, phantom_ids)}{sups}{badges}</p>'
            f"{''.join(quotes)}</div>"
        )
    return parts


def _results_html(report: VerifyReport) -> list[str]:
    flagged = {f.result for f in report.findings if f.result is not None}
    items: list[str] = []
    for index, result in enumerate(report.answer.results):
        css = "phantom" if index in flagged else "ok"
        badge = '<span class="badge phantom">phantom_ticket_id</span>' if index in flagged else ""
        details = json.dumps(dict(result), ensure_ascii=False, sort_keys=True)
        items.append(f'<li class="{css}"><code>{_e(details)}</code>{badge}</li>')
    return ["<ol>", *items, "</ol>"] if items else []


def _source_title(report: VerifyReport, chunk: Chunk) -> str:
    """The source's title (seed 000), else its ticket and subject as its anchors give them."""
    if chunk.title:
        return chunk.title
    tickets = report.chunk_tickets.get(chunk.id, frozenset())
    subjects = sorted(chunk_subjects(chunk, tickets))
    return _tickets(tickets) + (f": {subjects[0]}" if subjects else "")


def _references_html(report: VerifyReport, references: _References) -> list[str]:
    if not references.numbers:
        return []
    parts = ["<h2>References</h2>", '<ol class="refs">']
    for key, number in references.numbers.items():
        flag = references.flags[key]
        chunks = references.chunks[key]
        head = f'<li id="ref-{number}" class="ref {flag}">'
        if not chunks:
            parts.append(
                f'{head}<strong>{_e(references.labels[key])}</strong> <span class="badge phantom">phantom source: not '
                "retrieved</span></li>"
            )
            continue
        badge = ' <span class="badge drift">quote drift</span>' if flag == "drift" else ""
        bodies = "".join(
            f"<div><strong>{_e(_source_title(report, c))}</strong> {_source_link(c)} <code>{_e(c.id)}</code></div>"
            f"<pre>{_e(c.text[:_EXCERPT_CHARS])}"
            f"{'…' if len(c.text) > _EXCERPT_CHARS else ''}</pre>"
            for c in chunks
        )
        parts.append(f"{head}{badge}{bodies}</li>")
    parts.append("</ol>")
    return parts


def _findings_html(findings: Iterable[Finding]) -> list[str]:
    rows = [
        f'<tr class="{_SEVERITY_CLASS[f.severity]}">'
        f"<td>{_e(f.severity)}</td><td>{_e(f.kind)}</td>"
        f"<td>{_e(f.where)}</td><td>{_e(f.message)}</td></tr>"
        for f in findings
    ]
    if not rows:
        return ["<h2>Findings</h2>", "<p>No findings.</p>"]
    return [
        "<h2>Findings</h2>",
        "<table><tr><th>severity</th><th>kind</th><th>where</th><th>message</th></tr>",
        *rows,
        "</table>",
    ]


def render_report(report: VerifyReport, title: str = "anchorkit verify") -> str:
    """The whole page as a string (UTF-8 when written)."""
    phantom_ids = {f.ticket_id for f in report.findings if f.kind == "phantom_ticket_id" and f.ticket_id is not None}
    references = _References()
    body: list[str] = [
        f"<h1>{_e(title)}</h1>",
        '<p class="summary">'
        f"<span>grounding score <strong>{report.grounding_score:.2f}</strong></span>"
        f"<span>critical <strong>{report.critical}</strong></span>"
        f"<span>warnings <strong>{report.warnings}</strong></span>"
        f"<span>valid ticket ids: {_e(_tickets(report.valid_ids))}</span></p>",
        "<h2>Answer</h2>",
    ]
    # A RetrieveAndGenerate answer's claims are the cited parts of its text: show them instead.
    if report.answer.text and not (report.answer.shape == "retrieve_and_generate" and report.answer.claims):
        body.append(f'<p class="text">{_marked_text(report.answer.text, phantom_ids)}</p>')
    body += _claims_html(report, references, phantom_ids)
    if report.answer.summary:
        body += ["<h2>Summary</h2>", f'<p class="text">{_marked_text(report.answer.summary, phantom_ids)}</p>']
    body += _results_html(report)
    body += _references_html(report, references)
    body += _findings_html(report.findings)
    return (
        '<!DOCTYPE html>\n<html lang="ja">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_e(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )
