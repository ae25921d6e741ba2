"""Text similarity for citation checks: quoted spans against their chunk, claims against their sources.

Japanese, Chinese and Korean text is compared in character bigrams of content characters, other text in
words without function words, after NFKC and case folding.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import (
    Sequence,
)
from dataclasses import dataclass

from anchorkit.verify.ids import MARKER, MENTION

# Content characters of Japanese (katakana, kanji, 々), Chinese and Korean. Hiragana is left out on
# purpose: it is mostly grammar (particles, endings) that any two Japanese texts share, so it
# separates runs instead of counting as overlap.
_CJK = "\u30a0-\u30ff\u3005\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_FULL_WIDTH = re.compile("[\uff01-\uff5e\u3000]")  # full-width ASCII (NFKC: U+FF01..FF5E -> U+0021..007E)
# Words: runs of digits and Latin, Greek or Cyrillic letters (after NFKC and case folding).
_WORD_PATTERN = r"[0-9a-z\u00b5\u00df-\u024f\u0370-\u03ff\u0400-\u04ff]+"
_WORD = re.compile(_WORD_PATTERN)
# Runs of CJK characters (measured in character bigrams) or words.
_TOKEN_RUN = re.compile(rf"([{_CJK}]+)|({_WORD_PATTERN})")
# English function words carry no content; like hiragana they would only dilute the overlap.
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "has",
        "have",
        "in",
        "is",
        "it",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "was",
        "were",
        "will",
        "with",
    ]
)


# --------------------------------------------------------------------------- text similarity


def _narrow(match: re.Match[str]) -> str:
    return " " if match[0] == "\u3000" else chr(ord(match[0]) - 0xFEE0)


def _fold(text: str) -> str:
    """NFKC, case-folded. Full-width ASCII and the ideographic space are replaced by what NFKC makes
    of them first (single starters: the normal form is the same): Japanese text is then usually
    normalised already, and checking that is ten times cheaper than normalising again."""
    narrowed = _FULL_WIDTH.sub(_narrow, text)
    if not unicodedata.is_normalized("NFKC", narrowed):
        narrowed = unicodedata.normalize("NFKC", narrowed)
    return narrowed.casefold()


def _squeeze(folded: str) -> str:
    return "".join(folded.replace("\\", "").split())


def normalize_for_match(text: str) -> str:
    """NFKC (full-width → half-width), case-folded, without whitespace and Markdown escapes: a quote
    copied from a chunk that a line break or an anchor's ``\\#`` interrupts still matches."""
    return _squeeze(_fold(text))


@dataclass(frozen=True)
class MatchText:
    """A chunk's text prepared once for every quote and overlap check against it."""

    folded: str  # NFKC, case-folded
    squeezed: str  # normalize_for_match
    words: frozenset[str]

    @classmethod
    def of(cls, text: str) -> MatchText:
        folded = _fold(text)
        return cls(folded, _squeeze(folded), frozenset(_WORD.findall(folded)))


def quote_similarity(quoted_span: str, chunk: str | MatchText) -> float:
    """How well the span matches its best-aligned part of the chunk: 1.0 = verbatim, 0..1
    (rapidfuzz partial_ratio: the best window of the chunk's length-of-span substrings)."""
    span = normalize_for_match(quoted_span)
    if not span:
        return 1.0
    text = (chunk if isinstance(chunk, MatchText) else MatchText.of(chunk)).squeezed
    if span in text:
        return 1.0
    from rapidfuzz import (
        fuzz,  # here, not at the top: only verify and eval need it, every command imports this module
    )

    return fuzz.partial_ratio(span, text) / 100.0


def _split_tokens(text: str) -> tuple[set[str], set[str]]:
    """(CJK bigrams, words) of a text, NFKC and case-folded; hiragana and stop words skipped."""
    bigrams: set[str] = set()
    words: set[str] = set()
    for cjk, word in _TOKEN_RUN.findall(_fold(text)):
        if cjk:
            bigrams.update(cjk[i : i + 2] for i in range(max(len(cjk) - 1, 1)))
        elif word not in _STOPWORDS:
            words.add(word)
    return bigrams, words


