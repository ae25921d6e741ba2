"""How anchorkit's chunk files are named, for those who write them (chunk/writers.py) and those who
recognise them among published keys (publish/keys.py): ``<id>/<id>-<n>.md``, n from 000. Pure."""

from __future__ import annotations

# A chunk file's name, the ticket id in group ``id``: ASCII digits only, at most 12 (Redmine's ids are
# integers; a longer run of digits is not one), the chunk's position as at least three digits.
CHUNK_FILE = r"(?P<id>[0-9]{1,12})-[0-9]{3,}\.md"


def chunk_id(ticket_id: int, index: int) -> str:
    """``12345-007``: the same for the same chunk of an unchanged ticket, run after run."""
    return f"{ticket_id}-{index:03d}"
