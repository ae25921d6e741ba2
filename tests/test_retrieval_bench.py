"""The retrieval benchmark's measures and corpus (tests/benchmarks/bench_retrieval.py): no servers, no models.

Each measure is checked on a hand-made example whose answer is worked out in the test; the corpus must
be the same for a seed, and every question must have exactly one right ticket whose text holds the facts
that answer it, also once transform has rendered it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import tiktoken
from support.retrieval_corpus import DEEP_JOURNALS, RetrievalCorpus, public_text, write_retrieval_snapshot
from support.retrieval_metrics import (
    fixed_windows,
    named_tickets,
    noise_margin,
    reciprocal_rank_fusion,
    score,
    short_anchor_count,
    strip_heading_anchors,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_score_counts_a_hit_an_attribution_and_the_reciprocal_rank_of_each_question() -> None:
    chunk_tickets = [1, 1, 2, 3, 2]
    chunk_names = [{1}, set(), {2}, {3}, {1}]  # chunk 0 holds #1's title; 1 is blind; 4 (of #2) names #1
    rankings = [
        [3, 1, 4, 0, 2],  # for #1: chunk 1 (blind) at rank 2; chunk 0, which names #1, only at rank 4
        [0, 3, 1, 2],  # for #2: its first chunk at rank 4
        [3],  # for #3: its own named chunk first
    ]
    scores = score(rankings, [1, 2, 3], chunk_tickets, chunk_names, k=3, mrr_depth=10)
    assert scores.questions == 3
    # #2's chunk is not in its top 3.
    assert scores.recall == pytest.approx(2 / 3)
    # Only #3: #1's top 3 holds a chunk of #1 that names no ticket, and chunk 4 names #1 but is #2's.
    assert scores.attributable == pytest.approx(1 / 3)
    assert scores.mrr == pytest.approx((1 / 2 + 1 / 4 + 1) / 3)
    # Past the MRR depth a question adds nothing.
    assert score(rankings, [1, 2, 3], chunk_tickets, chunk_names, k=3, mrr_depth=3).mrr == pytest.approx(1.5 / 3)
    # In the top 5, chunk 0 names #1 and chunk 2 names #2: every answer is found and attributable.
    top5 = score(rankings, [1, 2, 3], chunk_tickets, chunk_names, k=5)
    assert (top5.recall, top5.attributable) == (1.0, 1.0)


def test_a_chunk_names_a_ticket_by_its_anchor_its_short_anchor_or_its_title_and_by_nothing_else() -> None:
    chunk = "\n".join(
        [
            "# チケット #12: タイトル",
            "> チケット #34: 件名",
            "> チケット #56:",
            "> Ticket #78",
            "## 基本情報",
            "> 参照 \\#90: 本文中の偽の anchor（transform がエスケープしたもの）",
            "本文 > チケット #91: 行の途中",
            "> see #92 for details",
            "> チケット #123",  # the chunk ends here: cut inside the id, it names nothing
        ]
    )
    assert named_tickets(chunk) == {12, 34, 56, 78}
    assert short_anchor_count(chunk) == 3  # #56:, #78 and the cut #123 line (a document's lines are whole)


def test_stripping_takes_out_exactly_the_anchors_of_a_contract_only_document(tmp_path: Path) -> None:
    document = "# チケット #5: 件名\n\n## 説明\n\n> チケット #5: 件名\n\n本文\n\n## 対応履歴\n\n> チケット #5: 件名\n"
    assert strip_heading_anchors(document) == "# チケット #5: 件名\n\n## 説明\n\n本文\n\n## 対応履歴\n\n"

    out = tmp_path / "out"
    transform = [
        sys.executable,
        "-m",
        "anchorkit",
        "transform",
        str(FIXTURES),
        "--out",
        str(out),
        "--chunk-tokens",
        "0",
    ]
    subprocess.run(transform, check=True, capture_output=True, cwd=tmp_path)
    for path in sorted(out.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        stripped = strip_heading_anchors(text)
        assert named_tickets(stripped) == {int(path.stem)}, path.name  # the title, nothing else
        anchors = [line for line in text.split("\n") if line.startswith("> ") and named_tickets(line + "\n")]
        assert anchors, path.name
        # Each anchor went with the blank line after it, and nothing else did.
        assert len(text.split("\n")) - len(stripped.split("\n")) == 2 * len(anchors), path.name
        assert [line for line in stripped.split("\n") if line] == [
            line for line in text.split("\n") if line and line not in anchors
        ], path.name


def _bytes_encoding() -> tiktoken.Encoding:
    """A tokenizer whose tokens are single bytes: windows of N tokens are N bytes, easy to work out."""
    ranks = {bytes([value]): value for value in range(256)}
    return tiktoken.Encoding("bytes", pat_str=r"[\s\S]", mergeable_ranks=ranks, special_tokens={})


def test_fixed_windows_have_the_size_and_overlap_asked_for_and_cover_the_text() -> None:
    encoding = _bytes_encoding()
    assert fixed_windows("abcdefghijklmnopqrstuvwxyz", encoding, size=10, overlap=2) == [
        "abcdefghij",
        "ijklmnopqr",
        "qrstuvwxyz",
    ]
    assert fixed_windows("", encoding) == []
    # Japanese characters are three tokens here: a character cut by a window's edge is in the window
    # that holds its last token (あ い | う: tokens 0-5 | 6-8, the first window ends at token 7).
    windows = fixed_windows("あいうえおかきくけこ", encoding, size=7, overlap=2)
    assert windows == ["あい", "いうえ", "えお", "かき", "きくけ", "けこ"]


def test_reciprocal_rank_fusion_adds_one_over_k_plus_rank_from_every_list() -> None:
    # 1: 1/61 + 1/62, 3: 1/63 + 1/61, 2: 1/62
    assert reciprocal_rank_fusion([[1, 2, 3], [3, 1]], k=60) == [1, 3, 2]
    assert reciprocal_rank_fusion([[7]]) == [7]


def test_noise_margin_is_two_standard_errors() -> None:
    assert noise_margin(0.5, 400) == pytest.approx(0.05)
    assert noise_margin(0.9, 100) == pytest.approx(0.06)


def _corpus(folder: Path, seed: int = 0) -> RetrievalCorpus:
    return write_retrieval_snapshot(folder, tickets=160, seed=seed)


def _files(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def test_the_corpus_is_the_same_for_a_seed_and_another_for_another_seed(tmp_path: Path) -> None:
    first, again, other = _corpus(tmp_path / "a"), _corpus(tmp_path / "b"), _corpus(tmp_path / "c", seed=1)
    assert first == again
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    assert first.questions != other.questions
    assert _files(tmp_path / "a") != _files(tmp_path / "c")


def test_every_question_has_one_right_ticket_holding_its_facts(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path)
    issues = {
        ticket_id: json.loads((tmp_path / "issues" / f"{ticket_id}.json").read_text(encoding="utf-8"))["issue"]
        for ticket_id in corpus.ticket_ids
    }
    texts = {ticket_id: public_text(issue) for ticket_id, issue in issues.items()}
    assert len(corpus.questions) >= 300
    for question in corpus.questions:
        owners = [ticket_id for ticket_id, text in texts.items() if all(fact in text for fact in question.key_facts)]
        assert owners == [question.ticket_id], question
        assert all(fact in texts[question.ticket_id] for fact in question.answer_facts), question
        assert all(fact in question.text for fact in question.key_facts), question
    assert not {question.ticket_id for question in corpus.questions} & set(corpus.private_ticket_ids)
    assert all(issues[ticket_id]["is_private"] for ticket_id in corpus.private_ticket_ids)


def test_the_corpus_has_the_shapes_a_real_desk_has(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path)
    issues = [json.loads(path.read_text(encoding="utf-8"))["issue"] for path in (tmp_path / "issues").glob("*.json")]
    journals = [len(issue["journals"]) for issue in issues]
    assert len(issues) == 160 and max(journals) >= 30 and min(journals) <= 2
    assert sum(count >= DEEP_JOURNALS for count in journals) >= 30
    descriptions = [issue["description"] for issue in issues]
    assert any(text.startswith("h2. ") and "<pre" in text for text in descriptions)  # Textile
    assert any(text.startswith("## ") and "```" in text for text in descriptions)  # CommonMark
    assert any(journal["private_notes"] for issue in issues for journal in issue["journals"])
    assert any(issue["relations"] for issue in issues)  # recurrences on the same host
    subjects = [issue["subject"] for issue in issues]
    assert len(set(subjects)) < len(subjects)  # near-duplicates: the same subject more than once
    assert sum(question.deep for question in corpus.questions) >= 50
    assert any(question.text.isascii() for question in corpus.questions)  # English questions too


def test_the_facts_survive_transform(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "snapshot")
    out = tmp_path / "out"
    transform = [sys.executable, "-m", "anchorkit", "transform", str(tmp_path / "snapshot"), "--out", str(out)]
    subprocess.run([*transform, "--chunk-tokens", "0"], check=True, capture_output=True, cwd=tmp_path)
    documents = {int(path.stem): path.read_text(encoding="utf-8") for path in out.glob("*.md")}
    assert set(documents) == set(corpus.ticket_ids) - set(corpus.private_ticket_ids)
    for question in corpus.questions:
        document = documents[question.ticket_id]
        assert all(fact in document for fact in (*question.key_facts, *question.answer_facts)), question
