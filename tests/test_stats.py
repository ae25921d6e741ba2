"""The audit's library: tokenizers, chunkers, chunk identification, coverage, limits."""

from __future__ import annotations

import gzip
import itertools
import json
import random
import re
from array import array
from itertools import accumulate
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from support.corpus import generated_document
from support.long_tickets import write_long_snapshot

from anchorkit import audit as stats
from anchorkit import parallel, tokens
from anchorkit.anchors import anchor_cuts, anchor_line, identified_ticket_ids, insert_anchors, strip_anchors, title_line
from anchorkit.audit import chunkers as chunking
from anchorkit.audit import measure
from anchorkit.markdown_blocks import COMPLEX_LINE, parse_blocks
from anchorkit.render.document import RenderOptions
from anchorkit.render.transform import TransformOptions

REPO = Path(__file__).resolve().parent.parent
SHIPPED_VOCABULARY = REPO / "anchorkit" / "data" / "cl100k_base.tiktoken.gz"
SOURCE = {"path": "test", "kind": "output"}


@pytest.fixture(scope="module")
def cl100k() -> tokens.TiktokenTokenizer:
    return tokens.load_cl100k_base()  # the vocabulary shipped with anchorkit


@pytest.fixture(scope="module")
def fixture_documents() -> list[stats.SourceDocument]:
    items = list(stats.iter_snapshot(REPO / "fixtures", TransformOptions(sidecars=True)))
    documents = [item for item in items if isinstance(item, stats.SourceDocument)]
    assert len(documents) >= 30 and len(documents) == len(items)
    return documents


def generated_documents(count: int = 40) -> list[stats.SourceDocument]:
    documents = []
    for ticket_id in range(1000, 1000 + count):
        markdown, _ = generated_document(ticket_id, long_description=ticket_id % 7 == 0)
        documents.append(stats.SourceDocument(ticket_id, f"{ticket_id}.md", markdown, None))
    return documents


def versions(
    tokenizer: tokens.Tokenizer, document: stats.SourceDocument
) -> tuple[stats.DocumentVersion, stats.DocumentVersion]:
    """The anchored and stripped versions of a document, as the audit builds them."""
    stripped = strip_anchors(document.markdown)
    cuts = anchor_cuts(document.markdown)
    [pair] = tokenizer.tokenize_pairs([document.markdown], [cuts])
    measurer = stats.Measurer(tokenizer, [])
    return measurer.versions(document, stripped, cuts, pair)


# --- tokenizers -------------------------------------------------------------------------------


def test_cl100k_base_loads_from_the_vocabulary_shipped_in_the_package(cl100k: tokens.TiktokenTokenizer) -> None:
    # Known cl100k_base encoding of "hello world": [15339, 1917].
    assert cl100k.count_many(["hello world", ""]) == [2, 0]
    [tokenized] = cl100k.tokenize_many(["VPN接続"])
    assert tokenized.byte_offset(tokenized.token_count) == len("VPN接続".encode())
    assert cl100k._encoding.n_vocab == 100277


def test_a_copy_of_the_vocabulary_plain_or_gzipped_counts_the_same(tmp_path: Path) -> None:
    plain = tmp_path / "cl100k_base.tiktoken"
    plain.write_bytes(gzip.decompress(SHIPPED_VOCABULARY.read_bytes()))
    text = "VPN接続が 10 分ごとに切断されます (error 809)。"
    counts = {tokens.load_cl100k_base(path).count(text) for path in (plain, SHIPPED_VOCABULARY)}
    assert counts == {tokens.load_cl100k_base().count(text)}


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"aGVsbG8= 0\n", "sha256"),  # readable, but not cl100k_base's
        (gzip.compress(b"aGVsbG8= 0\n"), "sha256"),
        (gzip.compress(b"aGVsbG8= 0\n")[:20], "cannot read (truncated gzip data)"),
        (b"\x1f\x8bnot gzip at all", "cannot read (Unknown compression method)"),
        (None, "cannot read (No such file or directory)"),
    ],
)
def test_a_vocabulary_file_that_is_not_cl100k_bases_is_refused_naming_the_file(
    tmp_path: Path, content: bytes | None, problem: str
) -> None:
    given = tmp_path / "given.tiktoken"
    if content is not None:
        given.write_bytes(content)
    with pytest.raises(tokens.TokenizerUnavailable, match=re.escape(problem)) as raised:
        tokens.load_cl100k_base(given)
    assert str(raised.value).startswith(f"cl100k_base vocabulary file {given}: ") and "\n" not in str(raised.value)


def test_the_vocabulary_named_by_the_environment_is_checked_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corrupt = tmp_path / "cl100k_base.tiktoken"
    corrupt.write_bytes(gzip.decompress(SHIPPED_VOCABULARY.read_bytes())[:1000])
    monkeypatch.setenv(tokens.VOCABULARY_FILE_ENV, str(corrupt))
    with pytest.raises(tokens.TokenizerUnavailable, match="is not cl100k_base's"):
        tokens.choose_tokenizer(tokens.CL100K_BASE)
    assert tokens.choose_tokenizer(tokens.APPROX).name == "approx"  # an explicit choice needs no vocabulary


