"""Text from outside (a URL someone typed, an answer a model wrote) made safe to store or to show.

- :func:`without_userinfo`: a URL as anchorkit records and prints it, without ``user:password@``
  (requests still uses the credentials of the URL it was given; nothing else ever sees them).
- :func:`printable`: a text as a terminal may print it, without the control characters with which an
  answer could move the cursor, recolour, retitle or rewrite the operator's terminal (ANSI CSI and OSC
  sequences start with ESC; C1 controls such as U+009B act alone on some terminals).
- :func:`parse_json`: JSON whose nesting cannot crash what reads it afterwards: Python's parser gives
  up on 100,000 nested brackets with a RecursionError, and a value a few hundred levels deep still
  parses but breaks the recursive code that copies or writes it (deepcopy, pickle, indented dumps).
  A number too long for Python to convert is refused the same way, and a lone UTF-16 surrogate
  (``"\\ud800"``: valid JSON, which a chunker that cuts an emoji in half writes) becomes U+FFFD, since
  no UTF-8 output could hold it (:func:`without_lone_surrogates` does the same to a value parsed elsewhere,
  such as the Lambda's event). ``allow_nan=False`` also refuses ``NaN`` and ``Infinity``, which Python's
  parser reads although JSON (RFC 8259) has no such numbers.
- :func:`is_count`: whether a parsed JSON value is a whole number of at least 0 (``true`` is not 1).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from typing import Any, TypeGuard, TypeVar
from urllib.parse import SplitResult, urlsplit, urlunsplit

# The bidirectional embeddings, overrides and isolates: they make a terminal or a page show text in another
# order than it is (the "Trojan Source" trick; U+202E before "99321#" shows "#12399"). Marks (LRM, RLM,
# ALM) only nudge neutral characters and are left alone.
_BIDI_CONTROL_CHARS = "\u202a-\u202e\u2066-\u2069"
BIDI_CONTROLS = re.compile(f"[{_BIDI_CONTROL_CHARS}]")
# C0 controls but tab and line feed, DEL, C1 controls; and the bidirectional controls.
_UNPRINTABLE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI_CONTROL_CHARS}]")
# A whole escape sequence where one is recognisable (CSI "ESC [ ... final", OSC "ESC ] ... BEL|ST", and
# their one-byte C1 forms), so
# that its parameters do not stay behind as visible garbage once the ESC is gone.
_ESCAPE_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]|(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?|\x1b[@-_]"
)


def split_url(url: str) -> SplitResult:
    """``urlsplit(url)`` with its port read as well: a ValueError (naming the port or the bracket, never the
    rest of the URL) for a URL requests and botocore could not use, before anything is sent."""
    parts = urlsplit(url)
    parts.port  # noqa: B018 - parsed on access: a port out of range or not a number is a ValueError
    return parts


def without_userinfo(url: str) -> str:
    """``url`` without the ``user:password@`` of its authority (unchanged when it has none)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=host))


def public_url(url: str) -> str:
    """A base URL as it may be written down: without ``user:password@``, query, fragment or final ``/``."""
    return urlunsplit(urlsplit(without_userinfo(url))._replace(query="", fragment="")).rstrip("/")


def printable(text: str) -> str:
    """``text`` without escape sequences and control characters (tabs and line breaks are kept)."""
    return _UNPRINTABLE.sub("", _ESCAPE_SEQUENCE.sub("", text))


T = TypeVar("T")

# Far deeper than any file anchorkit reads (a Redmine issue, a manifest, a retrieval: about 10 levels),
# far shallower than what recursive code copes with (Python's limit is 1,000 frames).
MAX_JSON_DEPTH = 200


class JSONOverLimit(ValueError):
    """Well-formed JSON that anchorkit refuses to read, like malformed JSON (a ValueError too)."""


class JSONTooDeep(JSONOverLimit):
    """JSON nested deeper than :data:`MAX_JSON_DEPTH`."""

    def __init__(self) -> None:
        super().__init__(f"JSON nested too deeply (more than {MAX_JSON_DEPTH} levels)")


class JSONNumberTooLong(JSONOverLimit):
    """A JSON number of more digits than Python converts (``sys.get_int_max_str_digits()``)."""

    def __init__(self) -> None:
        super().__init__(f"a JSON number of more than {sys.get_int_max_str_digits():,} digits")


