"""The ticket-aware chunker: every chunk names its ticket, fits, and the chunks give the content back."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anchorkit.anchors import code_closer, find_anchors, find_titles, strip_anchors, title_line
from anchorkit.chunk import Chunk, ChunkError, chunk_document
from anchorkit.render.document import RenderOptions, render_document, render_outline
from anchorkit.tokens import ExactTokens, load_cl100k_base
from tests.support.long_tickets import TEXT_FORMAT, long_issue, lookups
from tests.test_anchor_spacing import BLOCKS
from tests.test_document import issue_of, random_subjects, random_texts
from tests.test_forgeries import forged_tickets

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
LOOKUPS = json.loads((FIXTURES / "lookups.json").read_text(encoding="utf-8"))
SUBJECT = "VPN接続が不安定になる"


class ByteTokens:
    """A tokenizer whose tokens are UTF-8 bytes: exact and fast, for property tests."""

    name = "bytes"
    exact = True

    def tokenize_many(self, texts: Sequence[str]) -> list[ExactTokens]:
        return [ExactTokens(range(len(text.encode("utf-8")) + 1)) for text in texts]

    def count(self, text: str) -> int:
        return len(text.encode("utf-8"))


BYTES = ByteTokens()


def fixture_issue(ticket_id: int) -> dict[str, Any]:
    return json.loads((FIXTURES / "issues" / f"{ticket_id}.json").read_text(encoding="utf-8"))["issue"]


def fixture_documents() -> list[tuple[int, str]]:
    documents = []
    options = RenderOptions(text_format=(("2025-04-01T00:00:00Z", "common_mark"),))
    for path in sorted((FIXTURES / "issues").glob("*.json")):
        issue = json.loads(path.read_text(encoding="utf-8"))["issue"]
        if not issue.get("is_private"):
            documents.append((issue["id"], render_document(issue, LOOKUPS, options)))
    return documents


def long_documents(count: int, chunk_tokens: int = 0) -> list[tuple[int, str]]:
    options = RenderOptions(text_format=TEXT_FORMAT, chunk_tokens=chunk_tokens)
    issues = [long_issue(50001 + n, random.Random(50001 + n)) for n in range(count)]
    return [(issue["id"], render_document(issue, lookups(), options)) for issue in issues]


def document(description: str, notes: Sequence[str] = (), subject: str = SUBJECT, ticket_id: int = 5) -> str:
    issue = {
        "id": ticket_id,
        "subject": subject,
        "description": description,
        "journals": [
            {"id": n, "user": {"name": f"担当{n}"}, "created_on": f"2026-03-{n + 1:02d}T09:00:00Z", "notes": text}
            for n, text in enumerate(notes)
        ],
    }
    return render_document(issue, {}, RenderOptions(text_format="common_mark", chunk_tokens=0))


def assert_chunks_keep_the_contract(chunks: list[Chunk], doc: str, tokenizer: Any, limit: int) -> None:
    """What every chunking promises: its ticket's anchor or title and no other, at most ``limit``
    tokens, and the chunks' own parts give back the document's content (without anchors), in order."""
    content = strip_anchors(doc)
    title, title_line = find_titles(doc)[0], doc.split("\n", 1)[0]
    whole_title = tokenizer.count(title_line + "\n\n") <= limit
    if whole_title:
        assert chunks[0].text.startswith(title_line + "\n")
    else:  # a title line longer than a chunk: as much of it as fits (still a title line of the ticket)
        assert title_line.startswith(chunks[0].text.split("\n", 1)[0])
    assert chunks[0].header == ""
    for chunk in chunks:
        assert tokenizer.count(chunk.text) <= limit, chunk.id
        anchors, titles = find_anchors(chunk.text), find_titles(chunk.text)
        if chunk is chunks[0]:
            assert anchors == [] and (
                titles == [title] if whole_title else [t.ticket_id for t in titles] == [title.ticket_id]
            )
        else:
            assert chunk.text.startswith(chunk.header) and anchors == find_anchors(chunk.header)
            assert [a.ticket_id for a in anchors] == [title.ticket_id] and titles == []
        assert chunk.text == chunk.header + chunk.reopened + content[chunk.start : chunk.end] + chunk.closed
        assert_only_repeated_structure(chunk)
    assert "".join(content[chunk.own_start : chunk.end] for chunk in chunks) == content
    for before, after in pairwise(chunks):
        assert before.end == after.own_start and after.start <= after.own_start
        assert before.start <= after.start  # an overlap repeats the end of the previous chunk only


def assert_only_repeated_structure(chunk: Chunk) -> None:
    """What a chunk repeats or adds is a code block's opening line, a table's header and delimiter
    rows, or the line that closes a code block."""
    if chunk.reopened:
        lines = chunk.reopened.split("\n")
        assert lines[-1] == "" and (
            (len(lines) == 2 and code_closer(lines[0])) or (len(lines) == 3 and re.fullmatch(r"[ |:-]+", lines[1]))
        ), chunk.reopened
    if chunk.closed:
        assert chunk.closed.strip() in ("```", "~~~", "</pre>", "</code></pre>") or chunk.closed.strip("`~\n") == ""


# ---------------------------------------------------------------------------------------------
# The contract on real documents, with exact cl100k_base counts


@pytest.mark.parametrize("limit", [300, 512])
def test_every_chunk_of_the_fixtures_and_long_tickets_names_its_ticket_fits_and_gives_back_the_content(
    limit: int,
) -> None:
    tokenizer = load_cl100k_base()
    for ticket_id, doc in [*fixture_documents(), *long_documents(12)]:
        chunked = chunk_document(doc, {"url": f"https://redmine.example/issues/{ticket_id}"}, tokenizer, limit)
        assert chunked.ticket_id == ticket_id and chunked.warnings == []
        assert_chunks_keep_the_contract(chunked.chunks, doc, tokenizer, limit)


def test_documents_with_spacing_anchors_give_the_same_chunks_as_without() -> None:
    tokenizer = load_cl100k_base()
    for (_, plain), (_, spaced) in zip(long_documents(3), long_documents(3, chunk_tokens=300), strict=True):
        assert plain != spaced
        first = chunk_document(plain, {}, tokenizer, 300).chunks
        second = chunk_document(spaced, {}, tokenizer, 300).chunks
        assert [c.text for c in first] == [c.text for c in second]


def test_chunking_twice_gives_the_same_ids_texts_and_metadata() -> None:
    tokenizer = load_cl100k_base()
    (ticket_id, doc), *_ = long_documents(1)
    first, second = (chunk_document(doc, {"subject": "s"}, tokenizer, 300).chunks for _ in range(2))
    assert [(c.id, c.text, c.metadata) for c in first] == [(c.id, c.text, c.metadata) for c in second]
    assert [c.id for c in first] == [f"{ticket_id}-{n:03d}" for n in range(len(first))]


def assert_outline_chunks_as_its_document(issue: dict[str, Any], lookups: Any, options: RenderOptions) -> None:
    """A ticket's outline is its document without anchors, with the same headings: chunked, the same
    chunks with the same metadata (whatever spacing the document has)."""
    outline = render_outline(issue, lookups, options)
    document = render_document(issue, lookups, options)
    assert outline.content == strip_anchors(document)
    metadata = {"ticket_id": issue["id"], "url": "https://r/issues/1", "note_numbers": list(range(1, 60))}
    for limit in (64, 300):
        from_document = chunk_document(document, metadata, BYTES, limit)
        assert chunk_document(outline, metadata, BYTES, limit) == from_document


def test_the_outline_of_the_fixtures_and_long_tickets_chunks_as_their_documents() -> None:
    issues = [fixture_issue(int(path.stem)) for path in sorted((FIXTURES / "issues").glob("*.json"))]
    long_issues = [long_issue(50001 + n, random.Random(50001 + n)) for n in range(4)]
    variants = [
        {"chunk_tokens": 0},
        {"chunk_tokens": 300, "spacing_anchors": "full"},
        {"anchor_basic_info": False, "lang": "en", "include_private": True},
    ]
    for variant in variants:
        for issue in issues:
            assert_outline_chunks_as_its_document(issue, LOOKUPS, RenderOptions(text_format=TEXT_FORMAT, **variant))
        for issue in long_issues:
            assert_outline_chunks_as_its_document(issue, lookups(), RenderOptions(text_format=TEXT_FORMAT, **variant))


@settings(max_examples=150, deadline=None)
@given(
    subject=random_subjects,
    description=random_texts,
    notes=st.lists(random_texts, max_size=4),
    fmt=st.sampled_from(["textile", "common_mark"]),
    basic_info=st.booleans(),
    lang=st.sampled_from(["ja", "en"]),
)
def test_the_outline_of_any_ticket_chunks_as_its_document(
    subject: str, description: str, notes: list[str], fmt: str, basic_info: bool, lang: str
) -> None:
    options = RenderOptions(text_format=fmt, chunk_tokens=0, anchor_basic_info=basic_info, lang=lang)
    assert_outline_chunks_as_its_document(issue_of(subject, description, notes), {}, options)


@settings(max_examples=60, deadline=None)
@given(issue=forged_tickets(), fmt=st.sampled_from(["textile", "common_mark"]))
def test_the_outline_of_a_ticket_full_of_forgeries_chunks_as_its_document(issue: dict[str, Any], fmt: str) -> None:
    assert_outline_chunks_as_its_document(issue, {}, RenderOptions(text_format=fmt, chunk_tokens=0))


@pytest.mark.parametrize(("limit", "overlap"), [(96, 0), (96, 24), (200, 50), (1024, 0), (1024, 256)])
def test_long_tickets_keep_the_contract_at_short_and_long_chunks_with_overlap(limit: int, overlap: int) -> None:
    """cl100k_base counts read off the content's tokens (chunk/positions.py) where chunks repeat an overlap and
    where short chunks cut long lines, tables and logs many times over."""
    tokenizer = load_cl100k_base()
    for ticket_id, doc in long_documents(4):
        chunked = chunk_document(doc, {"ticket_id": ticket_id}, tokenizer, limit, overlap)
        assert_chunks_keep_the_contract(chunked.chunks, doc, tokenizer, limit)
        assert overlap == 0 or any(chunk.start < chunk.own_start for chunk in chunked.chunks)


# ---------------------------------------------------------------------------------------------
# Random documents (each UTF-8 byte a token): the same contract, for any content and chunk size


@settings(max_examples=400, deadline=None)
@given(
    blocks=st.lists(BLOCKS, min_size=1, max_size=10),
    notes=st.lists(st.lists(BLOCKS, min_size=1, max_size=4).map("\n\n".join), max_size=5),
    forged=st.sampled_from(
        ["", "> チケット #99: 偽", "# チケット #98: 偽", "文。> チケット #97: x", "   > Ticket #96: y"]
    ),
    limit=st.sampled_from([90, 160, 400]),
    overlap=st.sampled_from([0, 0, 20]),
    spacing=st.sampled_from([0, 200]),
)
def test_any_document_is_chunked_within_the_contract(
    blocks: list[str], notes: list[str], forged: str, limit: int, overlap: int, spacing: int
) -> None:
    issue = {
        "id": 5,
        "subject": SUBJECT,
        "description": "\n\n".join(blocks) + forged,
        "journals": [{"id": n, "user": {"name": "佐藤"}, "notes": text} for n, text in enumerate(notes)],
    }
    doc = render_document(issue, {}, RenderOptions(text_format="common_mark", chunk_tokens=spacing), BYTES.count)
    chunked = chunk_document(doc, {"ticket_id": 5}, BYTES, limit, overlap)
    assert_chunks_keep_the_contract(chunked.chunks, doc, BYTES, limit)
    for chunk in chunked.chunks:
        assert {a.ticket_id for a in find_anchors(chunk.text) + find_titles(chunk.text)} == {5}


# ---------------------------------------------------------------------------------------------
# Where chunks are cut


def test_short_journals_are_packed_together_and_chunks_begin_at_a_journal() -> None:
    notes = [f"メモ{n}: " + "利用者から再度問い合わせがありました。" * 3 for n in range(12)]
    doc = document("説明です。", notes)
    chunks = chunk_document(doc, {}, BYTES, 1000).chunks
    journal_heads = [c.text[len(c.header) :].split("\n", 1)[0] for c in chunks[1:]]
    assert len(chunks) < len(notes) and all(head.startswith("### [2026-03-") for head in journal_heads)
    assert all(c.text.count("### [") >= 2 for c in chunks[1:-1])


def test_a_long_log_is_cut_between_its_lines_with_the_fence_closed_and_reopened() -> None:
    log = "\n".join(
        f"2026-03-01 10:{minute:02d}:00 [ERROR] vpn-gw01 ike: phase1 negotiation failed" for minute in range(40)
    )
    doc = document("ログです。\n\n```text\n" + log + "\n```")
    chunks = chunk_document(doc, {}, BYTES, 600).chunks
    inside = [c for c in chunks if c.reopened]
    assert len(inside) >= 3 and all(c.reopened == "```text\n" for c in inside)
    assert all(c.closed == "```\n" for c in chunks if c.closed) and sum(1 for c in chunks if c.closed) >= 3
    for chunk in chunks:  # every fence a chunk opens, it closes
        assert chunk.text.count("```") % 2 == 0, chunk.text


LONG_BLOCKS = {
    "log": "```text\n"
    + "\n".join(f"2026-03-01 10:{n % 60:02d}:00 [ERROR] vpn-gw{n:02d} ike failed" for n in range(90))
    + "\n```",
    "table": "| 拠点 | 端末 |\n|---|---|\n" + "\n".join(f"| 大阪{'支' * (n % 7)} | PC-{n:05d} |" for n in range(90)),
    "list": "\n".join(f"- 手順{n}: {'確認' * (n % 5 + 1)}する" for n in range(90)),
}


@pytest.mark.parametrize("shape", LONG_BLOCKS)
@pytest.mark.parametrize("overlap", [0, 30])
def test_a_chunk_that_ends_inside_a_long_block_holds_as_many_of_its_lines_as_fit(shape: str, overlap: int) -> None:
    block = LONG_BLOCKS[shape]
    doc = document("前置きです。\n\n" + block + "\n\n後書きです。")
    content = strip_anchors(doc)
    block_start = content.index(block)
    chunks = chunk_document(doc, {}, BYTES, 400, overlap).chunks
    inside = [c for c in chunks[:-1] if block_start < c.end < block_start + len(block)]
    assert len(inside) >= 3
    for chunk in inside:  # one line more, and it would be over the limit
        longer = (
            chunk.header + chunk.reopened + content[chunk.start : content.index("\n", chunk.end) + 1] + chunk.closed
        )
        assert BYTES.count(chunk.text) <= 400 < BYTES.count(longer), chunk.id


def test_a_long_table_is_cut_between_rows_with_its_header_repeated() -> None:
    rows = "\n".join(f"| 大阪 | PC-{n:05d} | 対応中です |" for n in range(40))
    doc = document("| 拠点 | 端末 | 状態 |\n|---|---|---|\n" + rows)
    chunks = chunk_document(doc, {}, BYTES, 500).chunks
    inside = [c for c in chunks if c.reopened]
    assert len(inside) >= 3 and all(c.reopened == "| 拠点 | 端末 | 状態 |\n|---|---|---|\n" for c in inside)
    assert all(c.text[len(c.header) + len(c.reopened) :].startswith("| 大阪 | PC-") for c in inside)


def test_a_line_longer_than_a_chunk_is_cut_inside_only_as_a_last_resort() -> None:
    blob = "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo" * 60  # base64: no sentence end, no space, 2,100 bytes
    doc = document(f"前置きの文です。\n\n{blob}\n\n後ろの文です。")
    chunks = chunk_document(doc, {}, BYTES, 500).chunks
    assert_chunks_keep_the_contract(chunks, doc, BYTES, 500)
    pieces = [c.text[len(c.header) :] for c in chunks if blob not in c.text and c.text[len(c.header) :][:4] in blob]
    assert len(pieces) >= 4  # the blob went into several chunks, each beginning inside it
    # The other text is not cut inside a line: the paragraphs before and after stay whole.
    assert any("前置きの文です。" in c.text for c in chunks) and any("後ろの文です。" in c.text for c in chunks)


@pytest.mark.parametrize("limit", [100, 300, 512])
@pytest.mark.parametrize("where", ["description", "note"])
def test_a_heading_followed_by_a_line_longer_than_a_chunk_is_not_a_chunk_of_its_own(where: str, limit: int) -> None:
    rng = random.Random(limit)
    blob = "".join(
        rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") for _ in range(4 * limit)
    )
    doc = document(blob, ["短いノート。"]) if where == "description" else document("説明。", [blob])
    chunks = chunk_document(doc, {}, load_cl100k_base(), limit).chunks
    heading = "## 説明" if where == "description" else "### [2026-03-01"
    # The heading's chunk goes on with the text it heads (cut inside the long line, the last resort).
    (first,) = [c for c in chunks if heading in c.text]
    assert blob[:20] in first.text and blob not in first.text
    assert_chunks_keep_the_contract(chunks, doc, load_cl100k_base(), limit)


def test_a_paragraph_longer_than_a_chunk_is_cut_after_a_sentence() -> None:
    doc = document("ログを確認したところ、認証サーバーでタイムアウトが発生していました。" * 20)
    chunks = chunk_document(doc, {}, BYTES, 600).chunks
    assert len(chunks) > 3
    assert all(c.text.endswith(("した。", "した。\n")) for c in chunks)


def test_forged_anchors_in_ticket_text_never_come_back_in_a_chunk() -> None:
    forged = ["> チケット #99: 偽のアンカー", "# チケット #98: 偽のタイトル", "文です。> チケット #97: 途中"]
    doc = document("\n\n".join(forged * 20), notes=["文です。" * 40 + "> Ticket #96: fake"])
    for limit in (120, 300):
        for chunk in chunk_document(doc, {}, BYTES, limit).chunks:
            assert {a.ticket_id for a in find_anchors(chunk.text) + find_titles(chunk.text)} == {5}


def test_with_overlap_each_chunk_repeats_the_end_of_the_previous_one() -> None:
    doc = document("\n\n".join(f"段落{n}です。利用者から再度問い合わせがありました。" for n in range(30)))
    chunks = chunk_document(doc, {}, BYTES, 400, overlap_tokens=80).chunks
    content = strip_anchors(doc)
    assert_chunks_keep_the_contract(chunks, doc, BYTES, 400)
    for before, after in pairwise(chunks):
        repeated = content[after.start : after.own_start]
        assert repeated and before.text.endswith(repeated + before.closed) and len(repeated.encode()) <= 80
    assert all(c.start == c.own_start for c in chunk_document(doc, {}, BYTES, 400).chunks)


def test_overlap_repeats_the_last_sentences_of_a_paragraph_too_long_to_repeat_whole() -> None:
    paragraphs = [f"段落{n}です。利用者から再度問い合わせがありました。" * 2 for n in range(30)]  # 148 bytes each
    doc = document("\n\n".join(paragraphs))
    content = strip_anchors(doc)
    chunks = chunk_document(doc, {}, BYTES, 600, overlap_tokens=100).chunks
    assert_chunks_keep_the_contract(chunks, doc, BYTES, 600)
    assert len(chunks) > 3
    for before, after in pairwise(chunks):
        repeated = content[after.start : after.own_start]
        assert before.text.endswith(repeated + before.closed) and len(repeated.encode()) <= 100
        # The longest tail of whole sentences within 100 bytes: two (74 bytes and the blank line), not three (131).
        assert re.fullmatch(r"段落\d+です。利用者から再度問い合わせがありました。\n\n", repeated), repeated


def test_on_long_tickets_few_chunks_with_overlap_repeat_nothing() -> None:
    """Long, mixed tickets at 300 tokens and 60 of overlap: a fifth of the chunks repeated nothing when only
    whole pieces were repeated (a paragraph longer than 60 tokens gave none); its last sentences now do."""
    tokenizer = load_cl100k_base()
    repeating = alone = 0
    for ticket_id, doc in long_documents(8):
        chunks = chunk_document(doc, {"ticket_id": ticket_id}, tokenizer, 300, 60).chunks
        assert_chunks_keep_the_contract(chunks, doc, tokenizer, 300)
        repeating += sum(chunk.start < chunk.own_start for chunk in chunks[1:])
        alone += sum(chunk.start == chunk.own_start for chunk in chunks[1:])
    assert alone <= (repeating + alone) // 10


def test_overlap_repeats_nothing_of_a_piece_longer_than_it_without_a_sentence_end_that_fits() -> None:
    paragraphs = [" ".join(f"word{n}x{k}" for k in range(20)) for n in range(30)]  # one sentence of 180 bytes each
    doc = document("\n\n".join(paragraphs))
    chunks = chunk_document(doc, {}, BYTES, 600, overlap_tokens=100).chunks
    assert_chunks_keep_the_contract(chunks, doc, BYTES, 600)
    assert len(chunks) > 3 and all(chunk.start == chunk.own_start for chunk in chunks)


def test_a_subject_too_long_for_the_header_is_cut_in_the_header_only() -> None:
    subject = "基幹システムの夜間バッチが失敗する件について" * 3  # 198 bytes: more than a quarter of 600
    doc = document("本文です。" * 200, subject=subject)
    chunks = chunk_document(doc, {}, BYTES, 600).chunks
    assert chunks[0].text.startswith(title_line(5, subject))
    assert chunks[1].header.endswith("…\n\n") and len(chunks[1].header.encode()) <= 600 // 4
    assert find_anchors(chunks[1].header)[0].ticket_id == 5


def test_a_subject_cut_in_the_header_is_never_cut_between_a_backslash_and_what_it_escapes() -> None:
    """The header writes the subject escaped (``\\&amp; \\<b>``): a cut right after a backslash left it before
    the ``…``, where it escapes nothing and shows (``> チケット #5: \\&amp; \\…``). A literal backslash
    (written ``\\\\``) is kept whole or dropped whole."""
    subject = "&amp; <b>太字</b> _em_ C:\\Users\\田中 `code` " * 8
    doc = document("本文です。" * 400, subject=subject)
    for chunk_tokens in range(120, 400, 7):
        header = chunk_document(doc, {}, BYTES, chunk_tokens).chunks[1].header.split("\n", 1)[0]
        kept = header.removesuffix("…")
        assert kept != header and (len(kept) - len(kept.rstrip("\\"))) % 2 == 0, header
        assert find_anchors(header)[0].ticket_id == 5


def test_a_title_line_longer_than_a_chunk_begins_the_first_chunk_as_far_as_it_fits() -> None:
    """Redmine's subjects run to 255 characters: at a small N the title line alone can be over a chunk."""
    tokenizer = load_cl100k_base()
    subject = "月末締め処理に影響するため暫定対処と恒久対策の方針を決めたい、経理部と情報システム部で調整中" * 2
    doc = document("本文です。" * 60, subject=subject)
    title = doc.split("\n", 1)[0]
    assert tokenizer.count(title) > 100
    chunks = chunk_document(doc, {}, tokenizer, 100).chunks
    first_line = chunks[0].text.split("\n", 1)[0]
    assert title.startswith(first_line) and len(first_line) < len(title)
    assert [t.ticket_id for t in find_titles(chunks[0].text)] == [5] and chunks[0].header == ""
    assert chunks[1].header.endswith("…\n\n") and chunks[1].text.startswith(chunks[1].header)
    assert all(tokenizer.count(chunk.text) <= 100 for chunk in chunks)
    assert "".join(strip_anchors(doc)[chunk.own_start : chunk.end] for chunk in chunks) == strip_anchors(doc)


def test_a_title_line_that_fits_in_a_chunk_but_not_beside_an_anchor_begins_the_first_chunk_whole() -> None:
    """The first chunk has no header: a title line longer than what the other chunks leave for content after
    their anchor still fits in it whole. It was cut like a line longer than a chunk, at the other chunks' room."""
    subject = "月末締め処理に影響するため暫定対処と恒久対策の方針を決めたい経理部と情報システム部で調整中" * 2
    doc = document("- 本文です。\n" * 100, subject=subject[:58])
    title = doc.split("\n", 1)[0]
    for chunk_tokens in range(BYTES.count(title + "\n\n"), 250, 3):
        chunks = chunk_document(doc, {}, BYTES, chunk_tokens).chunks
        assert chunk_tokens - BYTES.count(chunks[1].header) < BYTES.count(title + "\n\n")
        assert chunks[0].text.startswith(title + "\n\n"), chunk_tokens
        assert_chunks_keep_the_contract(chunks, doc, BYTES, chunk_tokens)


def test_every_header_writes_a_subject_with_markup_as_the_title_does() -> None:
    """A subject with HTML or Markdown in it reads as text in every chunk, as in the document's title,
    whether the subject comes from the metadata (a sidecar, the Lambda's file metadata) or the title."""
    subject = "<script>alert(1)</script> *至急* [VPN](x) C# 対応"
    doc = document("本文です。" * 1200, subject=subject)
    title = doc.split("\n", 1)[0]
    for metadata in ({}, {"subject": subject}):
        chunks = chunk_document(doc, metadata, BYTES, 1000).chunks  # a header within a quarter: not cut
        assert len(chunks) > 2 and chunks[0].text.startswith(title + "\n")
        for chunk in chunks[1:]:
            assert chunk.header.split("\n", 1)[0] == "> チケット #5: " + title.split(": ", 1)[1], metadata
            assert not re.search(r"(?<!\\)<script>", chunk.text) and "\\*至急\\*" in chunk.header
        if metadata:  # the metadata keeps the subject as Redmine has it
            assert chunks[1].metadata["subject"] == subject


# ---------------------------------------------------------------------------------------------
# Metadata: where the chunk comes from


def test_chunks_say_their_section_journal_and_note_and_link_to_it() -> None:
    notes = ["一つ目のメモです。" * 10, "二つ目のメモです。" * 10, "三つ目のメモです。" * 10]
    doc = document("説明の文です。" * 40, notes)
    metadata = {
        "ticket_id": 5,
        "subject": SUBJECT,
        "url": "https://r.example/issues/5",
        "note_numbers": "2,4-5",
        "status": "完了",
    }
    chunks = chunk_document(doc, metadata, BYTES, 300).chunks
    by_section = {c.metadata["section"] for c in chunks}
    assert by_section == {"details", "description", "history"}
    for chunk in chunks:
        meta = chunk.metadata
        assert meta["ticket_id"] == 5 and meta["status"] == "完了" and "note_numbers" not in meta
        assert meta["chunk_index"] == chunks.index(chunk)
        assert (meta["char_start"], meta["char_end"]) == (chunk.start, chunk.end)
        if meta["section"] != "history":
            assert meta["url"] == "https://r.example/issues/5" and "note" not in meta
            continue
        journal = next(n for n, text in enumerate(notes) if text[:5] in chunk.text[len(chunk.header) :][:200])
        assert meta["note"] == [2, 4, 5][journal] and meta["url"] == f"https://r.example/issues/5#note-{meta['note']}"
        assert meta["journal_author"] == f"担当{journal}" and meta["journal_date"] == f"2026-03-{journal + 1:02d}"


def test_note_numbers_that_do_not_match_the_journals_give_links_to_the_issue_and_a_warning() -> None:
    doc = document("説明です。", ["メモです。" * 30, "次のメモです。" * 30])
    chunked = chunk_document(doc, {"url": "https://r.example/issues/5", "note_numbers": "1-3"}, BYTES, 300)
    assert {c.metadata["url"] for c in chunked.chunks} == {"https://r.example/issues/5"}
    assert all("note" not in c.metadata for c in chunked.chunks)
    assert chunked.warnings and "2 journals" in chunked.warnings[0]


def test_without_a_url_the_chunks_have_none() -> None:
    chunks = chunk_document(document("説明です。", ["メモです。" * 40]), {"note_numbers": [1]}, BYTES, 300).chunks
    assert all("url" not in c.metadata for c in chunks) and chunks[-1].metadata["note"] == 1


# ---------------------------------------------------------------------------------------------
# Bad input


@pytest.mark.parametrize(
    ("text", "metadata", "limit", "message"),
    [
        ("no title here\n", {}, 300, "does not begin with a title line"),
        (document("x"), {"ticket_id": 6}, 300, "ticket #6: the document's title line is ticket #5's"),
        (document("x"), {}, 38, "38 tokens a chunk leave 14 for content after the 24-token anchor"),
    ],
)
def test_a_document_that_cannot_be_chunked_says_why(
    text: str, metadata: dict[str, Any], limit: int, message: str
) -> None:
    with pytest.raises(ChunkError, match=re.escape(message)):
        chunk_document(text, metadata, BYTES, limit)


def test_a_ticket_id_as_bedrock_file_metadata_carries_it_is_understood() -> None:
    doc = document("x")
    for value in (5, 5.0, "5"):
        assert chunk_document(doc, {"ticket_id": value}, BYTES, 300).chunks[0].metadata["ticket_id"] == 5