def test_one_tokenizer_is_loaded_once_per_process() -> None:
    assert tokens.choose_tokenizer() is tokens.choose_tokenizer(tokens.CL100K_BASE) is tokens.load_cl100k_base()
    assert tokens.choose_tokenizer().exact and not tokens.choose_tokenizer(tokens.APPROX).exact
    with pytest.raises(ValueError, match="unknown tokenizer 'auto'"):
        tokens.choose_tokenizer("auto")


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(1, 6), min_size=1, max_size=40),
    st.lists(st.integers(0, 39), max_size=8, unique=True),
    st.lists(st.lists(st.integers(1, 6), max_size=4), min_size=5, max_size=5),
)
def test_tokens_without_cuts_read_through_the_whole_are_the_kept_tokens(
    lengths: list[int], cuts: list[int], reencoded_lengths: list[list[int]]
) -> None:
    """The pieces: ranges of the whole's tokens read through, and pieces encoded again in the gaps."""
    whole = tokens.ExactTokens(array("q", accumulate(lengths, initial=0)))
    bounds = sorted(cut for cut in cuts if cut < len(lengths))[: len(cuts) // 2 * 2]
    kept = [0, *bounds, len(lengths)]
    ranges = [(start, end) for start, end in zip(kept[::2], kept[1::2]) if end > start]
    pieces: list[tokens.Piece] = []
    here: list[int] = []  # the length of each token of the result
    moved: list[tuple[int, int]] = []  # (token of whole, the same token here)
    reencoded: list[int] = []  # where each piece encoded again starts here
    for index, (start, end) in enumerate(ranges):
        again = reencoded_lengths[index % 5]
        if again and index % 2:
            reencoded.append(len(here))
            pieces.append(tokens.Reencoded(0, 0, tokens.ExactTokens(array("q", accumulate(again, initial=0)))))
            here += again
        pieces.append((start, end))
        moved += [(token, len(here) + token - start) for token in range(start, end)]
        here += lengths[start:end]
    assume(pieces)
    view = tokens.TokensWithout(whole, pieces, [])
    copied = tokens.ExactTokens(list(accumulate(here, initial=0)))
    assert view.token_count == copied.token_count
    assert [view.byte_offset(i) for i in range(view.token_count + 1)] == list(copied.offsets)
    probes = list(range(copied.offsets[-1] + 3))
    assert view.tokens_at(probes) == copied.tokens_at(probes) == [view.token_at(offset) for offset in probes]
    assert view.kept_spans([(token, token) for token in range(len(lengths))]) == [(i, i) for _, i in moved]
    assert [start for start, _ in view.reencoded] == reencoded


@settings(max_examples=400, deadline=None)
@given(
    st.text(alphabet="\n >#|-。a1\t\r\u3000", min_size=1, max_size=60),
    st.lists(st.integers(0, 60), max_size=8, unique=True),
)
def test_the_text_without_cuts_has_the_tokens_of_its_own_encoding(
    cl100k: tokens.TiktokenTokenizer, text: str, positions: list[int]
) -> None:
    """Spliced from the whole text's tokens and the lines around each cut encoded again, wherever
    the cuts fall: the offsets of encoding the shorter text itself."""
    bounds = sorted(position for position in positions if position <= len(text))[: len(positions) // 2 * 2]
    cuts = [(start, end) for start, end in zip(bounds[::2], bounds[1::2]) if end > start]
    [(_, spliced)] = cl100k.tokenize_pairs([text], [cuts])
    [own] = cl100k.tokenize_many([tokens.without(text, cuts)])
    assert [spliced.byte_offset(i) for i in range(spliced.token_count + 1)] == [
        own.byte_offset(i) for i in range(own.token_count + 1)
    ]


def test_approx_tokens_is_calibrated_against_cl100k_on_the_fixtures(
    cl100k: tokens.TiktokenTokenizer, fixture_documents: list[stats.SourceDocument]
) -> None:
    texts = [document.markdown for document in fixture_documents]
    exact = cl100k.count_many(texts)
    estimates = [tokens.approx_tokens(text) for text in texts]
    total_error = (sum(estimates) - sum(exact)) / sum(exact)
    mean_error = sum(abs(e - x) / x for e, x in zip(estimates, exact)) / len(exact)
    assert abs(total_error) < 0.05 and mean_error < 0.08


def test_approx_tokens_counts_japanese_words_digits_and_symbols() -> None:
    assert tokens.approx_tokens("") == 0
    assert tokens.approx_tokens("接続") == 3  # 2 x 1.15, rounded up
    assert tokens.approx_tokens("hello world") == 3  # 11 letters and spaces x 0.2
    assert tokens.approx_tokens("2026") == 2
    assert tokens.approx_tokens("- [x]\n") == 5  # 4 symbols + a letter and a space x 0.2, rounded up


@pytest.mark.parametrize("tokenizer_name", ["cl100k_base", "approx"])
@pytest.mark.parametrize("source", ["fixtures", "generated"])
def test_tokenizing_once_gives_the_same_tokens_as_tokenizing_both_versions(
    source: str, tokenizer_name: str, cl100k: tokens.TiktokenTokenizer, fixture_documents: list[stats.SourceDocument]
) -> None:
    tokenizer: tokens.Tokenizer = cl100k if tokenizer_name == "cl100k_base" else tokens.ApproxTokenizer()
    documents = fixture_documents if source == "fixtures" else generated_documents()
    texts = [document.markdown for document in documents]
    stripped = [strip_anchors(text) for text in texts]
    pairs = tokenizer.tokenize_pairs(texts, [anchor_cuts(text) for text in texts])
    separately = tokenizer.tokenize_many(texts + stripped)

    def positions(tokenized: tokens.TokenizedText) -> list[int]:
        return [tokenized.byte_offset(index) for index in range(tokenized.token_count + 1)]

    for index, (anchored, bare) in enumerate(pairs):
        assert positions(anchored) == positions(separately[index])
        assert positions(bare) == positions(separately[len(texts) + index])


def test_texts_encoded_one_by_one_on_one_core_get_the_tokens_of_the_batched_encode(
    cl100k: tokens.TiktokenTokenizer, fixture_documents: list[stats.SourceDocument], monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = [document.markdown for document in fixture_documents]
    cuts = [anchor_cuts(text) for text in texts]
    batched = []
    batch = cl100k._encoding.encode_ordinary_batch
    monkeypatch.setattr(
        cl100k._encoding, "encode_ordinary_batch", lambda texts: batched.append(len(texts)) or batch(texts)
    )
    encoded = {}
    for cores in (1, 2):
        monkeypatch.setattr(tokens, "_usable_cores", lambda cores=cores: cores)
        pairs = cl100k.tokenize_pairs(texts, cuts)
        assert bool(batched) == (cores > 1)  # one core: no thread pool
        encoded[cores] = (
            [
                [list(tokenized.offsets) for tokenized in pair if isinstance(tokenized, tokens.ExactTokens)]
                for pair in pairs
            ],
            [pair[1].token_count for pair in pairs],
            cl100k.count_many(texts),
        )
    assert encoded[1] == encoded[2]
    assert encoded[1][2] == [len(cl100k._encoding.encode_ordinary(text)) for text in texts]


@pytest.mark.parametrize(("at_once", "list_below"), [(1, 0), (7, 0), (1 << 16, 0), (1 << 16, 1 << 12), (7, 1 << 30)])
def test_token_offsets_in_a_list_or_filled_part_by_part_are_the_running_sum_of_the_token_lengths(
    at_once: int, list_below: int, cl100k: tokens.TiktokenTokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tokens, "_OFFSETS_AT_ONCE", at_once)
    monkeypatch.setattr(tokens, "_LIST_OFFSETS_BELOW", list_below)
    texts = ["", "a", generated_document(3)[0], generated_document(50, long_description=True)[0]]
    for text, tokenized in zip(texts, cl100k.tokenize_many(texts)):
        ids = cl100k._encoding.encode_ordinary(text)
        expected = list(accumulate((len(cl100k._encoding.decode_single_token_bytes(i)) for i in ids), initial=0))
        assert isinstance(tokenized, tokens.ExactTokens) and list(tokenized.offsets) == expected
        assert expected[-1] == len(text.encode("utf-8"))


@pytest.mark.parametrize("block", [1, 2, 5, 1 << 12])
@pytest.mark.parametrize("buffer", [0, 1, 3])
def test_similarities_made_a_block_of_sentences_at_a_time_are_those_of_the_sentences_character_sets(
    block: int, buffer: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chunking, "_SIMILARITY_BLOCK", block)
    markdown, _ = generated_document(7)
    sentences = chunking.TextLayout(markdown).sentences
    assert len(set(sentences)) < len(sentences)  # anchors and status lines repeat: their sets are shared
    signatures = [
        set().union(*map(set, sentences[max(index - buffer, 0) : index + buffer + 1]))
        for index in range(len(sentences))
    ]
    assert list(chunking.sentence_similarities(sentences, buffer)) == chunking.neighbour_similarities(signatures)
    assert not chunking.sentence_similarities(sentences[:1], buffer) and not chunking.sentence_similarities([], buffer)


@pytest.mark.parametrize("block", [1, 30, 1 << 16])
def test_sentences_split_a_block_of_text_at_a_time_are_those_of_the_whole_text(
    block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = [generated_document(ticket_id)[0] for ticket_id in (3, 50)] + ["a\nb\n\nc。d\n", "", "x. y\n。\n\n"]
    expected = {text: chunking.TextLayout(text).sentences for text in texts}
    monkeypatch.setattr(chunking, "_SENTENCE_BLOCK_CHARS", block)
    for text in texts:
        assert chunking.TextLayout(text).sentences == expected[text]
        parts = chunking._SENTENCE_END.split(text)
        whole = [*map(str.__add__, parts[0:-1:2], parts[1::2]), *([parts[-1]] if parts[-1] else [])]
        assert expected[text] == whole


@pytest.mark.parametrize("source", ["fixtures", "generated"])
def test_the_stripped_layout_borrowed_from_the_anchored_one_is_the_stripped_text_own(
    source: str, fixture_documents: list[stats.SourceDocument]
) -> None:
    documents = fixture_documents if source == "fixtures" else generated_documents()
    for document in documents:
        _, stripped = versions(tokens.ApproxTokenizer(), document)
        fresh = chunking.TextLayout(stripped.text)
        # What the chunkers use: where sentences and headings start, and the sentences' characters. A
        # sentence that ends where a spacing anchor was cut out keeps the line break the cut took.
        assert stripped.layout.sentence_bytes == fresh.sentence_bytes
        assert [set(sentence) - {"\n"} for sentence in stripped.layout.sentences] == [
            set(sentence) - {"\n"} for sentence in fresh.sentences
        ]
        assert stripped.layout.heading_bytes == fresh.heading_bytes
        # The neighbours' similarities, most of them the anchored layout's, are those of its sentences.
        assert stripped.layout.similarities == chunking.sentence_similarities(stripped.layout.sentences)


@pytest.fixture(scope="module")
def long_documents(tmp_path_factory: pytest.TempPathFactory) -> list[stats.SourceDocument]:
    """Long tickets with the anchors after headings only: all of them whole lines between blocks
    (spacing anchors inside lists and tables are cut with the blank line before them, and the
    lines around such a cut are encoded again: the fixtures' documents have those)."""
    snapshot = tmp_path_factory.mktemp("long")
    write_long_snapshot(snapshot, 6, seed=5)
    options = TransformOptions(render=RenderOptions(chunk_tokens=0))
    return [item for item in stats.iter_snapshot(snapshot, options) if isinstance(item, stats.SourceDocument)]


@pytest.mark.parametrize("source", ["fixtures", "generated", "long"])
def test_the_stripped_versions_spans_moved_from_the_anchored_ones_are_its_own(
    source: str,
    cl100k: tokens.TiktokenTokenizer,
    fixture_documents: list[stats.SourceDocument],
    long_documents: list[stats.SourceDocument],
) -> None:
    """What names the ticket and what mentions others, moved from the anchored version, is what
    the stripped text itself gives."""
    documents = {"fixtures": fixture_documents, "generated": generated_documents(), "long": long_documents}[source]
    moved = 0
    for document in documents:
        cuts = tokens.line_aligned(document.markdown, anchor_cuts(document.markdown))
        text = tokens.without(document.markdown, cuts)
        [pair] = cl100k.tokenize_pairs([document.markdown], [cuts])
        _, stripped = stats.Measurer(cl100k, []).versions(document, text, cuts, pair)
        own = stats.DocumentVersion(text, document.ticket_id, pair[1])
        assert (stripped.identifying, stripped.mentions) == (own.identifying, own.mentions), document.relpath
        moved += isinstance(stripped, measure.StrippedVersion)
    assert moved >= 0.2 * len(documents)


# --- chunkers ---------------------------------------------------------------------------------


def test_fixed_size_chunks_are_300_token_windows_sharing_20_percent(cl100k: tokens.TiktokenTokenizer) -> None:
    document, _ = generated_document(3, long_description=True)
    [tokenized] = cl100k.tokenize_many([document])
    [chunks] = chunking.FixedSizeChunker().split(chunking.TextLayout(document), tokenized)
    assert len(chunks) > 3
    assert all(end - start == 300 for start, end in chunks[:-1])
    assert all(previous[1] - current[0] == 60 for previous, current in itertools.pairwise(chunks))
    assert chunks[0][0] == 0 and chunks[-1][1] == tokenized.token_count


def test_hierarchical_children_lie_inside_their_parents(cl100k: tokens.TiktokenTokenizer) -> None:
    document, _ = generated_document(3, long_description=True)
    [tokenized] = cl100k.tokenize_many([document])
    children, parents = chunking.HierarchicalChunker().split(chunking.TextLayout(document), tokenized)
    assert len(parents) >= 2 and all(end - start <= 1500 for start, end in parents)
    assert all(any(p0 <= c0 and c1 <= p1 for p0, p1 in parents) for c0, c1 in children)
    assert all(end - start <= 300 for start, end in children)


def test_semantic_chunks_respect_the_maximum_and_cover_the_document(cl100k: tokens.TiktokenTokenizer) -> None:
    document, _ = generated_document(3, long_description=True)
    [tokenized] = cl100k.tokenize_many([document])
    [chunks] = chunking.SemanticChunker().split(chunking.TextLayout(document), tokenized)
    assert all(0 < end - start <= 300 for start, end in chunks)
    assert chunks[0][0] == 0 and chunks[-1][1] == tokenized.token_count
    assert all(previous[1] == current[0] for previous, current in itertools.pairwise(chunks))  # buffer 0: no overlap


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="。！？\n.!? \u3000\xa0\taあ", max_size=30))
def test_sentences_end_after_full_stops_and_line_breaks(text: str) -> None:
    sentences = chunking.TextLayout(text).sentences
    assert "".join(sentences) == text and all(sentences)

    def ends_before(i: int) -> bool:  # a sentence ends just before character i
        japanese = text[i - 1] in "。！？\n" and text[i] not in "。！？\n"
        latin = i >= 2 and text[i - 2] in ".!?" and text[i - 1] == " " and not text[i].isspace()
        return japanese or latin

    assert set(accumulate(map(len, sentences[:-1]))) == {i for i in range(1, len(text)) if ends_before(i)}


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(["\n", " ", "    ", "\t", "```", "~~~", "<", "=", "-", "#", "a", "あ"]), max_size=12))
def test_complex_lines_are_found_as_the_markdown_scan_finds_them(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert chunking.has_complex_lines(text) == (COMPLEX_LINE.search(text) is not None)


def test_semantic_stand_in_breaks_where_the_wording_changes() -> None:
    sentences = ["VPNの接続が切れる。"] * 30 + ["Printer toner is empty. "] + ["VPNの接続が切れる。"] * 30
    breaks = chunking.SemanticChunker()._breakpoints(chunking.TextLayout("".join(sentences)))
    assert breaks == {30, 31}


def test_heading_chunks_start_at_headings_but_not_at_hash_lines_in_code() -> None:
    text = "# チケット #1: s\n\n## 説明\n\ntext\n\n```\n# not a heading\n```\n\n## 対応履歴\n\nmore\n"
    offsets = chunking.heading_offsets(text)
    assert [text[offset : text.index("\n", offset)] for offset in offsets] == [
        "# チケット #1: s",
        "## 説明",
        "## 対応履歴",
    ]


def test_chunkers_sized_for_another_chunk_length_keep_their_proportions() -> None:
    """Bedrock's defaults are for 300 tokens; sized for N they cut N (LangChain: characters in proportion)."""
    assert (
        chunking.default_chunkers(300)
        == chunking.default_chunkers()
        == [chunking.CHUNKERS[name]() for name in chunking.BEDROCK_LIKE + chunking.LANGCHAIN][
            : len(chunking.default_chunkers())
        ]
    )
    assert chunking.sized(chunking.HierarchicalChunker(), 2000) == chunking.HierarchicalChunker(2000, 2000, 60)
    assert chunking.sized(chunking.HierarchicalChunker(), 100) == chunking.HierarchicalChunker(1500, 100, 20)
    assert chunking.sized(chunking.LangchainRecursiveChunker(), 600) == chunking.LangchainRecursiveChunker(2000, 400)
    assert chunking.parse_chunker_spec("heading:overlap=10", 512) == chunking.HeadingChunker(512, 10)


def test_chunker_specs_parse_with_defaults_and_reject_nonsense() -> None:
    assert chunking.parse_chunker_spec("fixed") == chunking.FixedSizeChunker(300, 20)
    assert chunking.parse_chunker_spec("fixed:max_tokens=512,overlap=10") == chunking.FixedSizeChunker(512, 10)
    assert chunking.spec_of(chunking.HierarchicalChunker()) == "hierarchical:parent=1500,child=300,overlap=60"
    for bad, message in [
        ("sliding", "unknown chunker"),
        ("fixed:size=3", "key in max_tokens, overlap"),
        ("fixed:max_tokens=0", "positive integer"),
        ("fixed:overlap=100", "below 100"),
        ("hierarchical:parent=200,child=300", "child <= parent"),
        ("semantic:breakpoint=100", "from 1 to 99"),
    ]:
        with pytest.raises(ValueError, match=message):
            chunking.parse_chunker_spec(bad)


def test_a_langchain_spec_with_spaces_still_needs_langchain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chunking, "langchain_available", lambda: False)  # as without the [chunkers] extra
    hint = r"needs langchain-text-splitters \(pip install langchain-text-splitters\)$"  # any pip can install it
    for spec in ["langchain-recursive", " langchain-recursive ", " langchain-markdown:size=500"]:
        with pytest.raises(ValueError, match=hint):
            chunking.parse_chunker_spec(spec)
    assert chunking.parse_chunker_spec(" fixed ") == chunking.FixedSizeChunker()


