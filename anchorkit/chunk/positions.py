"""Where the content's tokens are: token indices at its character offsets, from one tokenization of it, run by
run, and where its tokens split whatever text surrounds them (the chunker counts a chunk from them). Pure."""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from itertools import accumulate

from anchorkit.tokens import Tokenizer, ends_letters

# A line longer than this many characters has its characters' byte offsets listed once (TextTokens).
_LONG_LINE = 2000


class TextTokens:
    """Token indices at character offsets of a text, from one tokenization of it."""

    def __init__(self, text: str, tokenizer: Tokenizer) -> None:
        self.length = len(text)
        self.lines = text.split("\n")
        self.char_starts = list(accumulate((len(line) + 1 for line in self.lines), initial=0))
        self.byte_starts = list(accumulate((len(line.encode("utf-8")) + 1 for line in self.lines), initial=0))
        self.tokens = tokenizer.tokenize_many([text])[0]
        self.line_tokens = self.tokens.tokens_at(self.byte_starts[: len(self.lines)])
        self.byte_columns: dict[int, list[int]] = {}  # long line -> _byte_columns

    def at(self, position: int) -> int:
        """Index of the token that holds the character at ``position`` (the token count at the end)."""
        if position >= self.length:
            return self.tokens.token_count
        line = bisect_right(self.char_starts, position) - 1
        column = position - self.char_starts[line]
        if not column:
            return self.line_tokens[line]
        text = self.lines[line]
        within = self._byte_columns(line)[column] if len(text) > _LONG_LINE else len(text[:column].encode("utf-8"))
        return self.tokens.token_at(self.byte_starts[line] + within)

    def position(self, token: int) -> int:
        """The character offset where token ``token`` starts (where a character does, inside one)."""
        if token >= self.tokens.token_count:
            return self.length
        byte = self.tokens.byte_offset(token)
        line = bisect_right(self.byte_starts, byte) - 1
        if len(self.lines[line]) > _LONG_LINE:
            return self.char_starts[line] + bisect_right(self._byte_columns(line), byte - self.byte_starts[line]) - 1
        within = self.lines[line].encode("utf-8")[: byte - self.byte_starts[line]]
        return self.char_starts[line] + len(within.decode("utf-8", "ignore"))

    def _byte_columns(self, line: int) -> list[int]:
        """Where each character of a long line starts in its UTF-8 bytes (and the line's length): asked
        about again and again when a long line is cut in many places, it is encoded once."""
        columns = self.byte_columns.get(line)
        if columns is None:
            columns = self.byte_columns[line] = list(accumulate(map(len, map(str.encode, self.lines[line])), initial=0))
        return columns


# Where an exact tokenizer's tokens of a text are those of its two parts encoded alone: the start of a
# line that is not blank (see TokenPositions.count).
# A run of more characters than this is tokenized with offsets at once: it is cut inside as a rule (on
# long tickets at 300 tokens, 160 of the 161), and would otherwise be encoded twice.
_CUT_INSIDE = 400
_LEADING_BLANKS = re.compile(r"[ \t\u3000]*")
# A run: a line, the lines after it that are blank or begin with other white space, and the line break
# before the next line that is not (whose first character other than blanks is not white space).
# findall lists them in C, each one's text at once; its last item is the empty match at the end.
_RUN = re.compile(r"[^\n]*(?:\n(?![ \t\u3000]*\S)[^\n]*)*\n?")


