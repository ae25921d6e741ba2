"""Text from outside (a URL someone typed, an answer a model wrote) made safe to store or to show.

- :func:`without_userinfo`: a URL as anchorkit records and prints it, without ``user:password@``
  (requests still uses the credentials of the URL it was given; nothing else ever sees them).
- :func:`printable`: a text as a terminal may print it, without the control characters with which an
  answer could move the cursor, recolour, retitle or rewrite the operator's terminal (ANSI CSI and OSC
  sequences start with ESC; C1 controls such as U+009B act alone on some terminals).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

# C0 controls but tab and line feed, DEL, C1 controls; and the bidirectional overrides and isolates,
# which make a terminal show text in another order than it is (the "Trojan Source" trick).
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# A whole escape sequence where one is recognisable (CSI "ESC [ ... final", OSC "ESC ] ... BEL|ST"), so
# that its parameters do not stay behind as visible garbage once the ESC is gone.
_ESCAPE_SEQUENCE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]")


def without_userinfo(url: str) -> str:
    """``url`` without the ``user:password@`` of its authority (unchanged when it has none)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=host))


def printable(text: str) -> str:
    """``text`` without escape sequences and control characters (tabs and line breaks are kept)."""
    return _UNPRINTABLE.sub("", _ESCAPE_SEQUENCE.sub("", text))
