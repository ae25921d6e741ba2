"""The text as the mention scan reads it: each character as NFKC makes it, invisible ones dropped, with
the way back to the original offsets; and the bidirectional controls that reorder what a reader sees.

A reader sees ``#12399`` in ``﹟12399`` (a small number sign), ``ｈｔｔｐｓ://…/issues/12399``,
``ﾁｹｯﾄ #99`` or ``#\\u200b12399`` (a zero-width space inside); a pattern written for ``#12399`` sees
none of them. The scan therefore reads a *folded view*: every character replaced by its NFKC form, and
format characters (category Cf: zero-width spaces, word joiners, BOMs, soft hyphens, bidirectional
controls) and combining marks (Mn, Me: a mark after a digit, a variation selector) dropped.

A reader also sees ``#12399`` in ``♯12399`` (a music sharp sign), in ``&#35;12399`` or ``&num;12399`` (the
number sign as an HTML character reference, which a page or a chat window renders as ``#``) and in
``#12ㅤ399`` (a Hangul filler: a letter, not a format character, that shows as nothing). The view holds
``#`` for the first two and drops the fillers.

Folding is per character (a reference to ``#`` counting as one), not NFKC of the whole text, so that
every character of the view comes from exactly one character or reference of the original: a mention
found in the view is replaced by exactly the characters that showed it, and full-width punctuation
around it stays as it was. It also makes the view of a text the views of its pieces put together, which
the streaming filter relies on (it holds back a reference cut in the middle).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from bisect import bisect_right
from collections.abc import Sequence
from typing import TypeVar

from anchorkit.untrusted import BIDI_CONTROLS, map_strings

T = TypeVar("T")

# Characters a reader does not see as characters of their own: format characters and combining marks.
_INVISIBLE = frozenset({"Cf", "Mn", "Me"})
# Letters that show as nothing: the Hangul fillers (U+3164 and its half-width form U+FFA0, which NFKC
# makes U+1160, and the jamo fillers U+115F, U+1160).
_FILLERS = frozenset("\u115f\u1160\u3164\uffa0")
# Characters NFKC leaves as they are that a reader takes for another: the music sharp sign for "#".
_LOOKALIKES = {"\u266f": "#"}
# The HTML character references of "#" (decimal, hexadecimal, named); HTML names are case-sensitive.
HASH_REFERENCE = r"&(?:#0*35|#[xX]0*23|num);"


def _kept(char: str) -> bool:
    return unicodedata.category(char) not in _INVISIBLE and char not in _FILLERS


def _normalized(char: str) -> bool:
    return unicodedata.is_normalized("NFKC", char)


def _folded(char: str) -> str:
    """What the view holds for ``char``: its NFKC form ("" for an invisible character). NFKC may make
    marks of its own ("ﾞ" is U+3099): dropped too, so that folding twice changes nothing."""
    if char in _LOOKALIKES:
        return _LOOKALIKES[char]
    return "".join(filter(_kept, unicodedata.normalize("NFKC", char))) if _kept(char) else ""


_fold_char = functools.cache(_folded)  # for the characters texts hold (not the whole BMP _foldable looks at)


def _character_class(code_points: list[int]) -> str:
    """A regular expression character class of ``code_points`` (ascending), as ranges."""
    ranges: list[list[int]] = []
    for code in code_points:
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1][1] = code
        else:
            ranges.append([code, code])
    return "".join(re.escape(chr(low)) + (f"-{re.escape(chr(high))}" if high > low else "") for low, high in ranges)


@functools.cache
def _foldable() -> re.Pattern[str]:
    """The characters the view holds otherwise than as they are: found by a C-speed search instead of a
    lookup per character (a Japanese claim holds a few full-width characters among many that fold to
    themselves). Built once a process from the running Python's Unicode data, for the Basic
    Multilingual Plane (about 40 ms); a character beyond it (an emoji) is looked at by itself."""
    changed = [
        code
        for code in range(0x80, 0x10000)
        if not _kept(chr(code)) or not _normalized(chr(code)) or chr(code) in _LOOKALIKES
    ]
    return re.compile(f"{HASH_REFERENCE}|[{_character_class(changed)}\U00010000-\U0010ffff]")


class Folded:
    """A text's folded view (``text``) and where each of its offsets comes from in the original."""

    __slots__ = ("_ends", "_origin_ends", "_origins", "_starts", "text")

    def __init__(self, text: str, uneven: Sequence[tuple[int, int, int, int]] = ()) -> None:
        self.text = text
        # For each piece of the original not folded to one character for one (a character folded to
        # none or several, a character reference folded to "#"): where its folded form starts and ends
        # in the view, and where the piece starts and ends in the original. In between, the offsets move
        # together.
        self._starts: Sequence[int] = ()
        self._ends: Sequence[int] = ()
        self._origins: Sequence[int] = ()
        self._origin_ends: Sequence[int] = ()
        if uneven:
            self._starts, self._ends, self._origins, self._origin_ends = (
                [entry[i] for entry in uneven] for i in range(4)
            )

    def start(self, index: int) -> int:
        """The original offset of the character the view's ``index`` comes from (for the view's end:
        the original's end)."""
        if not self._starts:  # one character for one: the same offsets
            return index
        before = bisect_right(self._starts, index) - 1  # the last uneven piece folded at or before it
        if before < 0:
            return index
        if index < self._ends[before]:  # inside what one piece folded to
            return self._origins[before]
        return self._origin_ends[before] + index - self._ends[before]

    def end(self, index: int) -> int:
        """The original offset after the piece the view's ``index - 1`` comes from: a span of the view
        covers whole original characters (and references)."""
        if not index:
            return 0
        if not self._starts:
            return index
        last = index - 1
        before = bisect_right(self._starts, last) - 1
        if before >= 0 and last < self._ends[before]:
            return self._origin_ends[before]
        return self.start(last) + 1


def fold(text: str) -> Folded:
    """``text``'s folded view. Linear in the text; an ASCII text without a character reference, or one
    with nothing to fold, is its own view."""
    if text.isascii() and "&" not in text:
        return Folded(text)
    pieces: list[tuple[int, int, int]] = []  # (offset, length, width in the view) of each uneven piece

    def folded(match: re.Match[str]) -> str:
        view = "#" if len(match[0]) > 1 else _fold_char(match[0])
        if len(view) != 1 or len(match[0]) != 1:
            pieces.append((match.start(), len(match[0]), len(view)))
        return view

    view = _foldable().sub(folded, text)
    uneven: list[tuple[int, int, int, int]] = []
    shift = 0  # view offset minus original offset, so far
    for offset, length, width in pieces:
        uneven.append((offset + shift, offset + shift + width, offset, offset + length))
        shift += width - length
    return Folded(view, uneven)


def without_bidi_controls(value: T) -> T:
    """A string, or the strings of a JSON value (keys too), as they are stored and checked: without what
    would show them in another order."""
    return map_strings(value, functools.partial(BIDI_CONTROLS.sub, ""))