class TokenPositions:
    """Token indices at character offsets of a text (a ticket's content).

    With an exact tokenizer the content is encoded as runs of lines, each from a line that is not
    blank to the next (their tokens are the content's, in order): the token index at a run's start
    is then a sum of counts, and only a run that a position falls inside is tokenized with offsets
    (when asked about it). Most positions asked about are the starts of such lines; building every
    token's offset for the rest was most of the cost. Any other tokenizer: the content is one run.
    """

    def __init__(self, text: str, tokenizer: Tokenizer, known: Callable[[str], int] | None = None) -> None:
        """``known``: counts kept by text (tokens.KnownCounts) for the runs a ticket repeats (fences, blank
        lines, a signature); else each run is counted."""
        self.text = text
        self.length = len(text)
        self.tokenizer = tokenizer
        runs = (_RUN.findall(text)[:-1] or [text]) if tokenizer.exact else [text]
        self.starts = list(accumulate(map(len, runs[:-1]), initial=0))
        self.runs: dict[int, TextTokens] = {}
        if tokenizer.exact:
            count = known or tokenizer.count
            counts = [
                count(run) if len(run) <= _CUT_INSIDE else self._tokenized(index, run).tokens.token_count
                for index, run in enumerate(runs)
            ]
        else:
            counts = [self._tokenized(0, text).tokens.token_count]
        self.firsts = list(accumulate(counts, initial=0))  # token index where each run starts, and the count
        self.run_at = {start: index for index, start in enumerate(self.starts)}

    def _tokenized(self, index: int, run: str) -> TextTokens:
        tokens = self.runs[index] = TextTokens(run, self.tokenizer)
        return tokens

    def text_start(self, index: int) -> int:
        """Where the text of run ``index``'s first line begins, after its blanks (see clean)."""
        return _LEADING_BLANKS.match(self.text, self.starts[index]).end()  # type: ignore[union-attr]

    def _run(self, index: int) -> TextTokens:
        run = self.runs.get(index)
        if run is None:
            end = self.starts[index + 1] if index + 1 < len(self.starts) else self.length
            run = self._tokenized(index, self.text[self.starts[index] : end])
        return run

    def at(self, position: int) -> int:
        """Index of the token that holds the character at ``position`` (the token count at the end)."""
        if position >= self.length:
            return self.firsts[-1]
        index = self.run_at.get(position)
        if index is not None:
            return self.firsts[index]
        index = bisect_right(self.starts, position) - 1
        return self.firsts[index] + self._run(index).at(position - self.starts[index])

    def position(self, token: int) -> int:
        """The character offset where token ``token`` starts (where a character does, inside one)."""
        if token >= self.firsts[-1]:
            return self.length
        index = bisect_right(self.firsts, token) - 1  # (every run has a token at least)
        return self.starts[index] + self._run(index).position(token - self.firsts[index])

    def cost(self, start: int, end: int) -> int:
        return self.at(end) - self.at(start)

    def run_after(self, position: int) -> int | None:
        """The index of the first run that starts after ``position`` (None: none does)."""
        index = bisect_right(self.starts, position)
        return index if index < len(self.starts) else None

    def first_split_after(self, start: int, end: int) -> int | None:
        """The first place in (start, end) where the text's tokens split whatever surrounds it: a run of
        letters' end in start's run of lines, else the next run's start (if its text begins before ``end``)."""
        positions, content = self, self.text
        run = positions.run_after(start)
        fresh = positions.starts[run] if run is not None and positions.text_start(run) < end else None
        for position in range(start + 1, min(end, positions.length if run is None else positions.starts[run])):
            if ends_letters(content, position):
                return position
        return fresh

    def last_split_before(self, end: int, low: int) -> int | None:
        """The last place in [low, end) where the text's tokens split whatever surrounds it: a run of
        letters' end in end's run of lines, else that run's start (if its text begins before ``end``)."""
        positions, content = self, self.text
        run = bisect_left(positions.starts, end) - 1  # the last run that starts before end
        run_start = positions.starts[run]
        for position in range(end - 1, max(low, run_start + 1) - 1, -1):
            if ends_letters(content, position):
                return position
        return run_start if run_start >= low and positions.text_start(run) < end else None

    def clean(self, offset: int) -> bool:
        """Whether ``offset`` is the start of a line that is not blank (where a run starts) or the text's end:
        an exact tokenizer's tokens split there whatever surrounds it (see count)."""
        return offset in self.run_at or offset == self.length

    def count(self, head: tuple[str, ...], start: int, end: int, tail: str, known: Callable[[str], int]) -> int:
        """The exact count of ``"".join(head) + text[start:end] + tail`` (an exact tokenizer's; ``known``
        counts the head's parts and the tail, texts that recur).

        An exact tokenizer's count of a text is the sum of its counts of two parts cut at the start of a
        line that is not blank: cl100k_base's pre-tokenizer ends a piece at the last line break of a run of
        white space and never joins a line break with what follows it on the next line
        (tokens.TiktokenTokenizer.tokenize_pairs relies on it too); or where a run of letters ends
        (``tokens.ends_letters``). A text cut at such places costs its head, its tail and the tokens
        between as the offsets say. One cut inside a line is counted from the words around it: its text up
        to the first, and from the last, such place, encoded again; so a chunk cut inside a long line
        costs a few words encoded again, not the whole line.
        """
        start_clean, end_clean = self.clean(start), self.clean(end)
        head_end = start if start_clean else self.first_split_after(start, end)
        tail_start = end if end_clean or head_end is None else self.last_split_before(end, head_end)
        if head_end is None or tail_start is None:
            return self.tokenizer.count("".join(head) + self.text[start:end] + tail)
        if start_clean:
            head_tokens = sum(map(known, head))
        else:
            head_tokens = self.tokenizer.count("".join(head) + self.text[start:head_end])
        tail_tokens = known(tail) if end_clean else self.tokenizer.count(self.text[tail_start:end] + tail)
        return head_tokens + self.cost(head_end, tail_start) + tail_tokens
