"""Which documents of a transform folder hold private content: ``.anchorkit-private.json`` in the folder.

``transform --include-private`` writes private issues and private notes into documents that look like any
other, and ``chunk`` reads a transform folder's documents as they are: without a record it would publish
them. A document's sidecar says so itself (``private: true``, render/sidecar.py); this file says it for
every document, sidecar or not, and is hidden so that upload never publishes it.

It lists the tickets whose documents hold private content (``private_tickets``), and for a public issue with
private notes, which journals of its history hold them (``private_journals``: ``{"12345": {"journals": 5,
"private": [1, 3]}}``, positions from 0 among the history's journals): ``chunk`` then leaves those journals
out instead of the whole document. A listed ticket without that detail is left out whole, as it is by a
reader that does not know it. While a run with ``--include-private`` is under way the file says ``"all"``: a
run cut short leaves every document counted as private, never one unmarked.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anchorkit.errors import UsageError
from anchorkit.files import owner_only, shown, write_atomic
from anchorkit.pages import plural
from anchorkit.untrusted import ascii_number, is_count, parse_json

PRIVATE_MARKS_FILE = ".anchorkit-private.json"
_KEY = "private_tickets"
_JOURNALS_KEY = "private_journals"
_ALL = "all"


@dataclass(frozen=True)
class PrivateContent:
    """What of one document is private: all of it (``journals`` None: a private issue), or the journals at
    the positions ``journals`` (from 0) among the ``journal_count`` journals of its history."""

    journals: tuple[int, ...] | None = None
    journal_count: int = 0


@dataclass(frozen=True)
class PrivateMarks:
    tickets: Mapping[int, PrivateContent] = field(default_factory=dict)
    every: bool = False  # a run with --include-private has not finished: any document may hold private content

    def __contains__(self, ticket_id: object) -> bool:
        return self.every or ticket_id in self.tickets

    def of(self, ticket_id: int) -> PrivateContent | None:
        """What of the ticket's document is private (None: nothing)."""
        return PrivateContent() if self.every else self.tickets.get(ticket_id)


def read_private_marks(folder: Path) -> PrivateMarks:
    """The folder's marks (none when it has no such file). UsageError for a file that says nothing clear:
    guessing either way could publish private content."""
    path = folder / PRIVATE_MARKS_FILE
    try:
        marks = parse_json(path.read_bytes())
        value, journals = marks[_KEY], marks.get(_JOURNALS_KEY, {})
    except FileNotFoundError:
        return PrivateMarks()
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        value = journals = None
    if value == _ALL:
        return PrivateMarks(every=True)
    if isinstance(value, list) and all(is_count(item) for item in value) and isinstance(journals, dict):
        tickets = {ticket_id: PrivateContent() for ticket_id in value}
        for key, detail in journals.items():
            content = _private_journals(detail)
            ticket_id = ascii_number(key)
            if ticket_id is None or ticket_id not in tickets or content is None:
                break
            tickets[ticket_id] = content
        else:
            return PrivateMarks(tickets)
    raise UsageError(
        f"{path}: not a list of the tickets whose documents hold private content ({{{_KEY!r}: [ids]}}); "
        "run transform again to rewrite it"
    )


def _private_journals(detail: Any) -> PrivateContent | None:
    """``{"journals": 5, "private": [1, 3]}`` as read (None if it is not that)."""
    if not isinstance(detail, dict) or set(detail) != {"journals", "private"}:
        return None
    count, private = detail["journals"], detail["private"]
    if not is_count(count) or not isinstance(private, list) or not private:
        return None
    if not all(is_count(position) and position < count for position in private):
        return None
    return PrivateContent(tuple(private), count)


def write_private_marks(folder: Path, marks: PrivateMarks, mode: int | None = None) -> None:
    """Record ``marks`` in ``folder`` (no marks: no file, so a folder without private content holds none), in a
    file of ``mode`` (files.write_atomic)."""
    path = folder / PRIVATE_MARKS_FILE
    if not marks.every and not marks.tickets:
        path.unlink(missing_ok=True)
        return
    value: dict[str, Any] = {_KEY: _ALL if marks.every else sorted(marks.tickets)}
    journals = {
        str(ticket_id): {"journals": content.journal_count, "private": list(content.journals)}
        for ticket_id, content in sorted(marks.tickets.items())
        if content.journals is not None and not marks.every
    }
    if journals:
        value[_JOURNALS_KEY] = journals
    write_atomic(path, (json.dumps(value) + "\n").encode("utf-8"), mode)


def private_content_evidence(path: Path) -> str | None:
    """Why the documents or chunks at ``path``, read as found, may hold private content, as the run that wrote
    them records it: a folder's private marks (transform --include-private), else a file only its owner may
    read (transform and chunk write them so with --include-private); None: nothing says so. Marks that cannot
    be read count as private: guessing otherwise could leave a report of private content readable by all."""
    if path.is_dir():
        try:
            marks = read_private_marks(path)
        except UsageError:
            return f"its {PRIVATE_MARKS_FILE} cannot be read"
        if marks.every:
            return f"its {PRIVATE_MARKS_FILE} says a run with --include-private did not finish"
        if marks.tickets:
            return f"its {PRIVATE_MARKS_FILE} lists {plural(len(marks.tickets), 'document')} with private content"
    private_file = _first_owner_only_file(path)
    if private_file is None:
        return None
    return f"{shown(private_file)} may be read by its owner alone, as --include-private writes it"


def _first_owner_only_file(path: Path) -> str | None:
    """The first file at ``path`` (the file itself, or one in the folder or below it, links not followed) that
    only its owner may read: its path relative to ``path``'s folder."""
    if not path.is_dir():
        return path.name if owner_only(path) else None
    for folder, subfolders, files in os.walk(path):
        subfolders.sort()
        for name in sorted(files):
            if owner_only(Path(folder, name)):
                return os.path.relpath(os.path.join(folder, name), path)
    return None
