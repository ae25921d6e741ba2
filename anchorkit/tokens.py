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

- ``cl100k_base`` (tiktoken): exact. Its vocabulary is loaded without network from, in order,
  the file named by ``ANCHORKIT_TIKTOKEN_FILE`` (or the ``vocabulary_file`` argument), then
  tiktoken's own cache (``TIKTOKEN_CACHE_DIR``, ``DATA_GYM_CACHE_DIR`` or the default cache);
  only then tiktoken may try to download it.
- ``approx``: ``approx_tokens`` line by line, token positions interpolated inside a line.
"""

from __future__ import annotations

import hashlib
import os
import string
import tempfile
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import Protocol

CL100K_BASE = "cl100k_base"
APPROX = "approx"
TOKENIZER_CHOICES = ("auto", CL100K_BASE, APPROX)
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
VOCABULARY_FILE_ENV = "ANCHORKIT_TIKTOKEN_FILE"
# Pre-tokenisation regex and special tokens of cl100k_base, as tiktoken_ext.openai_public defines them.
_CL100K_PAT_STR = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_CL100K_SPECIAL_TOKENS = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}


_WORD_BYTES = (string.ascii_letters + " ").encode("ascii")
_DIGIT_BYTES = string.digits.encode("ascii")


def approx_tokens(text: str) -> int:
    """Approximate cl100k_base token count of mixed Japanese/English text (see the module notes)."""
    ascii_bytes = text.encode("ascii", "ignore")
    without_words = ascii_bytes.translate(None, _WORD_BYTES)
    symbols = without_words.translate(None, _DIGIT_BYTES)
    words = len(ascii_bytes) - len(without_words)
    digits = len(without_words) - len(symbols)
    # In twentieths of a token, rounded up: 23 = 1.15 per non-ASCII character, 4 = 0.2, 10 = 0.5.
    return (23 * (len(text) - len(ascii_bytes)) + 4 * words + 10 * digits + 20 * len(symbols) + 19) // 20


class TokenizedText(Protocol):
    """A text cut into tokens: token indices and UTF-8 byte offsets, both ways."""

    token_count: int

    def byte_offset(self, token_index: int) -> int:
        """Byte offset where token ``token_index`` starts (``token_count`` → the text's length)."""
        ...

    def token_at(self, byte_offset: int) -> int:
        """Index of the token that contains byte ``byte_offset``."""
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


@dataclass(frozen=True)
class InterpolatedTokens:
    """Approximate tokens: exact counts per line, positions spread evenly over a line's bytes."""

    line_tokens: Sequence[int]  # cumulative token count at each line start, then the total
    line_bytes: Sequence[int]  # cumulative byte offset at each line start, then the total

    @property
    def token_count(self) -> int:
        return self.line_tokens[-1]

    def byte_offset(self, token_index: int) -> int:
        line = min(bisect_right(self.line_tokens, token_index) - 1, len(self.line_tokens) - 2)
        if line < 0:
            return 0
        tokens = self.line_tokens[line + 1] - self.line_tokens[line]
        size = self.line_bytes[line + 1] - self.line_bytes[line]
        return self.line_bytes[line] + (token_index - self.line_tokens[line]) * size // max(tokens, 1)

    def token_at(self, byte_offset: int) -> int:
        line = min(bisect_right(self.line_bytes, byte_offset) - 1, len(self.line_bytes) - 2)
        tokens = self.line_tokens[line + 1] - self.line_tokens[line]
        size = self.line_bytes[line + 1] - self.line_bytes[line]
        within = (byte_offset - self.line_bytes[line]) * tokens // max(size, 1)
        return min(self.line_tokens[line] + within, self.token_count - 1)


class Tokenizer(Protocol):
    name: str
    exact: bool

    def tokenize_many(self, texts: Sequence[str]) -> list[TokenizedText]:
        """Tokenize a batch of texts (batches let tiktoken use several threads)."""
        ...

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Token counts of a batch of texts."""
        ...


class ApproxTokenizer:
    """``approx_tokens`` applied line by line (so that positions inside a document are known)."""

    name = APPROX
    exact = False

    def tokenize_many(self, texts: Sequence[str]) -> list[TokenizedText]:
        return [self._tokenize(text) for text in texts]

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return [self._tokenize(text).token_count for text in texts]

    @staticmethod
    def _tokenize(text: str) -> InterpolatedTokens:
        lines = text.splitlines(keepends=True) or [""]
        line_bytes = [len(line.encode("utf-8")) for line in lines]
        line_tokens = [approx_tokens(line) for line in lines]
        return InterpolatedTokens(list(accumulate(line_tokens, initial=0)), list(accumulate(line_bytes, initial=0)))


class TiktokenTokenizer:
    """An exact tiktoken encoding; special-token text is counted as ordinary text."""

    exact = True

    def __init__(self, encoding: object, mergeable_ranks: dict[bytes, int], name: str = CL100K_BASE) -> None:
        import tiktoken

        assert isinstance(encoding, tiktoken.Encoding)
        self.name = name
        self._encoding = encoding
        # Byte length of every ordinary token id: token offsets are then a running sum, no decoding.
        token_bytes = [0] * encoding.n_vocab
        for token, rank in mergeable_ranks.items():
            token_bytes[rank] = len(token)
        self._token_bytes = token_bytes

    def tokenize_many(self, texts: Sequence[str]) -> list[TokenizedText]:
        lengths = self._token_bytes.__getitem__
        return [ExactTokens(list(accumulate(map(lengths, ids), initial=0))) for ids in self._encoding.encode_ordinary_batch(list(texts))]

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return [len(ids) for ids in self._encoding.encode_ordinary_batch(list(texts))]


class TokenizerUnavailable(RuntimeError):
    """The requested tokenizer cannot be loaded here; the message says why."""


@dataclass(frozen=True)
class TokenizerChoice:
    tokenizer: Tokenizer
    # Why ``auto`` fell back to the approximation (None when it did not).
    fallback_reason: str | None = None


def load_cl100k_base(vocabulary_file: Path | None = None, allow_download: bool = True) -> TiktokenTokenizer:
    """cl100k_base from a local vocabulary file when there is one, else through tiktoken.

    The file must have the sha256 tiktoken expects, so a corrupt or different vocabulary can never
    produce silently different counts.
    """
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    path = vocabulary_file or _env_vocabulary_file()
    if path is not None:
        if not path.is_file():
            raise TokenizerUnavailable(f"cl100k_base vocabulary file not found: {path}")
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != CL100K_SHA256:
            raise TokenizerUnavailable(f"{path}: sha256 {digest} is not cl100k_base's ({CL100K_SHA256})")
        ranks = load_tiktoken_bpe(str(path), expected_hash=CL100K_SHA256)
    elif allow_download or _in_tiktoken_cache():
        try:
            ranks = load_tiktoken_bpe(CL100K_URL, expected_hash=CL100K_SHA256)
        except Exception as exc:  # noqa: BLE001 - network, cache or hash problems all mean "not here"
            raise TokenizerUnavailable(f"cannot load cl100k_base through tiktoken ({type(exc).__name__}: {exc})") from None
    else:
        raise TokenizerUnavailable(f"no cl100k_base vocabulary in tiktoken's cache and {VOCABULARY_FILE_ENV} is not set")
    encoding = tiktoken.Encoding(CL100K_BASE, pat_str=_CL100K_PAT_STR, mergeable_ranks=ranks, special_tokens=_CL100K_SPECIAL_TOKENS)
    return TiktokenTokenizer(encoding, ranks)


def _env_vocabulary_file() -> Path | None:
    value = os.environ.get(VOCABULARY_FILE_ENV)
    return Path(value) if value else None


def _in_tiktoken_cache() -> bool:
    """Whether tiktoken would find cl100k_base in its cache (the same lookup tiktoken does)."""
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        cache_dir = os.environ["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in os.environ:
        cache_dir = os.environ["DATA_GYM_CACHE_DIR"]
    else:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if not cache_dir:
        return False
    return (Path(cache_dir) / hashlib.sha1(CL100K_URL.encode()).hexdigest()).is_file()


def choose_tokenizer(name: str = "auto", vocabulary_file: Path | None = None, allow_download: bool = False) -> TokenizerChoice:
    """The tokenizer asked for; ``auto`` = cl100k_base if it can be loaded, else the approximation.

    ``allow_download`` is off by default: an audit must not hang on a network it does not have.
    """
    if name == APPROX:
        return TokenizerChoice(ApproxTokenizer())
    if name == CL100K_BASE:
        return TokenizerChoice(load_cl100k_base(vocabulary_file, allow_download))
    if name != "auto":
        raise ValueError(f"unknown tokenizer {name!r} (expected one of {', '.join(TOKENIZER_CHOICES)})")
    try:
        return TokenizerChoice(load_cl100k_base(vocabulary_file, allow_download))
    except TokenizerUnavailable as exc:
        return TokenizerChoice(ApproxTokenizer(), fallback_reason=str(exc))
