"""`anchorkit stats` on a huge document: memory a small multiple of the document, the same figures whatever the
sizes of the parts it is worked through in, and `--max-text-bytes` for a snapshot whose tickets transform only
renders with it."""

from __future__ import annotations

import json
import random
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from support.long_tickets import long_issue, lookups
from typer.testing import CliRunner

from anchorkit import tokens
from anchorkit.audit import chunkers as chunking
from anchorkit.audit.measure import Measurer
from anchorkit.audit.sources import SourceDocument, iter_snapshot
from anchorkit.cli import app
from anchorkit.render.transform import TransformOptions

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TICKET_ID = 70001
LOG_LINES = 20_000  # a journal of ~2 MB: over transform's default --max-text-bytes (1,000,000)
RAISED_LIMIT = 10_000_000
PEAK_BOUND = 10  # times the document's UTF-8 size (37 times before: the sentences' character sets, the token ids)
runner = CliRunner()


@pytest.fixture(scope="module")
def log_snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A snapshot of one long ticket whose journal pastes a log of ``LOG_LINES`` lines in ``<pre>``, as people
    used to Textile do (CommonMark reads it as an HTML block)."""
    folder = tmp_path_factory.mktemp("log-snapshot")
    rng = random.Random(1)
    issue = long_issue(TICKET_ID, random.Random(TICKET_ID))
    log = "\n".join(
        f"2026-03-01T00:{line // 60 % 60:02d}:{line % 60:02d}Z app[{line % 97}]: request {line} handled in "
        f"{rng.randrange(1, 999)} ms status=200 path=/api/v1/items/{line}"
        for line in range(LOG_LINES)
    )
    issue["journals"][3]["notes"] = "ログを貼ります。\n\n<pre>\n" + log + "\n</pre>"
    (folder / "issues").mkdir()
    (folder / "issues" / f"{TICKET_ID}.json").write_text(json.dumps({"issue": issue}, ensure_ascii=False), "utf-8")
    (folder / "lookups.json").write_text(json.dumps(lookups(), ensure_ascii=False), encoding="utf-8")
    (folder / "state.json").write_text((FIXTURES / "state.json").read_text(encoding="utf-8"), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def log_document(log_snapshot: Path) -> SourceDocument:
    (document,) = iter_snapshot(log_snapshot, TransformOptions(max_text_bytes=RAISED_LIMIT))
    assert isinstance(document, SourceDocument)
    return document


def _bedrock_like_and_a_buffer() -> list[chunking.Chunker]:
    return [chunking.CHUNKERS[name]() for name in chunking.BEDROCK_LIKE] + [
        chunking.parse_chunker_spec("semantic:buffer=2")
    ]


def test_measuring_a_huge_document_takes_a_small_multiple_of_its_size(log_document: SourceDocument) -> None:
    size = len(log_document.markdown.encode("utf-8"))
    assert size > 2_000_000
    measurer = Measurer(tokens.load_cl100k_base(), [chunking.CHUNKERS[name]() for name in chunking.BEDROCK_LIKE])
    measurer.measure_batch([SourceDocument(1, "1.md", "# a\n\n> チケット #1: a\n", None)])  # caches filled
    # What is kept by text is dropped: the peak is then what measuring the document itself takes.
    chunking.block_layout.cache_clear()
    chunking.has_complex_lines.cache_clear()
    tracemalloc.start()
    try:
        (measured,) = measurer.measure_batch([log_document])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert measured.tokens_with_anchors > 500_000  # measured, not refused
    assert peak < PEAK_BOUND * size, f"peak {peak / size:.1f} times the document"


def test_the_figures_do_not_depend_on_the_parts_a_huge_document_is_worked_through_in(
    log_document: SourceDocument, monkeypatch: pytest.MonkeyPatch
) -> None:
    measurer = Measurer(tokens.load_cl100k_base(), _bedrock_like_and_a_buffer())
    whole = {  # each part as large as the document: everything at once, as before
        (tokens, "_ENCODED_AT_ONCE"): 1 << 40,
        (chunking, "_SIMILARITY_BLOCK"): 1 << 40,
        (chunking, "_SENTENCE_BLOCK_CHARS"): 1 << 40,
    }
    for (module, name), value in whole.items():
        monkeypatch.setattr(module, name, value)
    chunking.block_layout.cache_clear()
    expected = measurer.measure_batch([log_document])
    for sizes in ((1 << 12, 7, 1 << 10), (1 << 16, 1 << 10, 1 << 16)):
        for (module, name), value in zip(whole, sizes):
            monkeypatch.setattr(module, name, value)
        chunking.block_layout.cache_clear()
        assert measurer.measure_batch([log_document]) == expected, sizes


@pytest.mark.parametrize("at_once", [1, 5, 64])
def test_a_long_text_encoded_part_by_part_has_the_tokens_of_the_whole(
    at_once: int, log_document: SourceDocument, monkeypatch: pytest.MonkeyPatch
) -> None:
    cl100k = tokens.load_cl100k_base()
    monkeypatch.setattr(tokens, "_ENCODED_AT_ONCE", at_once)
    rng = random.Random(at_once)
    pieces = ["\n", " ", "  \n", "\n\n", "a", "漢字", "\t", "1234", "!!", "'s", "\u3000", "\u00a0x", "\n ", "\r\n"]
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 200))) for _ in range(300)]
    texts.append(log_document.markdown[:200_000])
    for text, tokenized in zip(texts, cl100k.tokenize_many(texts)):
        ids = cl100k._encoding.encode_ordinary(text)
        assert isinstance(tokenized, tokens.ExactTokens)
        assert tokenized.token_count == len(ids), repr(text)
        assert list(tokenized.offsets) == list(cl100k._exact(ids).offsets), repr(text)
        assert tokens.approx_tokens(text) == (tokens._twentieths(text) + 19) // 20
        offsets = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, 5)))
        assert tokens.byte_offsets(text, offsets) == [len(text[:offset].encode("utf-8")) for offset in offsets]


def _stats(*arguments: str) -> tuple[int, dict[str, Any]]:
    result = runner.invoke(app, ["stats", *arguments, "--json", "--lengths", "none", "--chunking", "fixed"])
    return result.exit_code, json.loads(result.stdout)


@pytest.mark.usefixtures("clean_cli_environment")
def test_max_text_bytes_lets_stats_measure_a_snapshot_ticket_over_the_default_limit(log_snapshot: Path) -> None:
    code, report = _stats(str(log_snapshot))
    assert code == 1 and report["source"]["documents"] == 0
    (error,) = report["errors"]
    assert f"#{TICKET_ID}" in error["message"] and "--max-text-bytes" in error["message"]
    assert report["rendering"]["options"]["max_text_bytes"] == 1_000_000  # transform's default, as applied

    code, report = _stats(str(log_snapshot), "--max-text-bytes", str(RAISED_LIMIT))
    assert code == 0 and report["errors"] == [] and report["source"]["documents"] == 1
    assert report["rendering"]["options"]["max_text_bytes"] == RAISED_LIMIT
    assert report["overhead"]["tokens_with_anchors"] > 500_000


@pytest.mark.usefixtures("clean_cli_environment")
def test_max_text_bytes_from_transform_settings_applies_and_is_a_usage_error_on_an_output_folder(
    log_snapshot: Path, tmp_path: Path
) -> None:
    Path("anchorkit.toml").write_text(f"[transform]\nmax_text_bytes = {RAISED_LIMIT}\n", encoding="utf-8")
    code, report = _stats(str(log_snapshot))
    assert code == 0 and report["rendering"]["options"]["max_text_bytes"] == RAISED_LIMIT
    code, report = _stats(str(log_snapshot), "--max-text-bytes", "5")  # the command line wins
    assert code == 1 and report["rendering"]["options"]["max_text_bytes"] == 5

    out = tmp_path / "out"
    out.mkdir()
    (out / "1.md").write_text("# a\n\n> チケット #1: a\n", encoding="utf-8")
    result = runner.invoke(app, ["stats", str(out), "--max-text-bytes", "5"])
    assert result.exit_code == 2 and "--max-text-bytes" in result.stderr and "snapshot input only" in result.stderr
