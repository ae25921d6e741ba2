"""The chunker's shortcuts to exact counts give what the plain way gives.

The plain way: the content tokenized whole, with every token's offset (``TextTokens``), each chunk's
text encoded whole, the content's anchors found by a scan of all of it. The shortcuts (the content
counted run by run, a chunk cut inside a line counted from its first and last lines, the scan
skipped when no line after the title holds ``#<id>:``) must agree with it everywhere, or chunks
would differ from what the plain way cuts.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anchorkit.anchors import find_anchors, find_titles, strip_anchors
from anchorkit.chunk.core import _Chunker, document_outline
from anchorkit.chunk.positions import TextTokens, TokenPositions
from anchorkit.tokens import ends_letters, load_cl100k_base
from tests.test_chunk import document, fixture_documents, long_documents

TOKENIZER = load_cl100k_base()

# Lines that start with white space, blank lines holding some, ideographic spaces, CRLF, tabs, a line
# longer than a chunk: where a run of lines may or may not start.
AWKWARD = document(
    "行頭に空白:\n\n    indented code\n    more\n\n\u3000全角空白で始まる行\n \n\t\ttabs\r\nCRLF line\r\n\n"
    + "x" * 900
    + "\n  - nested\n    - item\n\n\n\nend。"
)


def contents() -> list[str]:
    documents = [doc for _, doc in fixture_documents()] + [doc for _, doc in long_documents(6)] + [AWKWARD]
    return [strip_anchors(doc) for doc in documents]


def test_the_content_counted_run_by_run_has_the_tokens_it_has_tokenized_whole() -> None:
    for content in contents():
        runs, whole = TokenPositions(content, TOKENIZER), TextTokens(content, TOKENIZER)
        assert runs.firsts[-1] == whole.tokens.token_count == TOKENIZER.count(content)
        line_starts = [0] + [index + 1 for index, char in enumerate(content) if char == "\n"]
        positions = sorted({*line_starts, *range(0, len(content) + 1, 7), len(content)})
        assert [runs.at(position) for position in positions] == [whole.at(position) for position in positions]
        tokens = range(0, whole.tokens.token_count + 1, 5)
        assert [runs.position(token) for token in tokens] == [whole.position(token) for token in tokens]


def test_positions_in_a_long_line_are_those_of_its_encoded_text() -> None:
    # A line over positions._LONG_LINE characters of one, two, three and four UTF-8 bytes, between two short ones.
    text = "前の行\n" + "a é 接続 🙂。" * 400 + "\n次の行"
    tokens = TextTokens(text, TOKENIZER)
    data = text.encode("utf-8")
    offsets = [tokens.tokens.byte_offset(token) for token in range(tokens.tokens.token_count)]
    for position in range(0, len(text), 7):
        assert tokens.at(position) == tokens.tokens.token_at(len(text[:position].encode("utf-8"))), position
    for token, offset in enumerate(offsets):
        assert tokens.position(token) == len(data[:offset].decode("utf-8", "ignore")), token
    assert tokens.byte_columns  # (the long line's offsets were listed)


@pytest.mark.parametrize(("limit", "overlap"), [(64, 0), (300, 0), (300, 40)])
def test_every_chunk_is_counted_as_its_text_encodes(limit: int, overlap: int) -> None:
    cut_inside_a_line = 0
    for _, doc in [*long_documents(4), *fixture_documents(), (0, AWKWARD)]:
        chunker = _Chunker(document_outline(doc), {}, TOKENIZER, limit, overlap)
        for chunk in chunker.run().chunks:
            assert chunker._tokens(chunk) == TOKENIZER.count(chunk.text), chunk.id
            cut_inside_a_line += not (chunker.positions.clean(chunk.start) and chunker.positions.clean(chunk.end))
    assert cut_inside_a_line  # the shortcut was taken


@pytest.mark.parametrize(
    "content",
    [
        *contents(),
        "# チケット #5: 件名\n\n本文",
        "# チケット #5: 件名\n\n> チケット #5: 件名\n\n本文",
        "# チケット #5: 件名\n\n# チケット #6: 他\n",
        "# チケット #5: 件名\n\n\\# チケット #6: escaped",
        "> チケット #5: 件名\n\n本文",
        "# チケット #5: 件名",
        "本文 #12: だけ",
    ],
)
def test_the_anchor_check_of_the_content_says_what_the_full_scan_says(content: str) -> None:
    chunker = _Chunker(document_outline("# チケット #5: 件名\n\n本文"), {}, TOKENIZER, 300, 0)
    chunker.content = content
    expected = not find_anchors(content) and len(find_titles(content)) == 1
    assert chunker._names_nothing_but_its_title() == expected


# Characters around which cl100k_base's pieces may or may not split: letters of several scripts, digits,
# white space of several kinds, contractions' apostrophes, punctuation, a combining mark, an emoji, a
# letter of a newer Unicode than this Python's (U+31350, CJK extension H: unassigned here) and one
# that is not a character at all (U+0378).
TRICKY = "aZé接続カナ 7０\u3000\t\n\r'sllvedm.,;:!?-。、「」()[]#*_\u0301🙂\U00031350\u0378"
tricky_texts = st.text(alphabet=st.sampled_from(TRICKY), min_size=2, max_size=80)


@settings(max_examples=1500, deadline=None)
@given(text=tricky_texts)
def test_a_text_has_the_tokens_of_its_two_sides_where_a_run_of_letters_ends(text: str) -> None:
    for position in range(1, len(text)):
        if ends_letters(text, position):
            assert TOKENIZER.count(text) == TOKENIZER.count(text[:position]) + TOKENIZER.count(text[position:])


def test_a_letter_of_a_newer_unicode_does_not_end_a_run_of_letters() -> None:
    # cl100k's pattern may know U+31350 as a letter: the run would go on through it.
    assert not ends_letters("字\U00031350", 1)
    assert ends_letters("字。", 1) and ends_letters("word ", 4) and ends_letters("abc1", 3)
    assert not ends_letters("ab", 1) and not ends_letters(" a", 1) and not ends_letters("1.", 1)


@settings(max_examples=150, deadline=None)
@given(
    lines=st.lists(
        st.text(alphabet=st.sampled_from(TRICKY.replace("\n", "").replace("\r", "")), min_size=1, max_size=900),
        min_size=1,
        max_size=6,
    ),
    limit=st.sampled_from([40, 64, 120]),
)
def test_chunks_cut_inside_long_lines_are_counted_as_their_text_encodes(lines: list[str], limit: int) -> None:
    chunker = _Chunker(document_outline(document("\n".join(lines))), {}, TOKENIZER, limit, 0)
    for chunk in chunker.run().chunks:
        assert chunker._tokens(chunk) == TOKENIZER.count(chunk.text) <= limit, chunk.id
