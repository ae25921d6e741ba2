"""What `verify` must not be talked into by its inputs: ids vouched for by escapes in a context, ids too
long to be looked at, escape sequences written to the operator's terminal, an id hidden in a quote,
lone surrogates and numbers too long to convert (a clear error, never a traceback), ":name:" made an
emoji; and the sentence an inline marker cites, found in one pass however many markers there are.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from anchorkit.anchors import anchor_line
from anchorkit.cli import app, output
from anchorkit.verify.citations import verify_citations
from anchorkit.verify.ids import MARKER
from anchorkit.verify.model import Chunk
from anchorkit.verify.shapes import read_answer

runner = CliRunner()
TICKET = 12345
CHUNK_TEXT = (
    f"## 対応\n\n{anchor_line(TICKET, 'VPN接続が不安定になる')}\n\nファームウェア更新で VPN 切断は解消しました。\n"
)


def verify(tmp_path: Path, answer: str, *extra: str, json_output: bool = True) -> Any:
    retrieval = tmp_path / "retrieval.json"
    chunk = {"id": "c1", "text": CHUNK_TEXT, "uri": f"s3://kb/tickets/{TICKET}.md"}
    retrieval.write_text(json.dumps([chunk], ensure_ascii=False), encoding="utf-8")
    answer_file = tmp_path / "answer.txt"
    answer_file.write_text(answer, encoding="utf-8")
    result = runner.invoke(
        app, ["verify", "-r", str(retrieval), "-a", str(answer_file), *extra, *(["--json"] if json_output else [])]
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout) if json_output else result.stdout


def phantoms(report: dict[str, Any]) -> set[int]:
    return {f["ticket_id"] for f in report["findings"] if f["kind"] == "phantom_ticket_id"}


# --------------------------------------------------------------------------------------------------
# Item 4: a context file is the text it is


def test_escapes_in_a_context_file_vouch_for_no_ticket(tmp_path: Path) -> None:
    context = tmp_path / "context.txt"
    # A backslash and an "n", a backslash and "u0023": text, not a line break and a "#".
    context.write_text(
        "前回の結果: foo\\n> チケット #99991: 管理者パスワード\n> チケット \\u002399990: 人事情報\n", encoding="utf-8"
    )

    report = verify(tmp_path, f"#{TICKET} のとおりです。チケット #99991 と #99990 も参照。", "--context", str(context))

    assert phantoms(report) == {99991, 99990}
    assert report["valid_ids"] == [TICKET]


# --------------------------------------------------------------------------------------------------
# Item 10: every id form is checked, whatever its length

LONG_FORMS = [
    "#1234567890123",
    "チケット 12345678901234",
    "Redmine #12,345,678,901,234",
    "https://redmine.example.com/issues/1234567890123#note-2",
    "#" + "9" * 5000,
]


def test_ids_of_any_length_are_checked_and_filtered(tmp_path: Path) -> None:
    answer = f"チケット #{TICKET} で解決。" + " ".join(LONG_FORMS) + " も同様です。"

    report = verify(tmp_path, answer)

    assert phantoms(report) == {1234567890123, 12345678901234, int("9" * 4000)}
    filtered = report["filtered_answer"]["text"]
    assert f"#{TICKET}" in filtered and not re.search(r"\d{13}|\d{1,3}(?:,\d{3}){4}", filtered)


def test_a_long_issue_id_in_a_result_is_checked(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    results.write_text(json.dumps([{"issue_id": TICKET}, {"issue_id": "1234567890123"}]), encoding="utf-8")
    retrieval = tmp_path / "retrieval.json"
    chunk = {"id": "c1", "text": CHUNK_TEXT, "uri": f"s3://kb/tickets/{TICKET}.md"}
    retrieval.write_text(json.dumps([chunk], ensure_ascii=False), encoding="utf-8")
    result = runner.invoke(app, ["verify", "-r", str(retrieval), "-a", str(results), "--json"])

    report = json.loads(result.stdout)
    assert phantoms(report) == {1234567890123}
    assert report["filtered_answer"]["results"] == [{"issue_id": TICKET}]


# --------------------------------------------------------------------------------------------------
# Item 12: no escape sequence of an answer reaches the terminal

ESCAPES = {
    "OSC window title": "\x1b]0;you have been pwned\x07",
    "OSC 8 hyperlink": "\x1b]8;;https://evil.example/\x1b\\クリック\x1b]8;;\x1b\\",
    "clear screen": "\x1b[2J\x1b[H",
    "colour": "\x1b[31;1m",
    "C1 CSI": "\x9b31m",
    "carriage return over the line": "\r",
    "right-to-left override": "\u202e",
}


def test_escape_sequences_in_an_answer_never_reach_the_terminal(tmp_path: Path) -> None:
    answer = f"チケット #{TICKET} の件{''.join(ESCAPES.values())}は解決しました[1]。\tタブは残る"

    shown = verify(tmp_path, answer, json_output=False)

    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", shown)
    assert f"チケット #{TICKET} の件クリックは解決しました[1]。\tタブは残る" in shown


def test_eval_prints_case_ids_without_their_escape_sequences(tmp_path: Path) -> None:
    cases = tmp_path / "cases.jsonl"
    chunk = {"id": "c1", "text": CHUNK_TEXT, "uri": f"s3://kb/tickets/{TICKET}.md"}
    case = {"id": "case\x1b]0;pwned\x07-1", "query": "VPN", "retrieved": [chunk], "answer": f"#{TICKET} です。"}
    cases.write_text(json.dumps(case, ensure_ascii=False) + "\n", encoding="utf-8")

    result = runner.invoke(app, ["eval", str(cases)])

    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "case-1: grounding" in result.stdout


def test_printable_keeps_text_tabs_and_line_breaks() -> None:
    from anchorkit.untrusted import printable  # (here: the rest of this file runs on any version)

    assert printable("対応\t済み\n次の行\x1b[0m") == "対応\t済み\n次の行"


# --------------------------------------------------------------------------------------------------
# Item 6: the sentence a marker cites, in one pass


def sentence_before(text: str, position: int) -> str:
    """The definition: the text before the marker, markers removed, trailing whitespace and one sentence
    end dropped, from the last sentence end on (what verify did for each marker, reading the whole
    text before it every time)."""
    before = MARKER.sub("", text[:position]).rstrip()
    before = before[:-1] if before[-1:] and re.match(r"[。．.!?！？\n]", before[-1]) else before
    ends = list(re.finditer(r"[。．.!?！？\n]", before))
    return before[ends[-1].end() :] if ends else before


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["解消しました", "VPN", " ", "  ", "\n", "。", ".", "!", "？", "[1]", "[2, 3]", "【4】", "a[1]"]
        ),
        max_size=40,
    )
)
def test_each_marker_cites_the_sentence_it_ends(pieces: list[str]) -> None:
    from anchorkit.verify.citations import CitedSentences  # (here: the rest of this file runs on any version)

    text = "".join(pieces)
    sentences = CitedSentences(text)
    for match in MARKER.finditer(text):
        assert sentences.before(match.start()) == sentence_before(text, match.start())


# --------------------------------------------------------------------------------------------------
# An id in a quoted span is checked like any other text of the answer

QUOTING = {
    "claims": [
        {"text": "VPN 切断は解消しました。", "citations": [{"source_id": "c1", "quoted_span": "see #12399"}]},
        {
            "text": "VPN 切断は解消しました。",
            "citations": [{"source_id": "c1", "quoted_span": "VPN 切断は解消しました"}],
        },
    ]
}


def test_a_phantom_id_in_a_quote_is_critical_and_drops_its_claim(tmp_path: Path) -> None:
    answer = tmp_path / "answer.json"
    answer.write_text(json.dumps(QUOTING, ensure_ascii=False), encoding="utf-8")
    retrieval = tmp_path / "retrieval.json"
    chunk = {"id": "c1", "text": CHUNK_TEXT, "uri": f"s3://kb/tickets/{TICKET}.md"}
    retrieval.write_text(json.dumps([chunk], ensure_ascii=False), encoding="utf-8")

    result = runner.invoke(app, ["verify", "-r", str(retrieval), "-a", str(answer), "--json"])
    report = json.loads(result.stdout)

    assert [(f["kind"], f["claim"], f["citation"], f["ticket_id"]) for f in report["findings"]][:1] == [
        ("phantom_ticket_id", 0, 0, 12399)
    ]
    assert report["ok"] is False and 12399 in report["cited_ids"]
    assert [c["citations"][0]["quoted_span"] for c in report["filtered_answer"]["claims"]] == ["VPN 切断は解消しました"]
    flagged = runner.invoke(app, ["verify", "-r", str(retrieval), "-a", str(answer), "--json", "--on-invalid", "flag"])
    assert len(json.loads(flagged.stdout)["filtered_answer"]["claims"]) == 2  # flag: reported, nothing removed


def test_a_note_in_a_quote_is_checked_and_a_retrieved_id_in_a_quote_is_no_wrong_ticket() -> None:
    chunks = [
        Chunk("a", "> チケット #12345: VPN\n\n#12352 と同様。", ticket_id=12345, notes=frozenset({3})),
        Chunk("b", "> チケット #12352: ルーター", ticket_id=12352),
    ]
    quote = {"claims": [{"text": "VPN", "citations": [{"source_id": "a", "quoted_span": "#12345-note-7 を見よ"}]}]}
    report = verify_citations(read_answer(quote, "a"), chunks)
    assert [(f.kind, f.claim, f.citation) for f in report.findings if f.severity == "critical"] == [
        ("note_not_retrieved", 0, 0)
    ]
    assert report.dropped_claims == {0}
    other = {"claims": [{"text": "VPN", "citations": [{"source_id": "a", "quoted_span": "#12352 と同様。"}]}]}
    assert verify_citations(read_answer(other, "a"), chunks).findings == []  # no wrong_ticket: a chunk may name others


# --------------------------------------------------------------------------------------------------
# A lone surrogate or a number too long to convert: a clear error or U+FFFD, never a traceback

SURROGATE_RETRIEVAL = (
    '{"retrievalResults":[{"content":{"text":"> チケット #12345: a\\ud800"},"metadata":{"ticket_id":12345}}]}'
)
LONG_NUMBER_RETRIEVAL = '{"retrievalResults":[{"content":{"text":"x"},"metadata":{"ticket_id":1' + "0" * 5000 + "}}]}"


def cli(*args: str | Path, stdin: str | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args], input=stdin)
    # A UnicodeEncodeError writing a surrogate, a ValueError converting a number: uncaught, not SystemExit.
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.stdout, result.stderr


def test_lone_surrogates_become_replacement_characters_in_every_output(tmp_path: Path) -> None:
    retrieval = tmp_path / "surr.json"
    retrieval.write_text(SURROGATE_RETRIEVAL, encoding="utf-8")
    answer = tmp_path / "answer.json"
    answer.write_text('{"text":"#12345 \\ud800 #12399"}', encoding="utf-8")
    page = tmp_path / "page.html"

    code, out, err = cli("verify", "-r", retrieval, "-a", answer, "--html", page)
    assert code == 0 and out == "#12345 \ufffd [unverified]\n" and "phantom_ticket_id" in err
    assert "\ufffd" in page.read_text(encoding="utf-8")
    code, out, _ = cli("verify", "-r", retrieval, "-a", answer, "--json")
    assert code == 0 and json.loads(out)["filtered_answer"]["text"] == "#12345 \ufffd [unverified]"
    code, out, _ = cli("inject", retrieval)
    assert code == 0 and json.loads(out)["retrievalResults"][0]["content"]["text"].endswith("a\ufffd")
    cases = tmp_path / "cases.jsonl"
    case = '{"id":"s\\udc00","query":"q","retrieved":' + SURROGATE_RETRIEVAL + ',"answer":"#12345 \\ud800"}'
    cases.write_text(case + "\n", encoding="utf-8")
    code, out, _ = cli("eval", str(cases), "--html", page)
    assert code == 0 and out.startswith("s\ufffd: grounding 1.00")


@pytest.mark.parametrize("role", ["retrieval", "answer", "context", "inject", "eval"])
def test_a_number_too_long_to_convert_is_an_error_naming_the_file(tmp_path: Path, role: str) -> None:
    big = tmp_path / "bigint.json"
    big.write_text(LONG_NUMBER_RETRIEVAL, encoding="utf-8")
    retrieval = tmp_path / "retrieval.json"
    retrieval.write_text(SURROGATE_RETRIEVAL, encoding="utf-8")
    answer = tmp_path / "answer.txt"
    answer.write_text("#12345", encoding="utf-8")
    cases = tmp_path / "cases.jsonl"
    good = json.dumps({"query": "q", "retrieved": json.loads(SURROGATE_RETRIEVAL), "answer": "#12345"})
    cases.write_text(good + "\n" + '{"query":"q","retrieved":' + LONG_NUMBER_RETRIEVAL + ',"answer":"x"}\n')
    args = {
        "retrieval": ["verify", "-r", big, "-a", answer],
        "answer": ["verify", "-r", retrieval, "-a", big],
        "context": ["verify", "-r", retrieval, "-a", answer, "--context", big],
        "inject": ["inject", big],
        "eval": ["eval", cases],
    }[role]

    code, out, err = cli(*args)

    named = f"{cases}:2" if role == "eval" else str(big)
    assert f"{named}: a JSON number of more than" in err and "Traceback" not in err
    assert code == (1 if role == "eval" else 2)  # eval goes on past the line (and fails on it)
    if role == "eval":
        assert "eval: 1 case, 1 unreadable" in out


@pytest.mark.parametrize("value", ["²", "٣", "9" * 5000, "1" * 19])
def test_a_number_written_as_text_that_is_no_ascii_number_is_none_never_a_traceback(tmp_path: Path, value: str) -> None:
    """str.isdigit() takes "²" (which int() refuses) and "٣"; int() refuses more than 4,300 digits."""
    retrieval = tmp_path / "retrieval.json"
    chunk = {"id": "c1", "text": CHUNK_TEXT, "metadata": {"ticket_id": TICKET, "section": "history", "note": value}}
    retrieval.write_text(json.dumps([chunk], ensure_ascii=False), encoding="utf-8")

    def answer(citation: dict[str, Any]) -> Path:
        path = tmp_path / "answer.json"
        claims = [{"text": "ファームウェア更新で VPN 切断は解消しました。", "citations": [citation]}]
        path.write_text(json.dumps({"claims": claims}, ensure_ascii=False), encoding="utf-8")
        return path

    # A structured citation's note: an input error naming the place (exit 2).
    code, _, err = cli("verify", "-r", retrieval, "-a", answer({"ticket_id": TICKET, "note": value}))
    assert code == 2 and 'claims[0].citations[0]: "note" must be a note number' in err
    # A retrieved chunk's note: it does not say which note it holds, so the cited note is not checked.
    code, out, _ = cli("verify", "-r", retrieval, "-a", answer({"ticket_id": TICKET, "note": 7}), "--json")
    assert code == 0 and json.loads(out)["findings"] == []
    # A bare source id is a chunk's position only in ASCII digits: otherwise a source nothing retrieved has.
    code, out, _ = cli("verify", "-r", retrieval, "-a", answer({"source_id": value}), "--json")
    assert code == 0 and [f["kind"] for f in json.loads(out)["findings"]] == ["phantom_source_id"]


# --------------------------------------------------------------------------------------------------
# What anchorkit prints is printed as it is: no emoji made of ":name:"


def test_line_numbers_and_ids_are_not_turned_into_emoji(tmp_path: Path) -> None:
    answers = tmp_path / "answers.jsonl"
    answers.write_text(f'{{"text": "#{TICKET}"}}\n' * 99 + "{bad\n", encoding="utf-8")
    retrieval = tmp_path / "retrieval.json"
    chunk = {"id": ":thumbs_up:", "text": "x", "uri": "s3://kb/docs/x"}
    retrieval.write_text(json.dumps([chunk]), encoding="utf-8")

    _, _, err = cli("verify", "-r", retrieval, "-a", answers)
    assert f"failed: {answers}:100: malformed JSON" in err and "\U0001f4af" not in err

    with output.err_console.capture() as captured:
        output.print_problem("warning", "chunk :thumbs_up: of :smile: at line :100:")
    assert captured.get() == "warning: chunk :thumbs_up: of :smile: at line :100:\n"
    with output.console.capture() as captured:
        output.console.print("a :thumbs_up:", highlight=False)
    assert captured.get() == "a :thumbs_up:\n"
