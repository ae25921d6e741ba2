"""Which documents of a transform folder hold private content: ``.anchorkit-private.json`` in the folder.

``transform --include-private`` writes private issues and private notes into documents that look like any
other, and ``chunk`` reads a transform folder's documents as they are: without a record it would publish
them. A document's sidecar says so itself (``private: true``, render/sidecar.py); this file says it for
every document, sidecar or not, and is hidden so that upload never publishes it.

It lists the tickets whose documents hold private content. While a run with ``--include-private`` is under
way it says ``"all"``: a run cut short leaves every document counted as private, never one unmarked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from anchorkit.errors import UsageError
from anchorkit.files import write_atomic
from anchorkit.untrusted import parse_json

PRIVATE_MARKS_FILE = ".anchorkit-private.json"
_KEY = "private_tickets"
_ALL = "all"


@dataclass(frozen=True)
class PrivateMarks:
    tickets: frozenset[int] = frozenset()
    every: bool = False  # a run with --include-private has not finished: any document may hold private content

    def __contains__(self, ticket_id: object) -> bool:
        return self.every or ticket_id in self.tickets


def read_private_marks(folder: Path) -> PrivateMarks:
    """The folder's marks (none when it has no such file). UsageError for a file that says nothing clear:
    guessing either way could publish private content."""
    path = folder / PRIVATE_MARKS_FILE
    try:
        value = parse_json(path.read_bytes())[_KEY]
    except FileNotFoundError:
        return PrivateMarks()
    except (OSError, ValueError, TypeError, KeyError):
        value = None
    if value == _ALL:
        return PrivateMarks(every=True)
    if isinstance(value, list) and all(isinstance(item, int) and not isinstance(item, bool) for item in value):
        return PrivateMarks(frozenset(value))
    raise UsageError(
        f"{path}: not a list of the tickets whose documents hold private content ({{{_KEY!r}: [ids]}}); "
        "run transform again to rewrite it"
    )


def write_private_marks(folder: Path, marks: PrivateMarks) -> None:
    """Record ``marks`` in ``folder`` (no marks: no file, so a folder without private content holds none)."""
    path = folder / PRIVATE_MARKS_FILE
    if not marks.every and not marks.tickets:
        path.unlink(missing_ok=True)
        return
    value = _ALL if marks.every else sorted(marks.tickets)
    write_atomic(path, (json.dumps({_KEY: value}) + "\n").encode("utf-8"))