# --- chunk identification and coverage ----------------------------------------------------------


def token_chunkers() -> list[chunking.Chunker]:
    return [chunking.CHUNKERS[name]() for name in chunking.BEDROCK_LIKE] + [
        chunking.FixedSizeChunker(max_tokens=40, overlap=0)
    ]


@pytest.mark.parametrize("source", ["fixtures", "generated"])
def test_chunk_identification_agrees_with_the_anchor_extractor_on_every_chunk(
    source: str, cl100k: tokens.TiktokenTokenizer, fixture_documents: list[stats.SourceDocument]
) -> None:
    """The fast position check must say exactly what identified_ticket_ids says of the chunk's text."""
    documents = fixture_documents if source == "fixtures" else generated_documents(15)
    checked = 0
    for document in documents:
        for version in versions(cl100k, document):
            data = version.text.encode("utf-8")
            for chunker in token_chunkers():
                for chunks in chunker.split(version.layout, version.tokens):  # type: ignore[union-attr]
                    for start, end in chunks:
                        text = data[version.tokens.byte_offset(start) : version.tokens.byte_offset(end)].decode(
                            "utf-8", "replace"
                        )
                        assert version.identifies((start, end)) == (
                            document.ticket_id in identified_ticket_ids(text)
                        ), (document.relpath, text)
                        checked += 1
    assert checked > 1000


