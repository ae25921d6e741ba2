"""`anchorkit verify` and `anchorkit eval` on the example eval set in fixtures/eval."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchorkit.cli import app

EVAL = Path(__file__).resolve().parent.parent / "fixtures" / "eval"
runner = CliRunner()


def run(*args: str | Path) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args])
    # Bad input must end in a message and an exit code, never an uncaught exception.
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def verify_json(*args: str | Path) -> dict[str, object]:
    code, out, _ = run("verify", *args, "--json")
    assert code == 0
    return json.loads(out)


def test_verify_claims_reports_and_filters() -> None:
    report = verify_json("-r", EVAL / "retrieval-bedrock.json", "-a", EVAL / "answer-claims.json")
    assert report["valid_ids"] == [12345, 12352]
    assert [(f["kind"], f["claim"]) for f in report["findings"]] == [  # type: ignore[index, union-attr]
        ("quote_drift", 1),
        ("phantom_ticket_id", 2),
        ("phantom_source_id", 3),
    ]
    assert report["counts"] == {"critical": 2, "warning": 1, "units": 4}
    assert report["grounding_score"] == 0.375
    kept = [c["text"] for c in report["filtered_answer"]["claims"]]  # type: ignore[index]
    assert len(kept) == 2 and "#12345" in kept[0] and "#12352" in kept[1]


def test_verify_json_schema_is_stable() -> None:
    report = verify_json("-r", EVAL / "retrieval-chunks.json", "-a", EVAL / "answer.txt")
    assert sorted(report) == [
        "answer_shape",
        "cited_ids",
        "cited_source_ids",
        "counts",
        "filtered_answer",
        "findings",
        "grounding_score",
        "nothing_retrieved",
        "ok",
        "sources",
        "unchecked",
        "valid_ids",
    ]
    assert report["ok"] is False  # the answer names a phantom ticket
    assert sorted(report["findings"][0]) == [  # type: ignore[index]
        "citation",
        "claim",
        "kind",
        "message",
        "part",
        "result",
        "score",
        "severity",
        "source_id",
        "ticket_id",
    ]
    assert report["filtered_answer"]["text"].endswith("在宅勤務の切断は [unverified] と同じ原因です。\n")  # type: ignore[index]


def test_strict_exits_1_only_when_something_critical_was_found() -> None:
    assert run("verify", "-r", EVAL / "retrieval-bedrock.json", "-a", EVAL / "answer-results.json")[0] == 0
    code, _, err = run("verify", "-r", EVAL / "retrieval-bedrock.json", "-a", EVAL / "answer-results.json", "--strict")
    assert code == 1 and "(result 3): result 3: ticket id #12301 was not retrieved" in err
    assert run("verify", "-r", EVAL / "retrieve-and-generate.json", "--strict")[0] == 0


def test_context_makes_ids_of_earlier_turns_valid() -> None:
    answer = EVAL / "answer-turn2.txt"
    alone = verify_json("-r", EVAL / "retrieval-chunks.json", "-a", answer)
    assert [f["kind"] for f in alone["findings"]] == ["phantom_ticket_id"]  # type: ignore[index]
    with_context = verify_json("-r", EVAL / "retrieval-chunks.json", "-a", answer, "--context", EVAL / "context.txt")
    assert with_context["findings"] == [] and 12366 in with_context["valid_ids"]  # type: ignore[operator]
    assert alone["ok"] is False and with_context["ok"] is True


def test_context_may_be_an_earlier_retrieval() -> None:
    this_turn = EVAL / "retrieve-and-generate.json"  # retrieved #12345 only
    alone = verify_json("-r", this_turn, "-a", EVAL / "answer.txt")
    assert [f["ticket_id"] for f in alone["findings"]] == [12301, 12352]  # type: ignore[index]
    later = verify_json("-r", this_turn, "-a", EVAL / "answer.txt", "--context", EVAL / "retrieval-bedrock.json")
    assert [f["ticket_id"] for f in later["findings"]] == [12301]  # type: ignore[index]


def test_human_output_does_not_interpret_markup_from_answers(tmp_path: Path) -> None:
    answer = tmp_path / "answer.txt"
    answer.write_text("[bold red]#12345[/bold red] [link=https://evil.example]click[/link]")
    code, out, _ = run("verify", "-r", EVAL / "retrieval-chunks.json", "-a", answer)
    assert code == 0
    assert "[bold red]#12345[/bold red] [link=https://evil.example]click[/link]" in out


def test_malformed_json_names_the_file_without_a_traceback(tmp_path: Path) -> None:
    broken = tmp_path / "retrieval.json"
    broken.write_text('{"retrievalResults": [')
    code, out, err = run("verify", "-r", broken, "-a", EVAL / "answer.txt")
    assert code == 2 and out == ""
    assert f"{broken}: malformed JSON" in err and "Traceback" not in err
    assert "accepted retrieval shapes:" in err and "retrievalResults" in err


def test_unknown_shape_lists_accepted_shapes(tmp_path: Path) -> None:
    answer = tmp_path / "answer.json"
    answer.write_text('{"choices": [{"message": "#12345"}]}')
    code, _, err = run("verify", "-r", EVAL / "retrieval-chunks.json", "-a", answer)
    assert code == 2
    assert f"{answer}: not a known answer shape" in err and "issue_id" in err and "RetrieveAndGenerate" in err


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert run("verify", "-r", tmp_path / "missing.json", "-a", EVAL / "answer.txt")[0] == 2
    code, _, err = run("verify", "-r", EVAL / "retrieval-chunks.json", "-a", EVAL / "answer.txt", "--uri-pattern", "(")
    assert code == 2 and "--uri-pattern" in err
    code, _, err = run("verify", "-r", EVAL / "retrieval-chunks.json")
    assert code == 2 and "--answer is required" in err
    assert run("verify", "-r", EVAL / "retrieval-chunks.json", "-a", EVAL / "answer.txt", "--on-invalid", "x")[0] == 2
    code, _, err = run("verify", "-r", EVAL / "retrieval-chunks.json", "-a", EVAL / "answer.txt", "--html", tmp_path)
    assert code == 2 and f"--html {tmp_path}" in err


def test_uri_pattern_option(tmp_path: Path) -> None:
    retrieval = tmp_path / "r.json"
    retrieval.write_text(json.dumps([{"id": "a", "text": "本文", "uri": "https://wiki/tickets/12345"}]))
    answer = tmp_path / "a.txt"
    answer.write_text("#12345 です")
    assert verify_json("-r", retrieval, "-a", answer)["valid_ids"] == []
    assert verify_json("-r", retrieval, "-a", answer, "--uri-pattern", r"/tickets/(\d+)$")["valid_ids"] == [12345]


def test_html_report_is_written(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    code, _, _ = run("verify", "-r", EVAL / "retrieval-bedrock.json", "-a", EVAL / "answer-claims.json", "--html", page)
    assert code == 0
    html = page.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and 'href="#ref-1"' in html and 'id="ref-1"' in html
    assert "Not a retrieved chunk: the answer cites a source it was not given" in html


# --------------------------------------------------------------------------- eval


def test_eval_metrics_on_the_example_set() -> None:
    code, out, _ = run("eval", EVAL / "cases.jsonl", "--json")
    assert code == 0
    summary = json.loads(out)
    assert summary["cases"] == 5 and summary["errors"] == [] and summary["ok"] is True
    gated = json.loads(run("eval", EVAL / "cases.jsonl", "--json", "--max-phantom-rate", "0")[1])
    assert gated["ok"] is False  # two of five cases carry a phantom
    # Case by case: phantoms in 2 of 5; 4 of 5 cite an expected id; precisions 1, 1/2, 1, 1 (one cites nothing).
    assert summary["metrics"] == {
        "mean_grounding_score": 0.7,
        "phantom_rate": 0.4,
        "source_recall": 0.8,
        "source_id_recall": None,
        "citation_precision": 0.875,
    }
    by_id = {r["id"]: r for r in summary["results"]}
    assert by_id["vpn-osaka-free-text-mention"]["cited_ids"] == [12301, 12345]
    assert by_id["later-turn-context"]["findings"] == []


def test_eval_goes_on_past_a_bad_line_and_exits_1(tmp_path: Path) -> None:
    lines = (EVAL / "cases.jsonl").read_text(encoding="utf-8").splitlines()
    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join([lines[0], "{not json", '{"query": "no answer", "retrieved": []}', lines[2]]) + "\n")
    code, out, err = run("eval", cases)
    assert code == 1
    assert f"{cases}:2: malformed JSON" in err and f"{cases}:3: a case must be an object" in err
    assert "eval: 2 cases, 2 unreadable" in out


def test_eval_reports_a_too_deeply_nested_line_and_goes_on(tmp_path: Path) -> None:
    lines = (EVAL / "cases.jsonl").read_text(encoding="utf-8").splitlines()
    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join([lines[0], "[" * 200_000, lines[2]]) + "\n")
    code, out, err = run("eval", cases)
    assert code == 1
    assert f"{cases}:2: JSON nested too deeply" in err and "Traceback" not in err
    assert "eval: 2 cases, 1 unreadable" in out


def test_eval_gates(tmp_path: Path) -> None:
    assert run("eval", EVAL / "cases.jsonl", "--strict")[0] == 1
    assert run("eval", EVAL / "cases.jsonl", "--min-grounding", "0.7")[0] == 0
    assert run("eval", EVAL / "cases.jsonl", "--min-grounding", "0.71")[0] == 1
    assert run("eval", EVAL / "cases.jsonl", "--max-phantom-rate", "0.3")[0] == 1
    assert run("eval", tmp_path / "missing.jsonl")[0] == 2


# --------------------------------------------------------------------------- answers in any file, stdin, JSON Lines


CLAIMS_JSON = (EVAL / "answer-claims.json").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", ["answer.jsonl", "answer.txt", "answer", "ANSWER.JSON"])
def test_a_json_answer_is_read_as_json_whatever_the_suffix(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text(
        CLAIMS_JSON if not name.endswith("jsonl") else json.dumps(json.loads(CLAIMS_JSON), ensure_ascii=False)
    )
    report = verify_json("-r", EVAL / "retrieval-bedrock.json", "-a", path)
    assert report["answer_shape"] == "claims" and report["counts"]["critical"] == 2


def test_the_answer_may_come_from_stdin() -> None:
    result = runner.invoke(
        app, ["verify", "-r", str(EVAL / "retrieval-bedrock.json"), "-a", "-", "--json", "--strict"], input=CLAIMS_JSON
    )
    assert result.exit_code == 1 and json.loads(result.stdout)["answer_shape"] == "claims"
    text = runner.invoke(
        app,
        ["verify", "-r", str(EVAL / "retrieval-bedrock.json"), "-a", "-", "--strict"],
        input="#12345 で解消しました。",
    )
    assert text.exit_code == 0 and "#12345 で解消しました。" in text.stdout


def test_json_lines_of_many_answers_are_each_verified(tmp_path: Path) -> None:
    answers = tmp_path / "answers.jsonl"
    lines = [
        json.dumps(
            {"claims": [{"text": "VPN 切断は解消", "citations": [{"source_id": "kb-12345-07"}]}]}, ensure_ascii=False
        ),
        json.dumps("#12399 で解消しました。", ensure_ascii=False),
        "{broken",
        json.dumps([{"issue_id": 12352}]),
    ]
    answers.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, out, err = run("verify", "-r", EVAL / "retrieval-bedrock.json", "-a", answers, "--json")
    reports = [json.loads(line) for line in out.splitlines()]
    assert code == 1 and "answers.jsonl:3: malformed JSON" in err
    assert [(r["origin"].rsplit(":", 1)[1], r["counts"]["critical"]) for r in reports] == [("1", 0), ("2", 1), ("4", 0)]
    code, out, _ = run("verify", "-r", EVAL / "retrieval-bedrock.json", "-a", answers)
    assert out.count("== ") == 3 and f"== {answers}:2" in out


def test_strict_fails_on_a_phantom_wherever_it_is(tmp_path: Path) -> None:
    grounded = {"text": "VPN 切断は解消", "citations": [{"source_id": "kb-12345-07"}]}
    placements = [
        {"claims": [grounded], "summary": "#12399 と同じ"},
        {"claims": [grounded], "answer": "https://redmine.example.com/issues/12399"},
        {"claims": [{**grounded, "citation_ids": ["kb-99"]}]},
        {"claims": [grounded], "extra": {"see": "チケット12399"}},
        {"results": [{"issue_id": 12345, "url": "https://redmine.example.com/issues/12399"}]},
        "VPN 切断は解消しました[9]。",
    ]
    for number, answer in enumerate(placements):
        path = tmp_path / f"a{number}.json"
        path.write_text(json.dumps(answer, ensure_ascii=False), encoding="utf-8")
        assert run("verify", "-r", EVAL / "retrieval-bedrock.json", "-a", path, "--strict")[0] == 1, answer
    path.write_text(json.dumps({"claims": [grounded], "summary": "#12345 の件"}, ensure_ascii=False), encoding="utf-8")
    assert run("verify", "-r", EVAL / "retrieval-bedrock.json", "-a", path, "--strict")[0] == 0


def test_text_output_says_where_each_finding_is_and_shows_dropped_claims() -> None:
    code, out, err = run("verify", "-r", EVAL / "retrieval-bedrock.json", "-a", EVAL / "answer-claims.json")
    assert code == 0
    assert "warning quote_drift (claim 2, citation 1):" in err
    assert "critical phantom_ticket_id (claim 3):" in err and "critical phantom_source_id (claim 4, citation 1):" in err
    assert "dropped claim 3: 在宅勤務の VPN 切断（#12301）も同じ原因でした。" in err
    assert "   > ルーターのファームウェア更新で解消しました。" in out  # quotes are printed with the answer
    assert "#12301" not in out


def test_an_answer_that_carries_its_retrieval_needs_no_retrieval_file(tmp_path: Path) -> None:
    report = verify_json("-a", EVAL / "retrieve-and-generate.json")
    assert report["findings"] == [] and report["valid_ids"] == [12345]
    path = tmp_path / "a.txt"
    path.write_text("#12345", encoding="utf-8")
    code, _, err = run("verify", "-a", path)
    assert code == 2 and "--retrieval is required" in err


def test_context_may_be_converse_messages(tmp_path: Path) -> None:
    context = tmp_path / "messages.json"
    anchor = (EVAL / "context.txt").read_text(encoding="utf-8")
    context.write_text(
        json.dumps({"messages": [{"role": "user", "content": [{"text": anchor}]}]}, ensure_ascii=False),
        encoding="utf-8",
    )
    args = ("-r", EVAL / "retrieval-chunks.json", "-a", EVAL / "answer-turn2.txt")
    assert 12366 not in verify_json(*args)["valid_ids"]
    assert 12366 in verify_json(*args, "--context", context)["valid_ids"]


def test_eval_accepts_cases_with_cited_answer_sources_and_reports_recall_by_source_id(tmp_path: Path) -> None:
    sources = [
        {
            "id": "doc_2026_legal_001#sec3",
            "title": "業務委託契約書",
            "content": "本契約は2026年4月1日に発効する。",
            "url": "https://example.com/legal/001",
            "metadata": {},
        },
        {
            "id": "redmine-12345#note-4",
            "title": "チケット #12345: VPN接続が不安定になる",
            "content": "ファームウェア更新で解消しました。",
            "url": "https://redmine.example.com/issues/12345",
            "metadata": {},
        },
    ]

    def claim(source_id: str, text: str) -> dict[str, object]:
        return {
            "claims": [{"text": text, "citations": [{"source_id": source_id, "quoted_span": text}]}],
            "summary": "確認結果です。",
        }

    cases = [
        {
            "query": "発効日は?",
            "sources": sources,
            "expected_source_ids": ["doc_2026_legal_001#sec3"],
            "answer": claim("doc_2026_legal_001#sec3", "本契約は2026年4月1日に発効する。"),
        },
        {
            "query": "VPN は?",
            "sources": sources,
            "expected_source_ids": ["redmine-12345#note-4"],
            "expected_ids": [12345],
            "answer": claim("doc_2026_legal_001#sec3", "本契約は2026年4月1日に発効する。"),
        },
        {
            "query": "VPN は?",
            "sources": sources,
            "expected_source_ids": ["redmine-12345#note-4"],
            "expected_ids": [12345],
            "answer": claim("redmine-12345#note-4", "ファームウェア更新で解消しました。"),
        },
    ]
    path = tmp_path / "cited.jsonl"
    path.write_text("\n".join(json.dumps(c, ensure_ascii=False) for c in cases), encoding="utf-8")
    code, out, _ = run("eval", path, "--json")
    summary = json.loads(out)
    assert code == 0 and summary["errors"] == []
    assert summary["metrics"]["source_id_recall"] == round(2 / 3, 4)
    assert summary["metrics"]["source_recall"] == 0.5  # by ticket: two cases expect #12345, one cites it
    assert [r["source_hit"] for r in summary["results"]] == [True, False, True]
    code, out, _ = run("eval", path)
    assert "source recall 0.50 by ticket, 0.67 by source id" in out


# --------------------------------------------------------------------------- pages through the CLI


def test_html_of_a_json_lines_answer_file_is_one_page_of_every_answer(tmp_path: Path) -> None:
    answers = tmp_path / "answers.jsonl"
    lines = [
        json.dumps("#12345 で解消しました。", ensure_ascii=False),
        json.dumps("#12399 で解消しました。", ensure_ascii=False),
        "{broken",
    ]
    answers.write_text("\n".join(lines) + "\n", encoding="utf-8")
    page = tmp_path / "answers.html"
    code, _, err = run("verify", "-r", EVAL / "retrieval-bedrock.json", "-a", answers, "--html", page)
    assert code == 1 and "answers.jsonl:3: malformed JSON" in err  # was exit 2: "--html takes a file of one answer"
    html = page.read_text(encoding="utf-8")
    assert "2 answers: 1 with critical findings, 1 unreadable" in html
    assert f'href="#a1">{answers}:1</a>' in html and f'href="#a2">{answers}:2</a>' in html
    assert "answers.jsonl:3: malformed JSON" in html
    assert str((EVAL / "retrieval-bedrock.json").absolute()) in html and str(answers.absolute()) in html


def test_html_of_one_answer_records_its_input_files_and_options(tmp_path: Path) -> None:
    page = tmp_path / "answer.html"
    args = ("-r", EVAL / "retrieval-chunks.json", "-a", EVAL / "answer-turn2.txt", "--context", EVAL / "context.txt")
    code, _, _ = run("verify", *args, "--min-id-digits", "4", "--html", page)
    html = page.read_text(encoding="utf-8")
    assert code == 0
    for path in ("retrieval-chunks.json", "answer-turn2.txt", "context.txt"):
        assert str((EVAL / path).absolute()) in html
    assert "4 digits (--min-id-digits)" in html


def test_eval_html_puts_the_gates_on_top_of_every_case(tmp_path: Path) -> None:
    page = tmp_path / "eval.html"
    code, _, err = run("eval", EVAL / "cases.jsonl", "--max-phantom-rate", "0", "--html", page)
    assert code == 1 and "gate failed: phantom rate 0.40 is over --max-phantom-rate 0.0" in err
    html = page.read_text(encoding="utf-8")
    assert html.index("FAILED: 1 gate failed (exit code 1)") < html.index("vpn-osaka-grounded")
    for case in ("vpn-osaka-free-text-mention", "router-results", "phantom-source", "later-turn-context"):
        assert case in html
    assert str((EVAL / "cases.jsonl").absolute()) in html
    assert run("eval", EVAL / "cases.jsonl", "--html", page)[0] == 0
    assert "No gate set: measured only (exit code 0)" in page.read_text(encoding="utf-8")
    code, _, err = run("eval", EVAL / "cases.jsonl", "--html", tmp_path)
    assert code == 2 and f"--html {tmp_path}" in err
