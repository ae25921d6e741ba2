"""report_html.py: the verify report page; answers and chunks are untrusted text."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from anchorkit.anchors import anchor_line
from anchorkit.report_html import render_report
from anchorkit.verify import Answer, Chunk, Citation, Claim, verify_citations

SCRIPT = "<script>alert('x')</script>"
CHUNK = Chunk(
    "c1",
    f"{anchor_line(12345, 'VPN接続が不安定になる')}\n\nルーターのファームウェア更新で解消しました。{SCRIPT}\n",
    "javascript:alert(1)//12345.md",
)
WEB_CHUNK = Chunk("c2", f"{anchor_line(12352, 'ルーター更新')}\n\nRev.15.02.31 へ更新する。", "https://wiki.example.com/12352.md")


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
    markers = [(attrs["href"], attrs["class"], attrs["title"]) for tag, attrs in tags if tag == "a" and attrs.get("href", "").startswith("#ref-")]
    assert markers == [
        ("#ref-1", "ok", "ファームウェア更新で解消"),
        ("#ref-2", "drift", "全然ちがう引用文です"),
        ("#ref-3", "phantom", "c9"),
        ("#ref-1", "ok", "c1"),
    ]
    references = [attrs["id"] for tag, attrs in tags if tag == "li" and attrs.get("id")]
    assert references == ["ref-1", "ref-2", "ref-3"]
    assert re.search(r'<mark class="phantom"[^>]*>#12399</mark>', page)
    assert "phantom source: not retrieved" in page
