"""verify/html.py: the verify and eval pages. Answers and chunks are untrusted text.

What a browser makes of the pages (overflow, clipping, fonts, print) is tested in test_pages_browser.py.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

from anchorkit import __version__
from anchorkit.anchors import anchor_line
from anchorkit.verify.citations import VerifyOptions, verify_citations
from anchorkit.verify.evaluation import EvalGates, evaluate, load_cases
from anchorkit.verify.html import PageRecord, render_eval, render_report, render_reports
from anchorkit.verify.model import Answer, Chunk, Citation, Claim
from anchorkit.verify.shapes import load_answers, load_retrieval, read_retrieval

EVAL = Path(__file__).resolve().parent.parent / "fixtures" / "eval"
SCRIPT = "<script>alert('x')</script>"
CHUNK = Chunk(
    "c1",
    f"{anchor_line(12345, 'VPN接続が不安定になる')}\n\nルーターのファームウェア更新で解消しました。{SCRIPT}\n",
    "javascript:alert(1)//12345.md",
)
WEB_CHUNK = Chunk(
    "c2", f"{anchor_line(12352, 'ルーター更新')}\n\nRev.15.02.31 へ更新する。", "https://wiki.example.com/12352.md"
)
NOTE_URL = "https://redmine.example.com/issues/12345#note-4"
NOTE_CHUNK = Chunk(
    "kb-12345-07",
    f"### [2026-03-15] 佐藤 次郎\n\n{anchor_line(12345, 'VPN接続が不安定になる')}\n\n- ステータス: 対応中 → 完了\n",
    "s3://kb/tickets/12345.md",
    url=NOTE_URL,
)


class _Page(HTMLParser):
    """Every start tag with its attributes, and the text of the elements with an id, as a browser sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def ids(self, tag: str, prefix: str) -> list[str]:
        return [a["id"] or "" for t, a in self.tags if t == tag and (a.get("id") or "").startswith(prefix)]

    def hrefs(self) -> list[str]:
        return [a["href"] or "" for t, a in self.tags if t == "a"]


def parse(page: str) -> _Page:
    parser = _Page()
    parser.feed(page)
    return parser


def page_for(answer: Answer, chunks: tuple[Chunk, ...] = (CHUNK, WEB_CHUNK)) -> tuple[str, _Page]:
    page = render_report(verify_citations(answer, list(chunks)))
    return page, parse(page)


def record_of(page: str) -> dict[str, str]:
    table = page.split('id="record">')[1].split("</table>")[0]
    return dict(re.findall(r"<tr><th>([^<]*)</th><td>([^<]*)</td></tr>", table))


def test_script_in_chunks_and_answers_is_only_ever_escaped() -> None:
    hostile = Chunk(
        "c3",
        f'{anchor_line(12399, "x")}\n\n<img src=x onerror="alert(1)"> ![pixel](https://tracker.example.com/p.png) '
        "[click](javascript:alert(3)) <iframe src=https://evil.example.com></iframe>",
    )
    answer = Answer(
        "claims",
        text=f'まとめ {SCRIPT} <img src=x onerror="alert(1)">',
        claims=(Claim(f"解消しました {SCRIPT}", (Citation("c1", '"><script>alert(2)</script>'), Citation("c3"))),),
    )
    page, parsed = page_for(answer, (CHUNK, WEB_CHUNK, hostile))
    assert [tag for tag, _ in parsed.tags if tag in ("script", "img", "iframe", "object", "embed", "link")] == []
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page  # shown as text in the answer
    assert "&lt;script&gt;alert('x')&lt;/script&gt;" in page  # and in the chunk's rendered Markdown
    assert page.count("<script") == 0
    assert all(not name.startswith("on") for _, attrs in parsed.tags for name in attrs)
    # Rendered Markdown loads nothing and links nowhere dangerous.
    assert not any(h.startswith(("javascript:", "data:")) for h in parsed.hrefs())
    assert not [attrs for _, attrs in parsed.tags if "src" in attrs]


def test_only_http_sources_become_links() -> None:
    _, parsed = page_for(Answer("claims", claims=(Claim("更新", (Citation("c1"), Citation("c2"))),)))
    assert "https://wiki.example.com/12352.md" in parsed.hrefs()
    assert not any(h.startswith("javascript:") for h in parsed.hrefs())