class JSONNotANumber(JSONOverLimit):
    """``NaN``, ``Infinity`` or ``-Infinity``: Python reads and writes them, JSON has no such numbers."""

    def __init__(self, constant: str) -> None:
        super().__init__(f"{constant} is not a JSON number")


def _refuse_constant(constant: str) -> Any:
    raise JSONNotANumber(constant)


# The escape of a UTF-16 surrogate ("\ud83d"): only JSON that holds one can decode to a lone surrogate.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")
_SURROGATE_ESCAPE_BYTES = re.compile(rb"\\u[dD][89abcdefABCDEF]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def parse_json(data: str | bytes, *, allow_nan: bool = True) -> Any:
    """``json.loads``, raising :class:`JSONOverLimit` (a ValueError, like ``json.JSONDecodeError``) for
    nesting beyond :data:`MAX_JSON_DEPTH` (:class:`JSONTooDeep`), a number too long to convert
    (:class:`JSONNumberTooLong`) and, unless ``allow_nan``, ``NaN`` or ``Infinity`` (:class:`JSONNotANumber`);
    each lone surrogate of a string is replaced by U+FFFD."""
    try:
        value = json.loads(data, parse_constant=None if allow_nan else _refuse_constant)
    except RecursionError:
        raise JSONTooDeep from None
    except (json.JSONDecodeError, UnicodeDecodeError, JSONNotANumber):
        raise
    except ValueError:  # what else the parser raises: int() of a number beyond the digit limit
        raise JSONNumberTooLong from None
    if _brackets(data) > MAX_JSON_DEPTH and nesting_exceeds(value, MAX_JSON_DEPTH):
        raise JSONTooDeep  # (too few brackets to nest that deep, strings' counted too: no walk needed)
    escapes = _SURROGATE_ESCAPE_BYTES if isinstance(data, bytes) else _SURROGATE_ESCAPE
    return without_lone_surrogates(value) if escapes.search(data) else value  # type: ignore[arg-type]


_MAX_DIGITS = 18  # an id, a count, an offset: far below int()'s 4,300-digit limit


def ascii_number(text: str) -> int | None:
    """``text`` read as a whole number of 1 to 18 ASCII digits (an id, a count, a note number), else None:
    str.isdigit() also takes "²", which int() refuses, and "١٢", which int() reads; int() refuses more than
    4,300 digits. A file name, a key or an argument passes here before int()."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= _MAX_DIGITS else None


def is_count(value: Any) -> TypeGuard[int]:
    """Whether a parsed JSON value is a whole number of at least 0: an id, a count, a position."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def without_lone_surrogates(value: T) -> T:
    """``value`` with each lone surrogate of its strings replaced by U+FFFD (a surrogate pair's escapes
    decode to one character: any surrogate left is alone), so that it can be written as UTF-8."""
    return map_strings(value, lambda text: _LONE_SURROGATE.sub("\ufffd", text))


def map_strings(value: T, change: Callable[[str], str]) -> T:
    """A string changed by ``change``, or a JSON value with each of its strings (keys too) changed.
    Recursive: for values whose nesting parse_json has checked."""
    if isinstance(value, str):
        return change(value)  # type: ignore[return-value]
    if isinstance(value, list):
        return [map_strings(item, change) for item in value]  # type: ignore[return-value]
    if isinstance(value, dict):
        return {map_strings(key, change): map_strings(item, change) for key, item in value.items()}  # type: ignore[return-value]
    return value


def _brackets(data: str | bytes) -> int:
    """How many ``[`` and ``{`` ``data`` holds: at least as many as the lists and objects it opens."""
    if isinstance(data, bytes):
        return data.count(b"[") + data.count(b"{")
    return data.count("[") + data.count("{")


def nesting_exceeds(value: Any, limit: int) -> bool:
    """Whether lists and objects are nested more than ``limit`` levels deep (walked a level at a time,
    without recursion: one comprehension a level rather than a step per node)."""
    level = [value] if isinstance(value, (dict, list)) else []
    for _ in range(limit):
        if not level:
            return False
        level = [
            child
            for node in level
            for child in (node.values() if isinstance(node, dict) else node)
            if isinstance(child, (dict, list))
        ]
    return bool(level)