def tallies_chunk_by_chunk(
    split: list[list[chunking.Span]], version: stats.DocumentVersion
) -> list[measure.ChunkTally]:
    """What the audit counts of each chunker level, asked of each chunk in turn."""
    tallies = []
    for chunks in split:
        identified = [version.identifies(chunk) for chunk in chunks]
        longest = run_start = 0
        for index, (start, end) in enumerate(chunks):
            if not identified[index]:
                run_start = start if index == 0 or identified[index - 1] else run_start
                longest = max(longest, end - run_start)
        mentioning = sum(version.mentions_other(chunk) for chunk in chunks)
        tallies.append(measure.ChunkTally(len(chunks), sum(identified), mentioning, longest))
    return tallies


@pytest.mark.parametrize("tokenizer_name", ["cl100k_base", "approx"])
def test_the_tallies_of_every_chunker_level_are_those_of_each_chunk_asked_in_turn(
    tokenizer_name: str, cl100k: tokens.TiktokenTokenizer, fixture_documents: list[stats.SourceDocument]
) -> None:
    tokenizer: tokens.Tokenizer = cl100k if tokenizer_name == "cl100k_base" else tokens.ApproxTokenizer()
    unidentified = mentioning = 0
    for document in fixture_documents + generated_documents(15):
        for version in versions(tokenizer, document):
            for chunker in token_chunkers():
                split = chunker.split(version.layout, version.tokens)  # type: ignore[union-attr]
                tallies = measure._token_tallies(split, version)
                assert tallies == tallies_chunk_by_chunk(split, version), (document.relpath, chunker)
                unidentified += sum(tally.chunks - tally.identified for tally in tallies)
                mentioning += sum(tally.mentioning_other for tally in tallies)
    assert unidentified > 100 and mentioning > 100  # both counts were put to the test


