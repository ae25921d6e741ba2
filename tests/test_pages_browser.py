"""The report pages in a real browser: what a reader sees on screen at 1280 px and on A4 paper.

Each page (verify: a plain-text answer, a claims answer, a ticket-results answer, an answer over long
messy chunks; eval; stats) is opened in Debian's Chromium: nothing may be wider than the window,
no box may scroll or clip, every retrieved chunk must be shown whole, Japanese must be drawn with a
Japanese font, and the print style sheet must show the same at paper width with link targets
written out. Screenshots land in the test's temporary folder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.browser import PAPER_WIDTH, PageCheck
from support.long_tickets import write_long_snapshot
from typer.testing import CliRunner

from anchorkit.cli import app
from anchorkit.render.transform import TransformOptions, transform_snapshot
from anchorkit.verify.citations import VerifyOptions, VerifyReport, verify_citations
from anchorkit.verify.evaluation import EvalGates, evaluate, load_cases
from anchorkit.verify.html import PageRecord, render_eval, render_report
from anchorkit.verify.model import Answer, Chunk, Citation, Claim
from anchorkit.verify.shapes import load_answers, load_retrieval, read_answer, read_retrieval
from tests.test_verify_notes import TICKET, bedrock_result, fixture_chunks

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parent.parent
EVAL = REPO / "fixtures" / "eval"
REDMINE = "https://redmine.example.com"


@dataclass(frozen=True)
class Rendered:
    path: Path
    chunks: int  # retrieved chunks the page must show whole


def verify_page(folder: Path, name: str, retrieval: str | None, answer: str) -> Rendered:
    chunks = load_retrieval(EVAL / retrieval).chunks if retrieval else []
    [(_, parsed)] = load_answers(EVAL / answer)[0]
    report = verify_citations(parsed, chunks)
    record = PageRecord.of_files(
        VerifyOptions(), ("retrieval", EVAL / retrieval if retrieval else None), ("answer", EVAL / answer)
    )
    return write(folder / f"{name}.html", render_report(report, record=record), report)


def write(path: Path, page: str, report: VerifyReport | None = None, chunks: int = 0) -> Rendered:
    path.write_text(page, encoding="utf-8")
    return Rendered(path, len(report.retrieved) if report else chunks)


def long_chunks(folder: Path) -> list[Chunk]:
    """Chunks of long, messy tickets as a knowledge base returns them: ~40 lines each, cut at blank
    lines, with pasted logs, wide tables, base64 and minified JSON lines longer than any chunk."""
    write_long_snapshot(folder / "snapshot", 2, seed=5)
    assert not transform_snapshot(folder / "snapshot", folder / "out", TransformOptions(tokenizer="approx")).failed
    chunks: list[Chunk] = []
    for document in sorted((folder / "out").rglob("*.md")):
        lines = document.read_text(encoding="utf-8").splitlines()
        piece: list[str] = []
        for line in lines:
            piece.append(line)
            if len(piece) >= 40 and not line.strip():
                chunks.append(chunk_of(document, len(chunks), piece))
                piece = []
        if piece:
            chunks.append(chunk_of(document, len(chunks), piece))
    return chunks


def chunk_of(document: Path, index: int, lines: list[str]) -> Chunk:
    ticket = int(document.stem)
    return Chunk(
        f"kb-{ticket}-{index}",
        "\n".join(lines),
        f"s3://kb-tickets/tickets/{ticket}.md",
        url=f"{REDMINE}/issues/{ticket}#note-{index + 1}",
    )


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Rendered]:
    folder = tmp_path_factory.mktemp("pages")
    rendered = {
        "verify-text": verify_page(folder, "verify-text", "retrieval-chunks.json", "answer.txt"),
        "verify-claims": verify_page(folder, "verify-claims", "retrieval-bedrock.json", "answer-claims.json"),
        "verify-results": verify_page(folder, "verify-results", "retrieval-bedrock.json", "answer-results.json"),
    }
    chunks = long_chunks(folder)
    cited = chunks[::7]
    longest = max(chunks, key=lambda c: max(len(line) for line in c.text.splitlines()))
    claims = tuple(
        Claim(
            f"チケット #{c.id.split('-')[1]} の記録です。",
            (Citation(c.id, c.text.splitlines()[0][:60]),),
        )
        for c in [*cited, longest]
    )
    answer = Answer("claims", claims=(*claims, Claim("存在しない #99999 の話", (Citation("kb-missing"),))))
    report = verify_citations(answer, chunks)
    rendered["verify-long"] = write(folder / "verify-long.html", render_report(report), report)
    rendered["verify-notes"] = notes_page(folder)
    cases, errors = load_cases(EVAL / "cases.jsonl")
    summary = evaluate(cases, errors)
    eval_page = render_eval(summary, EvalGates(min_grounding=0.8, max_phantom_rate=0.0))
    rendered["eval"] = write(
        folder / "eval.html", eval_page, chunks=sum(len(r.report.retrieved) for r in summary.results)
    )
    stats = folder / "stats.html"
    result = CliRunner().invoke(
        app,
        ["stats", str(REPO / "fixtures"), "--tokenizer", "approx", "--html", str(stats), "--fail-under-coverage", "90"],
    )
    assert result.exit_code == 1 and stats.is_file()  # a failed gate: the banner says so
    rendered["stats"] = Rendered(stats, 0)
    return rendered


def notes_page(folder: Path) -> Rendered:
    """anchorkit's own chunks of the fixtures, as Bedrock returns them, cited by their notes: three of
    ticket TICKET's history chunks retrieved, a note of each cited, and one note that was not retrieved."""
    _, records = fixture_chunks(folder / "notes")
    history = [r for r in records.values() if r["ticket_id"] == TICKET and r["metadata"]["section"] == "history"]
    retrieved, missing = history[:3], history[-1]["metadata"]["note"]
    claims = [
        {
            "text": f"チケット #{TICKET} の記録です。",
            "citations": [{"ticket_id": TICKET, "note": r["metadata"]["note"]}],
        }
        for r in retrieved
    ]
    claims.append(
        {
            "text": f"チケット #{TICKET} の note-{missing} で解消しました。",
            "citations": [{"ticket_id": TICKET, "note": missing}],
        }
    )
    chunks = read_retrieval({"retrievalResults": [bedrock_result(r) for r in retrieved]}, "r").chunks
    report = verify_citations(read_answer({"claims": claims}, "a"), chunks)
    return write(folder / "verify-notes.html", render_report(report), report)


