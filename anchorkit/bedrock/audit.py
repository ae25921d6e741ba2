"""What the handler did, as counts: one JSON audit line per invocation, and the sums an auditor reads back. Pure.

The handler logs one line per invocation::

    {"event": "anchorkit.bedrock.audit", "version": 1, "ingestionJobId": "…", "files": 3, "failed_files": 0,
     "chunks_in": 120, "chunks_out": 120, "already_anchored": 101, "anchored": 19, "unknown_ticket": 0, …}

``read_audit_lines`` sums such lines from a log export (plain lines, or CloudWatch's JSON log format,
where the line is the ``message`` of a JSON record; other lines are skipped), and ``count_batches``
counts the output batch files themselves: which chunks hold their ticket's complete anchor, the
knowledge base's real coverage rather than an emulation. ``anchorkit stats`` reads either.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from anchorkit.anchors import holds_text
from anchorkit.bedrock.anchoring import Ticket, holds_complete_anchor
from anchorkit.bedrock.batches import read_batch
from anchorkit.bedrock.counts import NUMBERS, Counts
from anchorkit.verify.ids import parse_ticket_id

AUDIT_EVENT = "anchorkit.bedrock.audit"
AUDIT_VERSION = 1
_MARKER = f'"event": "{AUDIT_EVENT}"'


def audit_line(counts: Counts, ids: dict[str, str]) -> str:
    """The invocation's audit line: one line of JSON, the marker first so that a log filter finds it."""
    return json.dumps({"event": AUDIT_EVENT, "version": AUDIT_VERSION, **ids, **counts.to_json()}, ensure_ascii=False)


def read_audit_lines(lines: Iterable[str]) -> tuple[Counts, int]:
    """The sum of the audit lines among ``lines`` and how many there were."""
    total, found = Counts(), 0
    for line in lines:
        record = _audit_record(line)
        if record is not None:
            total, found = total + _counts(record), found + 1
    return total, found


def _audit_record(line: str) -> dict[str, Any] | None:
    if AUDIT_EVENT not in line:
        return None
    start = line.find("{" + _MARKER)
    if start < 0:  # the line inside a JSON log record, its quotes escaped
        try:
            record = json.loads(line[line.index("{") :])
        except (ValueError, json.JSONDecodeError):
            return None
        message = record.get("message") if isinstance(record, dict) else None
        return _audit_record(message) if isinstance(message, str) else None
    try:
        record, _ = json.JSONDecoder().raw_decode(line, start)
    except json.JSONDecodeError:
        return None
    return record if record.get("version") == AUDIT_VERSION else None


def _counts(record: dict[str, Any]) -> Counts:
    counts = Counts()
    for number in NUMBERS:
        setattr(counts, number.name, int(record.get(number.name) or 0))
    shapes = record.get("shapes")
    counts.shapes = {str(k): int(v) for k, v in shapes.items()} if isinstance(shapes, dict) else {}
    return counts


def count_batches(batches: Iterable[bytes]) -> Counts:
    """Counts of output batch files as the knowledge base ingests them: each text chunk's ticket from
    its ``ticket_id`` metadata, and whether it holds that ticket's complete anchor (BatchError: a file
    of no known shape)."""
    total = Counts()
    for raw in batches:
        batch = read_batch(raw)
        counts = Counts(batches=1, chunks_out=len(batch.items), shapes={batch.shape: 1})
        for item in batch.items:
            text, metadata = batch.text(item), batch.metadata(item)
            ticket_id = parse_ticket_id(metadata.get("ticket_id"))
            subject = metadata.get("subject")
            if not holds_text(text):
                counts.not_text += 1
            elif ticket_id is None:
                counts.unknown_ticket += 1
            elif holds_complete_anchor(
                text, Ticket(ticket_id, subject if isinstance(subject, str) else "", None, "metadata")
            ):
                counts.already_anchored += 1
            else:
                counts.missing_anchor += 1
        total += counts
    return total