def test_chunks_mentioning_another_ticket_are_counted() -> None:
    markdown = insert_anchors(f"{title_line(5, 's')}\n\n## 説明\n\n#4 と同じ症状。\n", 5, "s")
    [(tokenized, _)] = tokens.ApproxTokenizer().tokenize_pairs([markdown], [[]])
    version = stats.DocumentVersion(markdown, 5, tokenized)
    whole_document = (0, tokenized.token_count)
    title_only = (0, tokenized.token_at(len(title_line(5, "s").encode())))
    assert version.mentions_other(whole_document) and version.identifies(whole_document)
    assert version.identifies(title_only) and not version.mentions_other(title_only)


@pytest.mark.parametrize("tokenizer_name", ["cl100k_base", "approx"])
def test_anchors_raise_coverage_under_every_chunker(tokenizer_name: str, cl100k: tokens.TiktokenTokenizer) -> None:
    tokenizer = cl100k if tokenizer_name == "cl100k_base" else tokens.ApproxTokenizer()
    report = stats.audit(generated_documents(), tokenizer, chunking.default_chunkers(), SOURCE)
    assert report["tokenizer"]["name"] == tokenizer_name
    rows = {(row["chunker"], row["level"]): row for row in report["chunking"]}
    assert {
        ("fixed", "chunks"),
        ("hierarchical", "children"),
        ("hierarchical", "parents"),
        ("semantic", "chunks"),
        ("heading", "chunks"),
    } <= set(rows)
    for row in rows.values():
        assert row["anchored"]["coverage_percent"] > row["stripped"]["coverage_percent"], row["chunker"]
    fixed = rows[("fixed", "chunks")]
    assert fixed["anchored"]["coverage_percent"] >= 2 * fixed["stripped"]["coverage_percent"]
    overhead = report["overhead"]
    assert overhead["tokens_with_anchors"] > overhead["tokens_without_anchors"] > 0
    assert (
        overhead["per_ticket_percent"]["p50"]
        <= overhead["per_ticket_percent"]["p90"]
        <= overhead["per_ticket_percent"]["max"]
    )
    assert sum(b["count"] for b in overhead["histogram"]["bins"]) == report["source"]["documents"] == 40
    assert (
        overhead["longest_anchorless_run"]["anchored"]["tokens"]
        < overhead["longest_anchorless_run"]["stripped"]["tokens"]
    )