def content_tokens(text: str) -> set[str]:
    """Tokens for overlap: character bigrams of CJK runs (Japanese has no spaces to split on), words
    elsewhere. A single CJK character stands for itself; hiragana and English stop words are skipped."""
    bigrams, words = _split_tokens(text)
    return bigrams | words


def claim_tokens(claim_text: str) -> tuple[set[str], set[str]]:
    """The (CJK bigrams, words) a claim is measured by: ticket-id mentions and citation markers removed."""
    return _split_tokens(MARKER.sub(" ", MENTION.sub(" ", claim_text)))


def claim_overlap(claim: str | tuple[set[str], set[str]], sources: Sequence[str | MatchText]) -> float:
    """The share of the claim's tokens (claim_tokens, or the claim's text) that occur in any of the sources.

    A CJK bigram occurs in a source when it is a substring of its text (two adjacent CJK characters
    there are one of its bigrams); a word when it is one of the source's words.
    """
    bigrams, words = claim_tokens(claim) if isinstance(claim, str) else claim
    if not bigrams and not words:
        return 1.0
    prepared = [s if isinstance(s, MatchText) else MatchText.of(s) for s in sources]
    # Joined by a character no bigram contains, the sources are searched once per bigram.
    folded = "\0".join(p.folded for p in prepared)
    found = sum(1 for b in bigrams if b in folded)
    vocabulary = prepared[0].words if len(prepared) == 1 else frozenset().union(*(p.words for p in prepared))
    found += len(words & vocabulary)
    return found / (len(bigrams) + len(words))


# The end of a sentence, for the sentence an inline marker cites.
_SENTENCE_END = re.compile(r"[。．.!?！？\n]")
# A text without sentence ends would make every marker cite all that comes before it: at most this much.
MAX_CITED_SENTENCE_CHARS = 1000


class CitedSentences:
    """The sentence each inline marker of a text ends ("…解消しました[1]。" and "…解消しました。[1]"): the
    text before the marker, markers removed, trailing whitespace and one sentence end dropped, from
    the previous sentence end on (at most MAX_CITED_SENTENCE_CHARS).

    Asked for the markers in order, it reads the text once: linear in the text and the markers, where
    working on the whole text before each marker was quadratic (3,000 markers: 6 s; 12,000: over 60 s).
    """

    def __init__(self, text: str) -> None:
        self.stripped = MARKER.sub("", text)
        self.position: dict[int, int] = {}  # a marker's start in the text -> its place in ``stripped``
        removed = 0
        for match in MARKER.finditer(text):
            self.position[match.start()] = match.start() - removed
            removed += match.end() - match.start()
        self.scanned = 0  # stripped[:scanned] has been looked at for its last visible character...
        self.last_visible = -1
        self.ends_scanned = 0  # ...and stripped[:ends_scanned] for its last sentence end
        self.last_end = -1

    def before(self, marker_start: int) -> str:
        """The sentence the marker at ``marker_start`` (a MARKER match's start) ends; in text order."""
        place = self.position[marker_start]
        visible = len(self.stripped[self.scanned : place].rstrip())
        if visible:
            self.last_visible = self.scanned + visible - 1
        self.scanned = max(self.scanned, place)
        if self.last_visible < 0:
            return ""
        last = self.last_visible
        end = last if _SENTENCE_END.match(self.stripped, last) else last + 1  # one final "。" dropped
        for match in _SENTENCE_END.finditer(self.stripped, self.ends_scanned, end):
            self.last_end = match.start()
        self.ends_scanned = max(self.ends_scanned, end)
        start = max(self.last_end + 1, end - MAX_CITED_SENTENCE_CHARS)
        return self.stripped[start:end]