def test_a_source_links_to_the_redmine_note_its_metadata_names() -> None:
    page, parsed = page_for(
        Answer("claims", claims=(Claim("完了しました", (Citation("kb-12345-07"),)),)), (NOTE_CHUNK,)
    )
    assert NOTE_URL in parsed.hrefs()
    assert "<code>s3://kb/tickets/12345.md</code>" in page  # the stored document is named, not linked


def test_the_metadata_url_of_a_bedrock_result_becomes_the_chunks_link() -> None:
    bedrock = {
        "retrievalResults": [
            {
                "content": {"text": "本文"},
                "location": {"type": "S3", "s3Location": {"uri": "s3://kb/tickets/12345.md"}},
                "metadata": {"ticket_id": 12345, "url": NOTE_URL},
            }
        ]
    }
    [chunk] = read_retrieval(bedrock, "retrieval").chunks
    assert (chunk.uri, chunk.url) == ("s3://kb/tickets/12345.md", NOTE_URL)


def test_citations_are_numbered_deduped_linked_and_flagged() -> None:
    answer = Answer(
        "claims",
        claims=(
            Claim("#12345 はルーターのファームウェア更新で解消しました", (Citation("c1", "ファームウェア更新で解消"),)),
            Claim("Rev.15.02.31 へ更新", (Citation("c2", "全然ちがう引用文です"), Citation("c9"))),
            Claim("#12399 も同様", (Citation("c1"),)),
        ),
    )
    page, parsed = page_for(answer)
    marks = [
        (attrs["href"], attrs["class"])
        for tag, attrs in parsed.tags
        if tag == "a" and (attrs["href"] or "").startswith("#ref-")
    ]
    assert marks == [("#ref-1", "ok"), ("#ref-2", "drift"), ("#ref-3", "phantom"), ("#ref-1", "ok")]
    # Quotes are printed under their claim (a printed report shows what drifted), not only in tooltips.
    assert '<blockquote class="quote ok">[1] ファームウェア更新で解消</blockquote>' in page
    assert re.search(
        r'<blockquote class="quote drift">\[2\] 全然ちがう引用文です <span class="badge drift">quote drift</span>', page
    )
    assert parsed.ids("li", "ref-") == ["ref-1", "ref-2", "ref-3"]
    # Phantoms are struck through and explained in words on the page.
    assert re.search(r'<del class="phantom"[^>]*>#12399</del>', page)
    assert re.search(r'<a class="phantom" href="#ref-3"[^>]*><del>\[3\]</del></a>', page)
    assert "<del>c9</del></div><p>Not a retrieved chunk: the answer cites a source it was not given" in page
    assert "Struck through: #12399, named in the answer but no retrieved chunk" in page
    assert "<strong>phantom ticket id</strong>: ticket #12399 is named but was not retrieved" in page


def test_two_citations_of_one_chunk_show_one_mark_and_the_chunk_once() -> None:
    answer = Answer(
        "claims",
        claims=(
            Claim(
                "ルーターのファームウェア更新で解消しました",
                (Citation("c1", "ファームウェア更新"), Citation("c1"), Citation("12345")),
            ),
        ),
    )
    page, _ = page_for(answer)
    assert page.count('href="#ref-1"') == 1 and "[1][1]" not in page and 'href="#ref-2"' not in page
    assert page.count("ルーターのファームウェア更新で解消しました。&lt;script") == 1


def test_chunks_are_rendered_markdown_in_full_without_scrolling_boxes() -> None:
    long_text = (
        anchor_line(12345, "VPN接続が不安定になる") + "\n\n" + "\n\n".join(f"段落{i}の本文です。" for i in range(80))
    )
    long_chunk = Chunk("long", long_text + "\n\n| 項目 | 値 |\n|---|---|\n| 機種 | RTX1220 |\n", "s3://kb/12345.md")
    page, _ = page_for(Answer("claims", claims=(Claim("段落", (Citation("long"),)),)), (long_chunk,))
    assert "<blockquote>\n<p>チケット #12345: VPN接続が不安定になる</p>\n</blockquote>" in page  # the anchor
    assert "<p>段落79の本文です。</p>" in page  # the whole text: no excerpt
    assert "<td>RTX1220</td>" in page  # tables render as tables
    assert "max-height" not in page and "overflow:auto" not in page and "overflow: auto" not in page


