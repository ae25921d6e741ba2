"""Counts in the human output read as English: ``1 ticket``, ``2 tickets``, never ``1 tickets``."""

from __future__ import annotations

import shutil
from pathlib import Path

from typer.testing import CliRunner

from anchorkit.cli import app
from anchorkit.pages import plural
from anchorkit.verify.citations import verify_citations
from anchorkit.verify.evaluation import CaseResult, EvalCase, EvalGates, EvalSummary
from anchorkit.verify.html import render_reports
from anchorkit.verify.model import Answer, Chunk, Citation, Claim

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
runner = CliRunner()


def anchorkit(*args: str | Path) -> str:
    result = runner.invoke(app, [str(a) for a in args], env={"ANCHORKIT_CONFIG": ""})
    assert result.exit_code == 0, result.output
    return result.stdout


def one_ticket_snapshot(folder: Path) -> Path:
    (folder / "issues").mkdir(parents=True)
    shutil.copy(FIXTURES / "issues" / "12301.json", folder / "issues")
    for name in ("lookups.json", "state.json"):
        shutil.copy(FIXTURES / name, folder)
    return folder


def test_a_count_of_one_takes_the_singular_and_any_other_the_plural() -> None:
    assert plural(1, "ticket") == "1 ticket"
    assert plural(0, "ticket") == "0 tickets"
    assert plural(12_345, "anchor token") == "12,345 anchor tokens"
    assert plural(1, "retry", "retries") == "1 retry"
    assert plural(3, "retry", "retries") == "3 retries"


def test_stats_of_one_document_says_one_document(tmp_path: Path) -> None:
    snap = one_ticket_snapshot(tmp_path / "snap")
    anchorkit("transform", snap, "--out", tmp_path / "out")
    printed = anchorkit("stats", tmp_path / "out")
    assert f"stats: 1 document (output {tmp_path / 'out'})" in printed


def test_stats_of_one_chunk_of_one_ticket_says_so_in_the_singular(tmp_path: Path) -> None:
    snap = one_ticket_snapshot(tmp_path / "snap")
    assert ", 1 chunk → " in anchorkit("chunk", snap, "--out", tmp_path / "chunks", "--chunk-tokens", "4000")
    printed = anchorkit("stats", tmp_path / "chunks", "--chunk-tokens", "4000")
    assert "1 chunk of 1 ticket: 1 names its own ticket and no other (100.00%)" in printed
    assert "chunk count: 1 chunk of known tickets" in printed


def test_verify_reports_of_one_answer_and_one_case_say_so_in_the_singular() -> None:
    chunk = Chunk(id="c1", text="> チケット #12345: VPN\n\nVPN が切れる")
    answer = Answer("claims", claims=(Claim("#99999 で解消", (Citation("c1"),)),))
    report = verify_citations(answer, [chunk])
    assert "1 answer: 1 with critical findings" in render_reports([("answers.jsonl:1", report)])
    case = EvalCase("one", "VPN", [chunk], answer, frozenset({12345}))
    summary = EvalSummary([CaseResult(case, report)], ["cases.jsonl:2: malformed JSON"])
    assert EvalGates(strict=True).failures(summary) == [
        "1 case line could not be read",
        "--strict: 1 of 1 case has a critical finding",
    ]
