"""`anchorkit eval`: verify a set of recorded cases and measure the answers.

A case (one JSON object per line of a ``.jsonl`` file)::

    {"id": "vpn-1", "query": "VPNが切れる", "retrieved": <any retrieval shape>,
     "answer": <any answer shape>, "expected_ids": [12345], "context": "<optional context message>"}

A cited-answer pipeline's EvalCase is accepted as it is: ``sources`` (its Source list) for ``retrieved`` and
``expected_source_ids`` (source ids, e.g. ``"doc_2026_legal_001#sec3"``) beside or instead of the
expected ticket ids.

Metrics: mean grounding score; phantom rate (share of cases with at least one critical finding:
phantom ticket id or source, not refused); source recall by ticket (share of cases with expected ids
whose answer cites at least one of them) and by source id (the same with expected source ids and the
source ids cited); citation precision (mean, over cases with expected ids that cite anything, of the
share of cited ids that are expected).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anchorkit.pages import plural
from anchorkit.settings import default
from anchorkit.untrusted import JSONOverLimit, parse_json
from anchorkit.verify.citations import VerifyOptions, VerifyReport, verify_citations
from anchorkit.verify.ids import parse_ticket_id
from anchorkit.verify.model import Answer, Chunk
from anchorkit.verify.shapes import InputError, read_answer, read_retrieval, read_text_file

CASE_FIELDS = '{"id"?, "query", "retrieved" | "sources", "answer", "expected_ids"?, "expected_source_ids"?, "context"?}'


@dataclass(frozen=True)
class EvalCase:
    case_id: str
    query: str
    chunks: list[Chunk]
    answer: Answer
    expected_ids: frozenset[int]
    context: tuple[str, ...] = ()
    expected_source_ids: frozenset[str] = frozenset()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class CaseResult:
    case: EvalCase
    report: VerifyReport

    @property
    def has_phantom(self) -> bool:
        return self.report.critical > 0

    @property
    def hit(self) -> bool | None:
        """Whether the answer cites an expected id; None when the case expects none."""
        if not self.case.expected_ids:
            return None
        return bool(self.report.cited_ids & self.case.expected_ids)

    @property
    def source_hit(self) -> bool | None:
        """Whether the answer cites an expected source id; None when the case expects none."""
        if not self.case.expected_source_ids:
            return None
        return bool(self.report.cited_sources & self.case.expected_source_ids)

    @property
    def precision(self) -> float | None:
        """Share of cited ids that are expected; None without expected ids or without citations."""
        if not self.case.expected_ids or not self.report.cited_ids:
            return None
        return len(self.report.cited_ids & self.case.expected_ids) / len(self.report.cited_ids)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.case.case_id,
            "query": self.case.query,
            "expected_ids": sorted(self.case.expected_ids),
            "cited_ids": sorted(self.report.cited_ids),
            "grounding_score": round(self.report.grounding_score, 4),
            "phantom": self.has_phantom,
            "hit": self.hit,
            "expected_source_ids": sorted(self.case.expected_source_ids),
            "cited_source_ids": sorted(self.report.cited_sources),
            "source_hit": self.source_hit,
            "precision": None if self.precision is None else round(self.precision, 4),
            "findings": [f.to_json() for f in self.report.findings],
        }


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


@dataclass(frozen=True)
class EvalSummary:
    results: list[CaseResult]
    errors: list[str]

    @property
    def mean_grounding(self) -> float | None:
        return _mean([r.report.grounding_score for r in self.results])

    @property
    def phantom_rate(self) -> float | None:
        return _mean([float(r.has_phantom) for r in self.results])

    @property
    def source_recall(self) -> float | None:
        return _mean([float(r.hit) for r in self.results if r.hit is not None])

    @property
    def source_id_recall(self) -> float | None:
        return _mean([float(r.source_hit) for r in self.results if r.source_hit is not None])

    @property
    def citation_precision(self) -> float | None:
        return _mean([r.precision for r in self.results if r.precision is not None])

    def to_json(self) -> dict[str, Any]:
        """The stable ``eval --json`` schema (README, section verify)."""

        def rounded(value: float | None) -> float | None:
            return None if value is None else round(value, 4)

        return {
            "cases": len(self.results),
            "errors": self.errors,
            "metrics": {
                "mean_grounding_score": rounded(self.mean_grounding),
                "phantom_rate": rounded(self.phantom_rate),
                "source_recall": rounded(self.source_recall),
                "source_id_recall": rounded(self.source_id_recall),
                "citation_precision": rounded(self.citation_precision),
            },
            "results": [r.to_json() for r in self.results],
        }


@dataclass(frozen=True)
class EvalGates:
    """What makes an eval fail (exit 1): unreadable case lines always; a mean grounding score under
    ``min_grounding``; a phantom rate over ``max_phantom_rate``; with ``strict``, any case with a
    critical finding. No cases at all has no mean: that fails ``min_grounding``."""

    min_grounding: float | None = default("min_grounding")
    max_phantom_rate: float | None = default("max_phantom_rate")
    strict: bool = default("strict")

    @property
    def active(self) -> bool:
        return self.min_grounding is not None or self.max_phantom_rate is not None or self.strict

    def min_grounding_met(self, summary: EvalSummary) -> bool:
        return self.min_grounding is None or (summary.mean_grounding or 0.0) >= self.min_grounding

    def max_phantom_rate_met(self, summary: EvalSummary) -> bool:
        return self.max_phantom_rate is None or (summary.phantom_rate or 0.0) <= self.max_phantom_rate

    def to_json(self, summary: EvalSummary) -> dict[str, Any]:
        """The gates and the ones ``summary`` fails, as ``eval --json`` reports them."""
        return {
            "min_grounding": self.min_grounding,
            "max_phantom_rate": self.max_phantom_rate,
            "strict": self.strict,
            "failures": self.failures(summary),
        }

    def failures(self, summary: EvalSummary) -> list[str]:
        """Why the eval fails, one sentence per gate (empty: it passes)."""
        failures: list[str] = []
        if summary.errors:
            failures.append(f"{plural(len(summary.errors), 'case line')} could not be read")
        if not self.min_grounding_met(summary):
            mean = "none (no cases)" if summary.mean_grounding is None else f"{summary.mean_grounding:.2f}"
            failures.append(f"mean grounding score {mean} is under --min-grounding {self.min_grounding}")
        if not self.max_phantom_rate_met(summary):
            failures.append(
                f"phantom rate {summary.phantom_rate:.2f} is over --max-phantom-rate {self.max_phantom_rate}"
            )
        critical = sum(r.has_phantom for r in summary.results)
        if self.strict and critical:
            verb = "has" if critical == 1 else "have"
            failures.append(f"--strict: {critical} of {plural(len(summary.results), 'case')} {verb} a critical finding")
        return failures


def read_case(data: Any, origin: str) -> EvalCase:
    retrieved_key = (
        next((k for k in ("retrieved", "sources") if k in data), None) if isinstance(data, Mapping) else None
    )
    if not isinstance(data, Mapping) or "answer" not in data:
        raise InputError(f"{origin}: a case must be an object {CASE_FIELDS}")
    expected_raw = data.get("expected_ids", [])
    expected = [parse_ticket_id(value) for value in expected_raw] if isinstance(expected_raw, list) else [None]
    if None in expected:
        raise InputError(f'{origin}: "expected_ids" must be a list of ticket ids (12345 or "#12345")')
    sources_raw = data.get("expected_source_ids", [])
    if not isinstance(sources_raw, list) or not all(
        isinstance(s, (str, int)) and not isinstance(s, bool) for s in sources_raw
    ):
        raise InputError(f'{origin}: "expected_source_ids" must be a list of source ids')
    context = data.get("context", [])
    contexts = [context] if isinstance(context, str) else context
    if not isinstance(contexts, list) or not all(isinstance(c, str) for c in contexts):
        raise InputError(f'{origin}: "context" must be a string or a list of strings')
    answer = read_answer(data["answer"], f"{origin} answer")
    if retrieved_key is None and not answer.retrieved:
        raise InputError(f'{origin}: a case needs "retrieved" (or "sources") unless its answer carries them')
    retrieval = read_retrieval(data[retrieved_key], f"{origin} {retrieved_key}") if retrieved_key else None
    query = data.get("query", "")
    return EvalCase(
        case_id=str(data.get("id", origin)),
        query=query if isinstance(query, str) else json.dumps(query, ensure_ascii=False),
        chunks=retrieval.chunks if retrieval else [],
        answer=answer,
        expected_ids=frozenset(e for e in expected if e is not None),
        context=tuple(contexts),
        expected_source_ids=frozenset(str(s) for s in sources_raw),
        notes=tuple(retrieval.notes) if retrieval else (),
    )


def parse_cases(lines: Iterable[str], origin: str) -> tuple[list[EvalCase], list[str]]:
    """Cases from JSONL lines (blank lines skipped); a bad line becomes an error and the rest go on."""
    cases: list[EvalCase] = []
    errors: list[str] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{origin}:{number}"
        try:
            cases.append(read_case(parse_json(line), where))
        except json.JSONDecodeError as error:
            errors.append(f"{where}: malformed JSON: {error.msg} at column {error.colno}")
        except JSONOverLimit as error:
            errors.append(f"{where}: {error}")
        except InputError as error:
            errors.append(str(error))
    return cases, errors


def load_cases(path: Path) -> tuple[list[EvalCase], list[str]]:
    return parse_cases(read_text_file(path).splitlines(), str(path))


def evaluate(
    cases: Sequence[EvalCase],
    errors: list[str],
    options: VerifyOptions = VerifyOptions(),
    progress: Callable[[int, int], None] | None = None,
) -> EvalSummary:
    """Verify every case; ``progress(done, total)`` is called after each one."""
    results = []
    for done, case in enumerate(cases, start=1):
        report = verify_citations(case.answer, case.chunks, context=case.context, options=options, notes=case.notes)
        results.append(CaseResult(case, report))
        if progress is not None:
            progress(done, len(cases))
    return EvalSummary(results, list(errors))