def test_the_page_starts_with_the_verdict_and_the_record_of_how_it_was_made(tmp_path: Path) -> None:
    options = VerifyOptions(quote_threshold=0.9, grounding_threshold=0.25, min_id_digits=4, min_score=0.5)
    retrieval = tmp_path / "retrieval.json"
    record = PageRecord.of_files(options, ("retrieval", retrieval), ("answer", Path("-")), ("context", None))
    answer = Answer("claims", claims=(Claim("#12399 も同様", (Citation("c1"),)),))
    page = render_report(verify_citations(answer, [CHUNK], options=options), record=record)
    assert page.index('id="verdict"') < page.index('id="record"') < page.index("<h2>Answer</h2>")
    assert re.search(r'class="verdict failed".*FAILED: 1 critical finding', page)
    rows = record_of(page)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", rows["generated"])
    assert rows["anchorkit version"] == __version__
    assert rows["retrieval"] == str(retrieval) and rows["answer"] == "&lt;stdin&gt;" and "context" not in rows
    assert rows["answer shape"] == "claims"
    assert rows["quote drift below"] == "90% similarity (--quote-threshold 0.9)"
    assert rows["weak grounding below"].startswith("25% of a claim")
    assert rows["a bare #n is a ticket id from"] == "4 digits (--min-id-digits)"
    assert rows["retrieval counts as empty"] == "every chunk scored below 0.5 (--min-score)"


def test_a_clean_answer_passes() -> None:
    page, _ = page_for(Answer("claims", claims=(Claim("#12345 はルーターの更新で解消", (Citation("c1"),)),)))
    assert re.search(r'class="verdict passed".*Passed: nothing critical', page)


def test_a_plain_text_answer_lists_every_retrieved_chunk_and_links_its_markers() -> None:
    text = "ルーターの更新で解消しました[1]。手順は別チケットです[2][9]。"
    page, parsed = page_for(Answer("text", text=text))
    assert "<h2>Retrieved chunks</h2>" in page
    assert parsed.ids("li", "chunk-") == ["chunk-1", "chunk-2"]
    assert [h for h in parsed.hrefs() if h.startswith("#chunk-")] == ["#chunk-1", "#chunk-2"]
    assert '<del class="phantom" title="no such retrieved chunk">[9]</del>' in page
    assert "Rev.15.02.31 へ更新する。" in page  # the chunk text itself, rendered


def test_a_results_answer_is_a_table_not_raw_json() -> None:
    results = (
        {"issue_id": 12345, "subject": "VPN接続が不安定になる", "url": "https://redmine.example.com/issues/12345"},
        {"issue_id": 12399, "subject": "存在しない", "score": 0.4},
    )
    page, parsed = page_for(Answer("results", results=results))
    assert '"issue_id"' not in page and "{" not in page.split("<body>")[1]
    assert '<td class="ticket">#12345</td>' in page and '<td class="ticket phantom"><del>#12399</del></td>' in page
    assert "https://redmine.example.com/issues/12345" in parsed.hrefs()
    assert "<td>score: 0.4</td>" in page
    assert "<strong>phantom ticket id</strong>: result 2: ticket id #12399 was not retrieved" in page


def test_the_summary_and_titles_are_shown() -> None:
    titled = Chunk(
        "doc_2026#sec3", "本契約の発効日は2026年4月1日です。", "https://example.com/doc", title="業務委託契約書 第3条"
    )
    answer = Answer(
        "claims",
        claims=(Claim("発効日は2026年4月1日です", (Citation("doc_2026#sec3"),)), Claim("更新", (Citation("c1"),))),
        summary="契約の発効日の確認結果です（#12399 参照）。",
    )
    page = render_report(verify_citations(answer, [titled, CHUNK]))
    assert '<div class="source-head">[1] 業務委託契約書 第3条</div>' in page
    assert '<div class="source-head">[2] #12345: VPN接続が不安定になる</div>' in page  # no title: ticket and subject
    assert "<h2>Summary</h2>" in page and re.search(r'<del class="phantom"[^>]*>#12399</del>', page)


