"""The retrieval benchmark's pure parts: which ticket a chunk names, the chunkers, rank fusion, scores.

No I/O and no model here, so that ``tests/test_retrieval_bench.py`` can check each measure on a
hand-made example (``tests/benchmarks/bench_retrieval.py`` drives anchorkit and the retrievers).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

# A line that names a ticket, as anchorkit writes them: the complete anchor ``> チケット #ID: subject``,
# the short form of spacing anchors (``> チケット #ID:``, or ``> チケット #ID`` alone on its line), the
# title ``# チケット #ID: subject``. The colon, or the line's end, ends the id: a chunk cut inside
# ``#12345`` names no ticket. (Ticket text shaped like these is escaped by transform, ``\\#``.)
_NAMING = re.compile(r"^(?:>|#) [^#\\\r\n]{1,40}? #(?P<id>\d{1,12})(?::|[ \t]*(?=\r?\n))", re.M)
# An anchor and the blank line after it, as ``--chunk-tokens 0`` places them (after headings, between
# blocks); the title (``# ...``) stays.
_BETWEEN_BLOCKS_ANCHOR = re.compile(r"^> [^#\\\r\n]{1,40}? #\d{1,12}:[^\r\n]*(?:\n\n|\n?\Z)", re.M)
_SHORT_ANCHOR = re.compile(r"^> [^#\\\r\n]{1,40}? #\d{1,12}:?[ \t]*$", re.M)


def named_tickets(text: str) -> set[int]:
    """The tickets a chunk names (by an anchor, a short anchor or the title line)."""
    return {int(match["id"]) for match in _NAMING.finditer(text)}


def short_anchor_count(document: str) -> int:
    """How many anchors of a document are in the short, ID-only form."""
    return len(_SHORT_ANCHOR.findall(document))


def strip_heading_anchors(document: str) -> str:
    """A ``--chunk-tokens 0`` document without its anchors (each was placed between two blocks)."""
    return _BETWEEN_BLOCKS_ANCHOR.sub("", document)


class Encoding(Protocol):
    """The part of ``tiktoken.Encoding`` the fixed-window chunker uses."""

    def encode_ordinary(self, text: str) -> list[int]: ...

    def decode_with_offsets(self, tokens: Sequence[int]) -> tuple[str, list[int]]: ...


def fixed_windows(text: str, encoding: Encoding, size: int = 300, overlap: int = 60) -> list[str]:
    """Windows of ``size`` tokens, each sharing ``overlap`` tokens with the one before (Bedrock's fixed-size
    chunking: 300 tokens, 20%). A character whose bytes a window's edge cuts apart is in the window
    that holds its last token."""
    tokens = encoding.encode_ordinary(text)
    if not tokens:
        return []
    _, starts = encoding.decode_with_offsets(tokens)
    windows, begin = [], 0
    while True:
        end = min(begin + size, len(tokens))
        windows.append(text[starts[begin] : starts[end] if end < len(tokens) else len(text)])
        if end == len(tokens):
            return windows
        begin += size - overlap


def reciprocal_rank_fusion(rankings: Sequence[Sequence[int]], k: int = 60) -> list[int]:
    """Items of several rankings (best first) by the sum of 1 / (k + rank), rank counted from 1."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(fused, key=lambda item: (-fused[item], item))


@dataclass(frozen=True)
class Scores:
    recall: float  # share of questions with a chunk of the right ticket in the top k
    attributable: float  # ... with a chunk of the right ticket in the top k that names that ticket
    mrr: float  # mean of 1 / rank of the first chunk of the right ticket (0 past mrr_depth)
    questions: int


def score(
    rankings: Sequence[Sequence[int]],
    answers: Sequence[int],
    chunk_tickets: Sequence[int],
    chunk_names: Sequence[set[int]],
    k: int = 5,
    mrr_depth: int = 10,
) -> Scores:
    """Scores of the rankings (chunk indices, best first) of questions whose answers are ``answers``
    (ticket ids); ``chunk_tickets[i]``: the ticket chunk i comes from, ``chunk_names[i]``: the tickets it names."""
    found = attributed = 0
    reciprocal = 0.0
    for ranking, ticket in zip(rankings, answers, strict=True):
        top = ranking[:k]
        found += any(chunk_tickets[chunk] == ticket for chunk in top)
        attributed += any(chunk_tickets[chunk] == ticket and ticket in chunk_names[chunk] for chunk in top)
        first = next((rank for rank, chunk in enumerate(ranking[:mrr_depth], 1) if chunk_tickets[chunk] == ticket), 0)
        reciprocal += 1 / first if first else 0.0
    count = len(answers)
    return Scores(found / count, attributed / count, reciprocal / count, count) if count else Scores(0, 0, 0, 0)


def noise_margin(share: float, questions: int) -> float:
    """Two standard errors of a share measured on ``questions`` questions: smaller differences are noise."""
    return 2 * math.sqrt(share * (1 - share) / questions) if questions else math.inf
