"""What a published key is: a ticket's document, one of its chunks, or their sidecar. Pure, no I/O.

Two layouts publish tickets under a prefix, each object with its sidecar ``<key>.metadata.json``:

- documents (``anchorkit transform``): ``<id>.md``, or ``<project>/<id>.md`` (``--layout by-project``);
- chunks (``anchorkit chunk --out``, ``sync --chunks``): ``<id>/<id>-<n>.md``, n from 000
  (anchorkit/chunk_names.py, which the chunk writer names its files by).

A key of any other shape is nobody's ticket: what is deleted by name alone (the objects of a ticket
withdrawn from publication, the chunks a ticket no longer has) is only ever a key of these shapes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from anchorkit.chunk_names import CHUNK_FILE
from anchorkit.render.sidecar import SIDECAR_SUFFIX

DOCUMENTS, CHUNKS = "documents", "chunks"
# ASCII digits only, at most 12 (Redmine's ids are integers; a longer run of digits is not one).
_DOCUMENT_KEY = re.compile(r"^(?:(?P<parent>.*)/)?(?P<id>[0-9]{1,12})\.md$")
_CHUNK_KEY = re.compile(rf"^(?:(?P<parent>.*)/)?(?P<folder>[0-9]{{1,12}})/{CHUNK_FILE}$")


def document_key_of(key: str) -> str:
    """The document a key belongs to: a sidecar `X.metadata.json` belongs to `X`, a document to itself."""
    return key[: -len(SIDECAR_SUFFIX)] if key.endswith(SIDECAR_SUFFIX) else key


@dataclass(frozen=True)
class TicketKey:
    """Whose object a key is: the ticket, the layout, and the folder the ticket's objects sit in (``""``
    for the top of the prefix; ``ops`` for ``ops/12.md`` and for ``ops/12/12-000.md`` alike)."""

    ticket_id: int
    layout: str  # DOCUMENTS or CHUNKS
    folder: str


def ticket_key(key: str) -> TicketKey | None:
    """The ticket a document, chunk or sidecar key is of, or None for a key of any other shape."""
    main = document_key_of(key)
    chunk = _CHUNK_KEY.match(main)
    if chunk is not None:
        # The folder names the ticket and so does the file: ``12/13-000.md`` is nobody's.
        return TicketKey(int(chunk["id"]), CHUNKS, chunk["parent"] or "") if chunk["id"] == chunk["folder"] else None
    document = _DOCUMENT_KEY.match(main)
    return TicketKey(int(document["id"]), DOCUMENTS, document["parent"] or "") if document is not None else None


def ticket_of_key(key: str) -> int | None:
    """The ticket a key is of (``12345.md``, ``ops/12345.md.metadata.json``, ``12345/12345-003.md``)."""
    found = ticket_key(key)
    return found.ticket_id if found is not None else None


def layouts_of(keys: Iterable[str]) -> set[str]:
    """The layouts the ticket keys among ``keys`` are in (empty: none is a ticket's)."""
    return {found.layout for key in keys if (found := ticket_key(key)) is not None}


def superseded(local_keys: Iterable[str], remote_keys: Iterable[str]) -> list[str]:
    """The remote keys that a ticket's local chunks replace, deleted by name with or without ``--delete``:

    - the chunks (and sidecars) a ticket published as chunks no longer has (it shrank);
    - the document of a ticket now published as chunks in the same folder, or the chunks of one now
      published as a document (a change of layout).

    Only keys of a ticket that the local side still publishes, in the same folder, and only where
    chunks are involved: between the two document layouts (flat, by-project) nothing is decided by
    name, as before (``--delete`` removes what has no local counterpart).
    """
    local: dict[tuple[str, int], set[str]] = {}
    for key in local_keys:
        found = ticket_key(key)
        if found is not None:
            local.setdefault((found.folder, found.ticket_id), set()).add(found.layout)
    replaced = []
    for key in remote_keys:
        found = ticket_key(key)
        layouts = local.get((found.folder, found.ticket_id)) if found is not None else None
        if found is not None and layouts and (found.layout == CHUNKS or CHUNKS in layouts):
            replaced.append(key)
    return replaced