PAGES = ["verify-text", "verify-claims", "verify-results", "verify-long", "verify-notes", "eval", "stats"]


@pytest.mark.parametrize("name", PAGES)
def test_on_screen_nothing_is_wider_than_1280_px_scrolls_or_is_cut(
    browser: PageCheck, pages: dict[str, Rendered], name: str, tmp_path: Path
) -> None:
    page = pages[name]
    layout = browser.open(page.path).layout()
    screenshot = browser.screenshot(tmp_path / f"{name}.png")
    assert layout.problems() == [], screenshot
    assert len(layout.chunks) == page.chunks
    assert screenshot.stat().st_size > 20_000  # a rendered page, not a blank one


@pytest.mark.parametrize("name", PAGES)
def test_printed_on_a4_everything_is_shown_and_links_are_written_out(
    browser: PageCheck, pages: dict[str, Rendered], name: str, tmp_path: Path
) -> None:
    page = pages[name]
    printed = browser.open(page.path, width=PAPER_WIDTH, media="print")
    layout = printed.layout()
    assert layout.problems() == [], browser.screenshot(tmp_path / f"{name}-print.png")
    assert len(layout.chunks) == page.chunks
    links = printed.page.evaluate("() => [...document.querySelectorAll('a[href^=\"http\"]')].map((a) => a.href)")
    assert printed.after_content('a[href^="http"]') == [f'" <{href}>"' for href in links]
    pdf = printed.pdf(tmp_path / f"{name}.pdf")
    assert pdf.startswith(b"%PDF") and len(re.findall(rb"/Type\s*/Page[^s]", pdf)) >= 1


def test_the_long_chunks_page_links_every_cited_chunk_to_its_redmine_note(
    browser: PageCheck, pages: dict[str, Rendered]
) -> None:
    check = browser.open(pages["verify-long"].path)
    hrefs = check.page.evaluate("() => [...document.querySelectorAll('.source-meta a')].map((a) => a.href)")
    assert hrefs and all(re.fullmatch(rf"{REDMINE}/issues/\d+#note-\d+", href) for href in hrefs)
    # The phantom source is struck through on the page.
    assert check.page.locator("li.source.phantom del").inner_text() == "kb-missing"


def test_real_chunks_link_to_their_redmine_notes_and_a_missing_note_is_struck(
    browser: PageCheck, pages: dict[str, Rendered]
) -> None:
    check = browser.open(pages["verify-notes"].path)
    hrefs = check.page.evaluate("() => [...document.querySelectorAll('.source-meta a')].map((a) => a.href)")
    assert len(hrefs) == 3 and all(
        re.fullmatch(rf"https://redmine\.example\.co\.jp/issues/{TICKET}#note-\d+", href) for href in hrefs
    )
    assert check.page.locator("a[href^='s3:']").count() == 0  # the stored chunk is named, not linked
    struck = check.page.locator("p.claim-text del.phantom").inner_text()
    assert re.fullmatch(rf"#{TICKET} の note-\d+", struck)
    assert "but not this note" in check.page.locator("li.source.phantom").inner_text()


@pytest.mark.parametrize(
    ("name", "selector"), [("verify-text", "p.text"), ("verify-claims", ".chunk p"), ("eval", "section h2")]
)
def test_japanese_is_drawn_with_a_japanese_font(
    browser: PageCheck, pages: dict[str, Rendered], name: str, selector: str
) -> None:
    check = browser.open(pages[name].path)
    text = check.page.locator(selector).first.inner_text()
    japanese = [c for c in text if "\u3040" <= c <= "\u9fff"]
    assert len(japanese) >= 8, text
    fonts = check.fonts_of(selector)
    cjk = [font for font in fonts if "CJK" in font["familyName"]]
    # Every Japanese character of the element is a glyph of a CJK face (no missing-glyph boxes).
    assert cjk and sum(font["glyphCount"] for font in cjk) >= len(japanese), fonts
    assert not [font for font in fonts if "Last Resort" in font["familyName"]]
    # Full-width characters are about one em each: drawn, not collapsed or replaced by narrow boxes.
    width, size = check.japanese_width(selector)
    assert size and 0.85 * 4 * size <= width <= 1.15 * 4 * size, (width, size)
