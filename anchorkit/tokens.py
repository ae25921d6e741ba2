"""Token counting: a cheap estimate, and real tokenizers behind one small interface.

``approx_tokens`` is the cheap estimate used where exact counts are not worth a tokenizer call
(placing ``--max-gap-tokens`` anchors). Against cl100k_base on the fixtures' documents, the first
rule (1 token per non-ASCII character + 1 per 4 ASCII characters) counted 27% too few: Markdown
structure, punctuation and dates cost far more than 1/4 token a character, and some kanji take two
or three tokens. The calibrated rule, 1.15 per non-ASCII character, 0.2 per ASCII letter or space
(English words are about one token each), 0.5 per digit (cl100k cuts numbers into 1-3 digit
pieces) and 1 per other ASCII character (punctuation, line breaks), is within 1% in total and 4%
per document on average there (README, ``anchorkit stats`` section, has the figures).

The audit (``anchorkit stats``) needs more than counts: chunkers cut documents at token
positions, and the audit asks which chunk holds which anchor line. So a tokenizer turns each text
into a ``TokenizedText``: the number of tokens and the mapping between token indices and UTF-8
byte offsets. Chunks are then plain token index ranges and nothing is decoded.

- ``cl100k_base`` (tiktoken): exact. Its vocabulary ships inside the package
  (``anchorkit/data/cl100k_base.tiktoken.gz``, the file tiktoken itself downloads; origin and
  licence in ``anchorkit/data/NOTICE.md``), so counts never depend on the network, on tiktoken's
  cache or on any file of the machine: the same input gives the same documents everywhere. A
  vocabulary file named by ``ANCHORKIT_TIKTOKEN_FILE`` (or the ``vocabulary_file`` argument) is
  used instead when given; it must be that same vocabulary (sha256-checked), so it never changes a count.
- ``approx``: ``approx_tokens`` paragraph by paragraph, token positions interpolated inside one.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import string
import unicodedata
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate, chain, islice
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from anchorkit.errors import UsageError

if TYPE_CHECKING:
    import tiktoken  # imported when a tokenizer is loaded: anchors.py needs only approx_tokens

CL100K_BASE = "cl100k_base"
APPROX = "approx"
TOKENIZER_CHOICES = (CL100K_BASE, APPROX)
# The sha256 tiktoken expects of cl100k_base.tiktoken (tiktoken_ext/openai_public.py).
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
VOCABULARY_FILE_ENV = "ANCHORKIT_TIKTOKEN_FILE"
_SHIPPED_VOCABULARY = "data/cl100k_base.tiktoken.gz"
_GZIP_MAGIC = b"\x1f\x8b"
# Pre-tokenisation regex and special tokens of cl100k_base, as tiktoken_ext.openai_public defines them.
_CL100K_PAT_STR = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_CL100K_SPECIAL_TOKENS = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}


_OFFSETS_AT_ONCE = 1 << 16  # token offsets put in an array at a time (see TiktokenTokenizer._exact)
_LIST_OFFSETS_BELOW = 1 << 12  # texts with fewer tokens keep their offsets in a list (at most 38 MB a batch)
# Texts longer than this many characters are encoded a part of about this length at a time (see
# TiktokenTokenizer._encoded_parts); the part ends at the next line that starts with a non-space.
_ENCODED_AT_ONCE = 1 << 16
# Texts of fewer characters than this have fewer than 4 GiB of UTF-8 (4 bytes a character at most):
# their token offsets fit in 4 bytes.
_FOUR_BYTE_OFFSETS_BELOW = 1 << 30
_COUNTED_AT_ONCE = 1 << 8  # texts TiktokenTokenizer.count_many encodes in one batch
_FRESH_LINE = re.compile(r"\n(?=\S)")
_WORD_BYTES = (string.ascii_letters + " ").encode("ascii")
_DIGIT_BYTES = string.digits.encode("ascii")


class KnownCounts(dict[str, int]):
    """Token counts kept by text: ``counts[text]`` counts a text the first time it is asked for; later,
    the lookup is the dictionary's own (no Python call), for the texts a document repeats (blank lines,
    fences, headers)."""

    def __init__(self, count: Callable[[str], int]) -> None:
        super().__init__()
        self.count = count

    def __missing__(self, text: str) -> int:
        cost = self[text] = self.count(text)
        return cost


def approx_tokens(text: str) -> int:
    """Approximate cl100k_base token count of mixed Japanese/English text (see the module notes)."""
    if len(text) > _ENCODED_AT_ONCE:  # a part at a time: the ASCII copies of a whole document stay small
        parts = range(0, len(text), _ENCODED_AT_ONCE)
        return (sum(_twentieths(text[start : start + _ENCODED_AT_ONCE]) for start in parts) + 19) // 20
    return (_twentieths(text) + 19) // 20


def _twentieths(text: str) -> int:
    """``approx_tokens`` of ``text`` in twentieths of a token, not rounded (the parts of a text add up)."""
    ascii_bytes = text.encode("ascii", "ignore")
    without_words = ascii_bytes.translate(None, _WORD_BYTES)
    symbols = without_words.translate(None, _DIGIT_BYTES)
    words = len(ascii_bytes) - len(without_words)
    digits = len(without_words) - len(symbols)
    # 23 = 1.15 per non-ASCII character, 4 = 0.2, 10 = 0.5.
    return 23 * (len(text) - len(ascii_bytes)) + 4 * words + 10 * digits + 20 * len(symbols)


class TokenizedText(Protocol):
    """A text cut into tokens: token indices and UTF-8 byte offsets, both ways."""

    @property
    def token_count(self) -> int:
        """How many tokens the text has."""
        ...

    def byte_offset(self, token_index: int) -> int:
        """Byte offset where token ``token_index`` starts (``token_count`` → the text's length)."""
        ...

    def token_at(self, byte_offset: int) -> int:
        """Index of the token that contains byte ``byte_offset``."""
        ...

    def tokens_at(self, byte_offsets: Sequence[int]) -> list[int]:
        """``token_at`` of many offsets at once."""
        ...


@dataclass(frozen=True)
class ExactTokens:
    """Tokens of a real tokenizer: ``offsets[i]`` is where token i starts, ``offsets[-1]`` the end."""

    offsets: Sequence[int]

    @property
    def token_count(self) -> int:
        return len(self.offsets) - 1

    def byte_offset(self, token_index: int) -> int:
        return self.offsets[token_index]

    def token_at(self, byte_offset: int) -> int:
        return min(bisect_right(self.offsets, byte_offset) - 1, self.token_count - 1)

    def tokens_at(self, byte_offsets: Sequence[int]) -> list[int]:
        offsets, last = self.offsets, len(self.offsets) - 2
        return [min(bisect_right(offsets, offset) - 1, last) for offset in byte_offsets]


@dataclass(frozen=True, slots=True)
class Reencoded:
    """A piece of the shorter text encoded on its own: its character range there, and its tokens."""

    char_start: int
    char_end: int
    tokens: ExactTokens


Piece = tuple[int, int] | Reencoded  # a token range [start, end) of the whole text, or a piece encoded again


class TokensWithout:
    """The tokens of a text with character ranges taken out, read through the text's own tokens (no
    second array of offsets: the audit's stripped documents are most of the text again).

    ``pieces`` are, in order, what the shorter text is made of: token ranges [start, end) of
    ``whole`` (not empty, ascending), where the text is unchanged and every token keeps its length,
    and ``Reencoded`` pieces, the few lines around a cut encoded again. A position here is the
    position in a piece's own tokens shifted by where the piece starts.
    """

    def __init__(self, whole: ExactTokens, pieces: Sequence[Piece], cut_bytes: Sequence[tuple[int, int]]) -> None:
        self.whole = whole
        self.cut_bytes = cut_bytes  # the byte ranges of ``whole`` taken out, ascending
        self.reencoded: list[tuple[int, Reencoded]] = []  # each re-encoded piece and its first token here
        self._sources: list[ExactTokens] = []  # whose offsets each piece reads
        self._starts_there: list[int] = []  # token index in its source of each piece's start
        self._starts_here: list[int] = []  # and here
        self._bytes_there: list[int] = []
        self._bytes_here: list[int] = []
        self._kept: list[tuple[int, int, int]] = []  # the ranges of ``whole``: start there, end there, start here
        tokens = size = 0
        for piece in pieces:
            if isinstance(piece, Reencoded):
                self.reencoded.append((tokens, piece))
                source, (start, end) = piece.tokens, (0, piece.tokens.token_count)
            else:
                source, (start, end) = whole, piece
                self._kept.append((start, end, tokens))
            self._sources.append(source)
            self._starts_there.append(start)
            self._starts_here.append(tokens)
            self._bytes_there.append(source.offsets[start])
            self._bytes_here.append(size)
            tokens += end - start
            size += source.offsets[end] - source.offsets[start]
        self.token_count = tokens
        self._kept_starts = [start for start, _, _ in self._kept]

    def byte_offset(self, token_index: int) -> int:
        piece = max(bisect_right(self._starts_here, token_index) - 1, 0)
        there = self._sources[piece].offsets[token_index - self._starts_here[piece] + self._starts_there[piece]]
        return there - self._bytes_there[piece] + self._bytes_here[piece]

    def token_at(self, byte_offset: int) -> int:
        return self.tokens_at([byte_offset])[0]

    def tokens_at(self, byte_offsets: Sequence[int]) -> list[int]:
        last = self.token_count - 1
        sources, starts_here, starts_there, bytes_here, bytes_there = (
            self._sources,
            self._starts_here,
            self._starts_there,
            self._bytes_here,
            self._bytes_there,
        )
        result = []
        for offset in byte_offsets:
            piece = max(bisect_right(bytes_here, offset) - 1, 0)
            token = bisect_right(sources[piece].offsets, offset - bytes_here[piece] + bytes_there[piece]) - 1
            result.append(min(token - starts_there[piece] + starts_here[piece], last))
        return result

    def kept_spans(self, spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
        """Token spans [first, last] of ``whole`` that lie in the ranges read through, as token spans
        here (a span starting anywhere else is dropped)."""
        kept = []
        for first, last in spans:
            piece = bisect_right(self._kept_starts, first) - 1
            if piece >= 0 and first < self._kept[piece][1]:
                shift = self._kept[piece][2] - self._kept[piece][0]
                kept.append((first + shift, last + shift))
        return kept


@dataclass(frozen=True)
class InterpolatedTokens:
    """Approximate tokens: counts per piece of text, positions spread evenly over a piece's bytes."""

    piece_tokens: Sequence[int]  # cumulative token count at each piece start, then the total
    piece_bytes: Sequence[int]  # cumulative byte offset at each piece start, then the total

    @classmethod
    def from_pieces(cls, tokens_per_piece: Iterable[int], bytes_per_piece: Iterable[int]) -> InterpolatedTokens:
        """From each piece's own token count and byte size (not cumulative)."""
        return cls(list(accumulate(tokens_per_piece, initial=0)), list(accumulate(bytes_per_piece, initial=0)))

    @property
    def token_count(self) -> int:
        return self.piece_tokens[-1]

    def byte_offset(self, token_index: int) -> int:
        piece = max(min(bisect_right(self.piece_tokens, token_index) - 1, len(self.piece_tokens) - 2), 0)
        tokens = self.piece_tokens[piece + 1] - self.piece_tokens[piece]
        size = self.piece_bytes[piece + 1] - self.piece_bytes[piece]
        return self.piece_bytes[piece] + (token_index - self.piece_tokens[piece]) * size // max(tokens, 1)

    def token_at(self, byte_offset: int) -> int:
        return self.tokens_at([byte_offset])[0]

    def tokens_at(self, byte_offsets: Sequence[int]) -> list[int]:
        tokens, sizes = self.piece_tokens, self.piece_bytes
        last_piece, last_token = len(tokens) - 2, tokens[-1] - 1
        result = []
        for offset in byte_offsets:
            piece = min(bisect_right(sizes, offset) - 1, last_piece)
            within = (
                (offset - sizes[piece])
                * (tokens[piece + 1] - tokens[piece])
                // ((sizes[piece + 1] - sizes[piece]) or 1)
            )
            result.append(min(tokens[piece] + within, last_token))
        return result


class Tokenizer(Protocol):
    name: str
    exact: bool

    def tokenize_many(self, texts: Sequence[str]) -> list[TokenizedText]:
        """Tokenize a batch of texts (batches let tiktoken use several threads)."""
        ...

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Token counts of a batch of texts."""
        ...

    def count(self, text: str) -> int:
        """Token count of one text (no batching overhead)."""
        ...

    def tokenize_pairs(
        self, texts: Sequence[str], cuts: Sequence[Sequence[Cut]]
    ) -> list[tuple[TokenizedText, TokenizedText]]:
        """Each text, and the same text with ``cuts`` (character ranges) removed (see ``without``)."""
        ...


Cut = tuple[int, int]  # a character range [start, end) taken out of a text


def byte_offsets(text: str, char_offsets: Sequence[int]) -> list[int]:
    """UTF-8 byte offsets of ascending character offsets of ``text`` (one pass)."""
    result = []
    previous_char = previous_byte = 0
    for offset in char_offsets:
        # A long stretch (a log between two headings) is encoded a part at a time, not copied whole.
        while offset - previous_char > _ENCODED_AT_ONCE:
            previous_byte += len(text[previous_char : previous_char + _ENCODED_AT_ONCE].encode("utf-8"))
            previous_char += _ENCODED_AT_ONCE
        previous_byte += len(text[previous_char:offset].encode("utf-8"))
        previous_char = offset
        result.append(previous_byte)
    return result


def line_aligned(text: str, cuts: Sequence[Cut]) -> list[Cut]:
    """The same removals, each moved past the line breaks it starts with when the text repeats them
    right after it (taking out "\\n> a\\n" before "\\nX" leaves what taking out "> a\\n\\n" before "X"
    does): cuts then start at a line's first character, where cl100k's tokens start too."""
    aligned: list[Cut] = []
    limits = [start for start, _ in cuts[1:]] + [len(text)]
    for (start, end), limit in zip(cuts, limits):
        while end < limit and start + 1 < end and text[start] == "\n" == text[end]:
            start, end = start + 1, end + 1
        aligned.append((start, end))
    return aligned


def without(text: str, cuts: Sequence[Cut]) -> str:
    """``text`` with the ascending, non-overlapping character ranges ``cuts`` taken out."""
    kept_from = [0, *(end for _, end in cuts)]
    kept_to = [*(start for start, _ in cuts), len(text)]
    return "".join(text[start:end] for start, end in zip(kept_from, kept_to))


class ApproxTokenizer:
    """``approx_tokens`` applied paragraph by paragraph (so that positions inside a document are known)."""

    name = APPROX
    exact = False

    def tokenize_many(self, texts: Sequence[str]) -> list[TokenizedText]:
        return [self._tokenize(text) for text in texts]

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return list(map(self.count, texts))

    def count(self, text: str) -> int:
        return sum(map(approx_tokens, self._pieces(text)))

    def tokenize_pairs(
        self, texts: Sequence[str], cuts: Sequence[Sequence[Cut]]
    ) -> list[tuple[TokenizedText, TokenizedText]]:
        pairs: list[tuple[TokenizedText, TokenizedText]] = []
        for text, text_cuts in zip(texts, cuts):
            piece_tokens, piece_bytes = self._piece_sizes(text)
            whole = InterpolatedTokens.from_pieces(piece_tokens, piece_bytes)
            byte_cuts = byte_offsets(text, [offset for cut in text_cuts for offset in cut])
            cut_bytes = sum(end - start for start, end in zip(byte_cuts[::2], byte_cuts[1::2]))
            piece_at = {start: index for index, start in enumerate(whole.piece_bytes[:-1])}
            cut_pieces = {piece_at[start] for start in byte_cuts[::2] if start in piece_at}
            if sum(piece_bytes[index] for index in cut_pieces) == cut_bytes:
                # Each cut is one whole paragraph (an anchor line and its blank line): drop its piece.
                kept = [index for index in range(len(piece_tokens)) if index not in cut_pieces]
                bare = InterpolatedTokens.from_pieces((piece_tokens[i] for i in kept), (piece_bytes[i] for i in kept))
            else:
                bare = self._tokenize(without(text, text_cuts))
            pairs.append((whole, bare))
        return pairs

    @staticmethod
    def _pieces(text: str) -> list[str]:
        # Paragraphs, not lines: half the calls, and anchor lines are paragraphs of their own, so
        # the positions that matter (anchors, headings) stay exact paragraph boundaries.
        paragraphs = text.split("\n\n")
        return [paragraph + "\n\n" for paragraph in paragraphs[:-1]] + [paragraphs[-1]]

    @classmethod
    def _piece_sizes(cls, text: str) -> tuple[list[int], list[int]]:
        """Token count and UTF-8 byte size of each piece of ``text``."""
        pieces = cls._pieces(text)
        return [approx_tokens(piece) for piece in pieces], [len(piece.encode("utf-8")) for piece in pieces]

    @classmethod
    def _tokenize(cls, text: str) -> InterpolatedTokens:
        return InterpolatedTokens.from_pieces(*cls._piece_sizes(text))


class TiktokenTokenizer:
    """An exact tiktoken encoding; special-token text is counted as ordinary text."""

    exact = True

    def __init__(self, encoding: tiktoken.Encoding, mergeable_ranks: dict[bytes, int], name: str = CL100K_BASE) -> None:
        self.name = name
        self._encoding = encoding
        # Byte length of every ordinary token id: token offsets are then a running sum, no decoding.
        token_bytes = [0] * encoding.n_vocab
        for token, rank in mergeable_ranks.items():
            token_bytes[rank] = len(token)
        self._token_bytes = token_bytes

    def tokenize_many(self, texts: Sequence[str]) -> list[TokenizedText]:
        return list(self._exact_tokens(texts))

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Counted ``_COUNTED_AT_ONCE`` texts at a time: the ids of a huge document's chunks (LangChain's, in the
        audit), 36 bytes a token, are never held all at once."""
        counts: list[int] = []
        for start in range(0, len(texts), _COUNTED_AT_ONCE):
            counts += map(len, self._encoded(texts[start : start + _COUNTED_AT_ONCE]))
        return counts

    def count(self, text: str) -> int:
        return len(self._encoding.encode_ordinary(text))

    def tokenize_pairs(
        self, texts: Sequence[str], cuts: Sequence[Sequence[Cut]]
    ) -> list[tuple[TokenizedText, TokenizedText]]:
        """Encode each text once; the shorter text's tokens are the text's own tokens wherever it is
        unchanged, and the lines around each cut encoded again (``splice_regions``): what encoding
        the shorter text itself gives, for a few lines' work a cut."""
        return [
            (tokens, self._without(text, text_cuts, tokens) if text_cuts else tokens)
            for text, text_cuts, tokens in zip(texts, cuts, self._exact_tokens(texts))
        ]

    def _without(self, text: str, cuts: Sequence[Cut], tokens: ExactTokens) -> TokenizedText:
        shorter = without(text, cuts)
        regions = splice_regions(text, shorter, cuts)
        # The byte offsets of the cuts (the stripped layout's) and of the regions, in one pass.
        positions = sorted({offset for cut in cuts for offset in cut} | {offset for r in regions for offset in r[:2]})
        byte_at = dict(zip(positions, byte_offsets(text, positions)))
        bounds = [byte_at[offset] for region in regions for offset in region[:2]]
        token_bounds = [bisect_left(tokens.offsets, bound) for bound in bounds]
        if any(tokens.offsets[token] != bound for token, bound in zip(token_bounds, bounds)):
            # Not a token boundary after all: a tokenizer whose pre-tokenizer joins a line break
            # with what follows (splice_regions' premise is cl100k's). Encode the whole text again.
            return self._tokens_of(shorter)
        pieces: list[Piece] = []
        kept_from = 0
        for (_, _, here_start, here_end), token_start, token_end in zip(regions, token_bounds[::2], token_bounds[1::2]):
            if token_start > kept_from:
                pieces.append((kept_from, token_start))
            if here_end > here_start:
                pieces.append(Reencoded(here_start, here_end, self._tokens_of(shorter[here_start:here_end])))
            kept_from = token_end
        if kept_from < tokens.token_count:
            pieces.append((kept_from, tokens.token_count))
        if not pieces:  # everything was cut out
            return self._tokens_of(shorter)
        return TokensWithout(tokens, pieces, [(byte_at[start], byte_at[end]) for start, end in cuts])

    def _exact_tokens(self, texts: Sequence[str]) -> Iterator[ExactTokens]:
        """The tokens of every text (``_exact``): the texts of at most ``_ENCODED_AT_ONCE`` characters
        encoded in one batch, the longer ones part by part (``_tokens_of``)."""
        batch = iter(self._encoded([text for text in texts if len(text) <= _ENCODED_AT_ONCE]))
        for text in texts:
            yield self._exact(next(batch)) if len(text) <= _ENCODED_AT_ONCE else self._tokens_of(text)

    def _tokens_of(self, text: str) -> ExactTokens:
        """The tokens of one text (a line encoded again: no batch to wrap it in)."""
        if len(text) <= _ENCODED_AT_ONCE:
            return self._exact(self._encoding.encode_ordinary(text))
        return self._exact_parts(self._encoded_parts(text), "I" if len(text) < _FOUR_BYTE_OFFSETS_BELOW else "q")

    def _encoded_parts(self, text: str) -> Iterator[list[int]]:
        """The token ids of a long text, a part of about ``_ENCODED_AT_ONCE`` characters at a time: tiktoken
        gives a text's ids as one list of ints, 36 bytes a token (a 5 MB log: 2 million tokens, 70 MB at
        once). Each part ends at a line's first character that is not whitespace, where cl100k's
        pre-tokenizer starts afresh whatever came before (``splice_regions``), so the parts' ids are the
        whole text's. A text with no such place left is encoded to its end at once."""
        start = 0
        while len(text) - start > _ENCODED_AT_ONCE:
            fresh_line = _FRESH_LINE.search(text, start + _ENCODED_AT_ONCE)
            if fresh_line is None:
                break
            yield self._encoding.encode_ordinary(text[start : fresh_line.end()])
            start = fresh_line.end()
        yield self._encoding.encode_ordinary(text[start:])

    def _exact(self, ids: list[int]) -> ExactTokens:
        """Token offsets: a running sum of the tokens' byte lengths. A text of fewer than
        ``_LIST_OFFSETS_BELOW`` tokens keeps them in a list: built without a copy into an array, and
        bisected without making an int of each item read, it halves the offsets' cost and speeds
        every token lookup (the audit: 11% less CPU time on generated tickets). A longer text keeps
        them in an array (``_exact_parts``)."""
        if len(ids) < _LIST_OFFSETS_BELOW:
            return ExactTokens(list(accumulate(map(self._token_bytes.__getitem__, ids), initial=0)))
        return self._exact_parts([ids])

    def _exact_parts(self, parts: Iterable[list[int]], typecode: str = "I") -> ExactTokens:
        """Token offsets of the ids of ``parts`` one after the other, in an array (4 bytes a token, where a
        list takes 36: a batch holds every document's; 8 for a text that may reach 4 GiB), filled from
        lists of at most ``_OFFSETS_AT_ONCE`` (from a list, a fifth faster than item by item from the sum
        itself; that small, whatever the text's length)."""
        running = accumulate(map(self._token_bytes.__getitem__, chain.from_iterable(parts)), initial=0)
        offsets = array(typecode)
        while part := list(islice(running, _OFFSETS_AT_ONCE)):
            offsets.fromlist(part)
        return ExactTokens(offsets)

    def _encoded(self, texts: Sequence[str]) -> list[list[int]]:
        """The token ids of every text: one batched, multi-threaded encode when this process may run on
        several cores, else one text after the other. Threads that cannot run side by side only add
        work (on one core the audit spends about a tenth more CPU time with them), and starting the
        batch's thread pool for one text costs as much as encoding a long ticket."""
        if len(texts) > 1 and _usable_cores() > 1:
            return self._encoding.encode_ordinary_batch(list(texts))
        return list(map(self._encoding.encode_ordinary, texts))


def _usable_cores() -> int:
    """The cores this process may run on (taskset, a container's CPU set), asked each time: it can change."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def splice_regions(text: str, shorter: str, cuts: Sequence[Cut]) -> list[tuple[int, int, int, int]]:
    """Where to encode ``shorter`` (``text`` without the ascending ``cuts``) again so that its tokens
    are ``text``'s tokens everywhere else: character ranges [start, end) of ``text`` around the
    cuts, each with the same place [start, end) of ``shorter``, ascending and disjoint.

    Each range starts and ends at a position that is a fresh start in both texts: the start or the
    end of the text, or a line's first character when that is not whitespace. cl100k's pre-tokenizer
    never joins a line break with a non-space character after it, and reads on from there without
    looking back; what comes before such a position is cut into the same tokens whatever
    non-space character follows, or when the text ends there (a final run of whitespace ending in a
    line break is one piece either way). So between two such positions the same characters give the
    same tokens in both texts, and a range encoded alone gives the tokens the whole text has there.
    A range reaches from the cut back and on to the nearest such positions: usually the cut's own
    edges (an anchor line between blocks), else the line before or after it (a cut that starts at a
    blank line or joins two list items or table rows), or the next cut when none lies between.
    """
    regions: list[tuple[int, int, int, int]] = []
    removed = 0  # characters of text cut out before the position considered
    open_start: tuple[int, int] | None = None  # where the region being grown starts (text, shorter)
    limit = 0  # the previous region's end: the next one starts there at the earliest
    text_end, shorter_end = len(text), len(shorter)

    def fresh_in_both(position: int) -> bool:
        """Whether cl100k's pre-tokenizer starts a piece there in both texts whatever comes before:
        at the start or the end of the text, or after a line break, before a non-space."""
        here = position - removed
        return (
            position == 0 or position == text_end or (text[position - 1] == "\n" and not text[position].isspace())
        ) and (here == 0 or here == shorter_end or (shorter[here - 1] == "\n" and not shorter[here].isspace()))

    next_starts = [start for start, _ in cuts[1:]]
    next_starts.append(text_end)
    for (start, end), next_start in zip(cuts, next_starts):
        if open_start is None:
            position = start
            while position > limit and not fresh_in_both(position):
                position = max(text.rfind("\n", limit, position - 1) + 1, limit)
            open_start = (position, position - removed)
        removed += end - start
        position = end
        while position < next_start and not fresh_in_both(position):
            line_break = text.find("\n", position, next_start)
            position = line_break + 1 if line_break >= 0 else next_start
        if position < next_start or next_start == text_end or fresh_in_both(position):
            regions.append((open_start[0], position, open_start[1], position - removed))
            open_start, limit = None, position
    return regions


def ends_letters(text: str, position: int) -> bool:
    """Whether a run of letters ends at ``position`` (0 < position < len(text)): a letter before it, and at
    it a character that this Python's Unicode data assigns and does not call a letter (an unassigned one
    may be a letter in the newer tables of the tokenizer's regex engine).

    cl100k_base's pre-tokenizer ends a piece there wherever its scan began (a piece that holds a letter
    ends where the letters do) and reads on without looking back: a text that holds those two characters
    there has the tokens of its two sides encoded alone, as at a fresh line (``splice_regions``).
    """
    char = text[position]
    return (
        text[position - 1].isalpha() and not char.isalpha() and (char.isascii() or unicodedata.category(char) != "Cn")
    )


class TokenizerUnavailable(UsageError):
    """The requested tokenizer cannot be loaded here (exit 2); the one-line message says why."""


def choose_tokenizer(name: str = CL100K_BASE, vocabulary_file: Path | None = None) -> Tokenizer:
    """The tokenizer named ``name`` (one of ``TOKENIZER_CHOICES``): what transform and stats both count with.

    ``vocabulary_file`` (else ``$ANCHORKIT_TIKTOKEN_FILE``) replaces the shipped cl100k_base
    vocabulary; TokenizerUnavailable when it cannot be read or is not cl100k_base's, never a silent
    fallback.
    """
    if name == APPROX:
        return ApproxTokenizer()
    if name != CL100K_BASE:
        raise ValueError(f"unknown tokenizer {name!r} (expected one of {', '.join(TOKENIZER_CHOICES)})")
    return load_cl100k_base(vocabulary_file or _env_vocabulary_file())


def load_cl100k_base(vocabulary_file: Path | None = None) -> TiktokenTokenizer:
    """cl100k_base from the vocabulary shipped with anchorkit, or from ``vocabulary_file`` (plain or gzipped).

    The vocabulary must have the sha256 tiktoken expects, so a corrupt or different file can never
    produce different counts. It is parsed here rather than by ``tiktoken.load``, which would look
    for it in tiktoken's cache or on the network. Loaded once per process and file.
    """
    return _load_cl100k_base(vocabulary_file)


@lru_cache(maxsize=2)
def _load_cl100k_base(vocabulary_file: Path | None) -> TiktokenTokenizer:
    import gzip
    from importlib import resources

    try:
        import tiktoken
    except ImportError:
        raise TokenizerUnavailable("tiktoken is not installed (pip install tiktoken)") from None

    if vocabulary_file is None:
        where = f"anchorkit's own cl100k_base vocabulary ({_SHIPPED_VOCABULARY})"
        reader = resources.files("anchorkit").joinpath(_SHIPPED_VOCABULARY).read_bytes
    else:
        where = f"cl100k_base vocabulary file {vocabulary_file}"
        reader = vocabulary_file.read_bytes
    try:
        data = reader()
        if data.startswith(_GZIP_MAGIC):
            data = gzip.decompress(data)
    except OSError as exc:  # gzip.BadGzipFile is one
        raise TokenizerUnavailable(f"{where}: cannot read ({exc.strerror or exc})") from None
    except EOFError:
        raise TokenizerUnavailable(f"{where}: cannot read (truncated gzip data)") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != CL100K_SHA256:
        raise TokenizerUnavailable(f"{where}: sha256 {digest} is not cl100k_base's ({CL100K_SHA256})")
    ranks = {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in data.splitlines() if line)}
    encoding = tiktoken.Encoding(
        CL100K_BASE, pat_str=_CL100K_PAT_STR, mergeable_ranks=ranks, special_tokens=_CL100K_SPECIAL_TOKENS
    )
    return TiktokenTokenizer(encoding, ranks)


def _env_vocabulary_file() -> Path | None:
    value = os.environ.get(VOCABULARY_FILE_ENV)
    return Path(value) if value else None