def test_langchain_splitters_are_measured_when_installed() -> None:
    pytest.importorskip("langchain_text_splitters")  # an optional extra: absent means "not measured", by design
    chunkers = [chunking.parse_chunker_spec("langchain-recursive"), chunking.parse_chunker_spec("langchain-markdown")]
    report = stats.audit(generated_documents(), tokens.ApproxTokenizer(), chunkers, SOURCE)
    recursive, markdown = report["chunking"]
    assert recursive["unit"] == markdown["unit"] == "characters"
    assert recursive["anchored"]["coverage_percent"] > recursive["stripped"]["coverage_percent"]
    # MarkdownHeaderTextSplitter moves the title into metadata: without anchors no chunk names its ticket.
    assert markdown["stripped"]["coverage_percent"] == 0 < markdown["anchored"]["coverage_percent"]


def test_jobs_give_the_same_report(cl100k: tokens.TiktokenTokenizer) -> None:
    documents = generated_documents(parallel.DEFAULT_BATCH_SIZE + 20)
    chunkers = chunking.default_chunkers()
    single = stats.audit(documents, cl100k, chunkers, SOURCE, jobs=1)
    assert stats.audit(documents, cl100k, chunkers, SOURCE, jobs=2) == single
    assert stats.audit(documents, cl100k, chunkers, SOURCE) == single  # jobs=0: a pool per core past one batch


