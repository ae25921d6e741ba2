"""report_html.py: the verify report page; answers and chunks are untrusted text."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from anchorkit.anchors import anchor_line
from anchorkit.verify.citations import verify_citations
from anchorkit.verify.html import render_report
from anchorkit.verify.model import Answer, Chunk, Citation, Claim

SCRIPT = "<script>alert('x')</script>"
CHUNK = Chunk(
    "c1",
    f"{anchor_line(12345, 'VPN接続が不安定になる')}\n\nルーターのファームウェア更新で解消しました。{SCRIPT}\n",
    "javascript:alert(1)//12345.md",
)
WEB_CHUNK = Chunk(
    "c2", f"{anchor_line(12352, 'ルーター更新')}\n\nRev.15.02.31 へ更新する。", "https://wiki.example.com/12352.md"
)


class _Elements(HTMLParser):
    """Every start tag with its attributes, as a browser would see them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def page_for(answer: Answer) -> tuple[str, list[tuple[str, dict[str, str | None]]]]:
    page = render_report(verify_citations(answer, [CHUNK, WEB_CHUNK]))
    parser = _Elements()
    parser.feed(page)
    return page, parser.tags


def test_script_in_chunks_and_answers_is_only_ever_escaped() -> None:
    answer = Answer(
        "claims",
        text=f'まとめ {SCRIPT} <img src=x onerror="alert(1)">',
        claims=(Claim(f"解消しました {SCRIPT}", (Citation("c1", '"><script>alert(2)</script>'),)),),
    )
    page, tags = page_for(answer)
    assert [tag for tag, _ in tags if tag in ("script", "img", "iframe")] == []
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page  # shown as text, in chunk and answer
    assert page.count("<script") == 0
    assert all(not (name.startswith("on")) for _, attrs in tags for name in attrs)


def test_only_http_sources_become_links() -> None:
    _, tags = page_for(Answer("claims", claims=(Claim("更新", (Citation("c1"), Citation("c2"))),)))
    hrefs = [attrs["href"] for tag, attrs in tags if tag == "a"]
    assert "https://wiki.example.com/12352.md" in hrefs
    assert not any(h and h.startswith("javascript:") for h in hrefs)


def test_citations_are_numbered_linked_and_flagged() -> None:
    answer = Answer(
        "claims",
        claims=(
            Claim("#12345 はルーターのファームウェア更新で解消しました", (Citation("c1", "ファームウェア更新で解消"),)),
            Claim("Rev.15.02.31 へ更新", (Citation("c2", "全然ちがう引用文です"), Citation("c9"))),
            Claim("#12399 も同様", (Citation("c1"),)),
        ),
    )
    page, tags = page_for(answer)
    markers = [
        (attrs["href"], attrs["class"])
        for tag, attrs in tags
        if tag == "a" and attrs.get("href", "").startswith("#ref-")
    ]
    assert markers == [("#ref-1", "ok"), ("#ref-2", "drift"), ("#ref-3", "phantom"), ("#ref-1", "ok")]
    # Quotes are printed under their claim (a printed report shows what drifted), not only in tooltips.
    assert '<blockquote class="quote ok">[1] ファームウェア更新で解消</blockquote>' in page
    assert re.search(
        r'<blockquote class="quote drift">\[2\] 全然ちがう引用文です <span class="badge drift">quote drift</span>', page
    )
    references = [attrs["id"] for tag, attrs in tags if tag == "li" and attrs.get("id")]
    assert references == ["ref-1", "ref-2", "ref-3"]
    assert re.search(r'<mark class="phantom"[^>]*>#12399</mark>', page)
    assert "phantom source: not retrieved" in page


def test_two_citations_of_one_chunk_show_one_marker_and_one_excerpt() -> None:
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
    assert page.count("ルーターのファームウェア更新で解消しました。&lt;script") == 1  # the excerpt, once


def test_references_show_titles_and_the_summary_is_shown() -> None:
    titled = Chunk(
        "doc_2026#sec3", "本契約の発効日は2026年4月1日です。", "https://example.com/doc", title="業務委託契約書 第3条"
    )
    answer = Answer(
        "claims",
        claims=(Claim("発効日は2026年4月1日です", (Citation("doc_2026#sec3"),)), Claim("更新", (Citation("c1"),))),
        summary="契約の発効日の確認結果です（#12399 参照）。",
    )
    page = render_report(verify_citations(answer, [titled, CHUNK]))
    assert "<strong>業務委託契約書 第3条</strong>" in page
    assert "<strong>#12345: VPN接続が不安定になる</strong>" in page  # no title: the anchor's ticket and subject
    assert "<h2>Summary</h2>" in page and re.search(r'<mark class="phantom"[^>]*>#12399</mark>', page)


def test_dropped_claims_are_shown_struck_through() -> None:
    answer = Answer("claims", claims=(Claim("更新 #12399", (Citation("c1"),)),))
    page, _ = page_for(answer)
    assert '<div class="claim dropped" title="dropped from the filtered answer">' in page