def test_dropped_claims_are_struck_through_and_say_why() -> None:
    page, _ = page_for(Answer("claims", claims=(Claim("更新 #12399", (Citation("c1"),)),)))
    assert '<li class="claim dropped" id="claim-1">' in page
    assert "Dropped from the filtered answer: it names a ticket or a note that was not retrieved" in page


def test_many_answers_make_one_page_with_an_overview_and_separate_ids(tmp_path: Path) -> None:
    answers = tmp_path / "answers.jsonl"
    answers.write_text(
        '{"claims": [{"text": "#12345 は解消", "citations": [{"source_id": "c1"}]}]}\n'
        '{"claims": [{"text": "#12399 も", "citations": [{"source_id": "c1"}]}]}\n'
        "{not json\n",
        encoding="utf-8",
    )
    read, errors = load_answers(answers)
    reports = [(origin, verify_citations(answer, [CHUNK])) for origin, answer in read]
    page = render_reports(reports, errors=errors)
    parsed = parse(page)
    assert re.search(r'class="verdict failed".*2 answers: 1 with critical findings, 1 unreadable', page)
    assert f"{answers}:3: malformed JSON" in page
    assert parsed.ids("section", "a") == ["a1", "a2"]
    assert parsed.ids("li", "a1-ref-") == ["a1-ref-1"] and parsed.ids("li", "a2-ref-") == ["a2-ref-1"]
    ids = [a["id"] for _, a in parsed.tags if a.get("id")]
    assert len(ids) == len(set(ids))
    assert [h for h in parsed.hrefs() if h in ("#a1", "#a2")] == ["#a1", "#a2"]


def test_the_eval_page_puts_the_gates_on_top_and_each_case_below() -> None:
    cases, errors = load_cases(EVAL / "cases.jsonl")
    summary = evaluate(cases, errors)
    record = PageRecord.of_files(VerifyOptions(), ("cases", EVAL / "cases.jsonl"))
    page = render_eval(summary, EvalGates(min_grounding=0.8, max_phantom_rate=0.0), record)
    parsed = parse(page)
    assert page.index('id="verdict"') < page.index('id="metrics"') < page.index('id="cases"')
    assert re.search(r'class="verdict failed".*FAILED: 2 gates failed \(exit code 1\)', page)
    assert f"mean grounding score {summary.mean_grounding:.2f} is under --min-grounding 0.8" in page
    assert f"phantom rate {summary.phantom_rate:.2f} is over --max-phantom-rate 0.0" in page
    assert record_of(page)["cases"] == str(EVAL / "cases.jsonl")
    assert parsed.ids("section", "case-") == [f"case-{i}" for i in range(1, len(cases) + 1)]
    assert [h for h in parsed.hrefs() if re.fullmatch(r"#case-\d+", h)] == [
        f"#{i}" for i in parsed.ids("section", "case-")
    ]
    assert all(f"<h2>{case.case_id}: {case.query}</h2>" in page for case in cases)
    passing = render_eval(summary, EvalGates(min_grounding=0.1, max_phantom_rate=1.0))
    assert re.search(r'class="verdict passed".*Passed: every gate met \(exit code 0\)', passing)
    assert re.search(r'class="verdict neutral".*No gate set', render_eval(summary))


def test_eval_gates_name_each_failure() -> None:
    cases, errors = load_cases(EVAL / "cases.jsonl")
    summary = evaluate(cases, [*errors, "cases.jsonl:9: malformed JSON"])
    assert EvalGates().failures(summary) == ["1 case line could not be read"]
    phantoms = sum(r.has_phantom for r in summary.results)
    assert phantoms and f"--strict: {phantoms} of {len(cases)} cases have a critical finding" in EvalGates(
        strict=True
    ).failures(summary)
    empty = evaluate([], [])
    assert EvalGates(min_grounding=0.5).failures(empty) == [
        "mean grounding score none (no cases) is under --min-grounding 0.5"
    ]
    assert EvalGates(max_phantom_rate=0.0).failures(empty) == []


def test_the_fixture_pages_render_from_their_files() -> None:
    retrieval = load_retrieval(EVAL / "retrieval-bedrock.json")
    [(_, answer)] = load_answers(EVAL / "answer-claims.json")[0]
    page = render_report(verify_citations(answer, retrieval.chunks))
    assert page.startswith("<!DOCTYPE html>") and "<h2>Sources cited</h2>" in page