# --- limits audit ------------------------------------------------------------------------------


def document(ticket_id: int, markdown: str, sidecar: bytes | None = None) -> stats.SourceDocument:
    return stats.SourceDocument(ticket_id, f"{ticket_id}.md", markdown, sidecar)


def test_limits_audit_finds_each_kind_of_problem() -> None:
    clean, _ = generated_document(1)
    in_code = f"{title_line(2, 's')}\n\n```\n{anchor_line(2, 's')}\n```\n"
    duplicated = f"{title_line(3, 's')}\n\n## 説明\n\n{anchor_line(3, 's')}\n\n{anchor_line(3, 's')}\n\ntext\n"
    foreign = f"{title_line(4, 's')}\n\n## 説明\n\n{anchor_line(99, 'other')}\n\ntext\n"
    big_sidecar = json.dumps({"metadataAttributes": {"notes": "x" * 11_000}}).encode()
    bad_values = json.dumps(
        {"metadataAttributes": {"x-amz-bedrock-kb-id": "1", "tags": [str(i) for i in range(11)]}}
    ).encode()
    typed_long = json.dumps(
        {"metadataAttributes": {"subject": {"value": {"type": "STRING", "stringValue": "y" * 2049}}}}
    ).encode()
    items = [
        document(1, clean, b'{"metadataAttributes": {"ticket_id": 1}}'),
        document(2, in_code),
        document(3, duplicated),
        document(4, foreign, b"not json"),
        document(5, clean.replace("#1:", "#5:"), big_sidecar),
        document(6, clean.replace("#1:", "#6:"), bad_values),
        document(7, clean.replace("#1:", "#7:"), typed_long),
        stats.OversizedDocument(8, "8.md", 60 * 1024 * 1024),
        document(9, f"{title_line(9, 's')}\n\n## 基本情報\n\n- ステータス: 新規\n"),
    ]
    report = stats.audit(items, tokens.ApproxTokenizer(), [chunking.FixedSizeChunker()], SOURCE)
    limits = report["limits"]
    found = {name: [item["ticket_id"] for item in finding["items"]] for name, finding in limits.items()}
    assert found == {
        "documents_over_50mb": [8],
        "sidecars_over_10kb": [5],
        "sidecar_values_too_long": [5, 6, 7],
        "sidecars_invalid": [4],
        "documents_without_anchor": [9],
        "anchors_in_code_blocks": [2],
        "duplicated_anchors": [3],
        "anchors_of_other_tickets": [4],
    }
    assert limits["anchors_in_code_blocks"]["items"][0]["lines"] == [4]
    assert limits["anchors_of_other_tickets"]["items"][0]["other_ticket_ids"] == [99]
    problems = limits["sidecar_values_too_long"]["items"][1]["problems"]
    assert any("reserved key prefix" in p for p in problems) and any("11 items" in p for p in problems)


def test_fixture_documents_are_within_every_limit(fixture_documents: list[stats.SourceDocument]) -> None:
    report = stats.audit(fixture_documents, tokens.ApproxTokenizer(), [chunking.FixedSizeChunker()], SOURCE)
    assert {name: finding["count"] for name, finding in report["limits"].items() if finding["count"]} == {}


def test_output_folder_reading_reports_bad_files_and_goes_on(tmp_path: Path) -> None:
    good, _ = generated_document(1)
    (tmp_path / "1.md").write_text(good, encoding="utf-8")
    (tmp_path / "helpdesk").mkdir()
    (tmp_path / "helpdesk" / "2.md").write_bytes(b"# \xff\xfe broken\n")
    with open(tmp_path / "3.md", "wb") as huge:
        huge.truncate(stats.MAX_DOCUMENT_BYTES + 1)  # sparse: no 50 MB written
    (tmp_path / "notes.md").write_text("not a ticket document", encoding="utf-8")
    items = list(stats.iter_output_folder(tmp_path))
    assert [type(item).__name__ for item in items] == ["SourceDocument", "OversizedDocument", "UnreadableDocument"]
    assert items[2].message.startswith("helpdesk/2.md: not valid UTF-8")  # type: ignore[union-attr]


@pytest.mark.parametrize("size,overlap", [(300, 60), (256, 51), (10, 0), (7, 6), (5, 4)])
def test_windows_counted_from_the_spans_match_counting_window_by_window(size: int, overlap: int) -> None:
    rng = random.Random(size * 100 + overlap)
    for _ in range(200):
        token_count = rng.randint(0, 3 * size)
        starts = sorted(rng.sample(range(token_count), min(token_count, rng.randint(0, 6)))) if token_count else []
        spans = []
        for start in starts:
            if spans and start <= spans[-1][1]:
                continue
            spans.append((start, min(start + rng.randint(0, 12), token_count - 1)))
        windows = chunking.windows(0, token_count, size, overlap)
        starts_only = [start for start, _ in spans]
        by_window = sum(measure._covers(window, spans, starts_only) for window in windows)
        assert stats.identified_windows(spans, token_count, size, overlap) == (len(windows), by_window)
        version = stats.DocumentVersion("", 1, tokens.InterpolatedTokens([0, token_count], [0, token_count]))
        version.identifying, version.mentions = spans, spans[::2]  # as the document's lines would give them
        assert stats.window_tally(version, size, overlap) == measure._token_tallies([windows], version)[0]


@pytest.mark.parametrize(
    ("content", "window", "anchor"),
    [(1000, 300, 25), (9000, 300, 40), (9000, 512, 60), (301, 300, 10), (5000, 256, 100)],
)
def test_the_lower_bound_is_what_an_ideal_placement_needs_for_every_window(
    content: int, window: int, anchor: int
) -> None:
    needed = stats.anchors_needed(content, window, anchor)
    assert needed is not None

    def every_window_identified(anchors: int) -> bool:
        # The title (anchor tokens long) at 0, then anchors as far apart as a whole anchor per window allows.
        length = content + anchors * anchor
        spans = [(index * (window - anchor), index * (window - anchor) + anchor - 1) for index in range(anchors + 1)]
        spans = [span for span in spans if span[1] < length]
        windows, identified = stats.identified_windows(spans, length, window, window - 1)  # every window: step 1
        return len(spans) == anchors + 1 and windows == identified

    assert every_window_identified(needed)
    assert needed == 0 or not every_window_identified(needed - 1)


def test_the_bound_is_zero_for_short_tickets_and_undefined_for_anchors_half_a_window_long() -> None:
    assert stats.anchors_needed(300, 300, 40) == 0
    assert stats.anchors_needed(1000, 300, 150) is None


def test_line_aligned_cuts_remove_the_same_text_and_start_where_lines_start(
    fixture_documents: list[stats.SourceDocument],
) -> None:
    moved = 0
    for document in fixture_documents:
        text = document.markdown
        cuts = anchor_cuts(text)
        aligned = tokens.line_aligned(text, cuts)
        assert tokens.without(text, aligned) == tokens.without(text, cuts) == strip_anchors(text)
        assert all(start == 0 or text[start - 1] == "\n" for start, _ in aligned if text[start] != "\n")
        assert all(end1 <= start2 for (_, end1), (start2, _) in itertools.pairwise(aligned))
        moved += aligned != cuts
    assert moved  # the spacing anchors' cuts start with the blank line before them: aligning moves them


def _parsed_layout(text: str) -> chunking.BlockLayout:
    parsed = parse_blocks(text)
    line_starts = [0, *(index + 1 for index, character in enumerate(text) if character == "\n")]
    return chunking.BlockLayout(
        tuple(line_starts[t.map[0]] for t in parsed if t.type == "heading_open" and t.map),
        tuple((t.map[0], t.map[1]) for t in parsed if t.type in ("fence", "code_block") and t.map),
    )


def test_the_line_scan_finds_the_headings_and_code_blocks_markdown_it_finds(tmp_path: Path) -> None:
    write_long_snapshot(tmp_path, 12, seed=3)
    texts = [
        document.markdown
        for document in stats.iter_snapshot(tmp_path, TransformOptions())
        if isinstance(document, stats.SourceDocument)
    ]
    texts += [generated_document(ticket_id)[0] for ticket_id in range(1, 60)]
    rng = random.Random(5)
    pieces = [
        "```",
        "```python",
        "~~~",
        "````",
        "``` a`b",
        "  ```",
        "# 見出し",
        "## h",
        "text",
        "- item",
        "    indented",
        "> quote",
        "",
        "<div>",
        "---",
        "#nospace",
        "<pre>",
        "<PRE class=log>",
        "</pre>",
        "log </Pre> after",
        "<pre>one line</pre>",
        "<script",
        "</script>",
        "<prefix>",
        " <pre>",
        "- <pre>",
    ]
    texts += ["\n".join(rng.choice(pieces) for _ in range(rng.randint(1, 30))) for _ in range(400)]
    scanned = 0
    for text in texts:
        layout = chunking._scanned_layout(text)
        if layout is not None:
            scanned += 1
            assert layout == _parsed_layout(text), text
    assert scanned > len(texts) // 4  # the scan serves most documents with code blocks


def test_a_cached_attribute_is_computed_once_then_read_as_a_plain_attribute() -> None:
    calls = []

    class Text:
        @chunking.cached_attribute
        def size(self) -> int:
            calls.append(self)
            return 3

    class Shorter(Text):
        @chunking.cached_attribute
        def size(self) -> int:
            return 2

    text, shorter = Text(), Shorter()
    assert (text.size, text.size, shorter.size) == (3, 3, 2) and calls == [text]
    assert vars(text) == {"size": 3} and isinstance(Text.size, chunking.cached_attribute)
    text.size = 5  # as the tests set a version's spans
    assert text.size == 5
