"""Amazon Bedrock Knowledge Base metadata sidecars (``<id>.md.metadata.json``). Pure.

Bedrock reads ``{"metadataAttributes": {...}}`` beside each document and lets queries filter on it.
``ticket_id`` and ``subject`` are what query-time injection (inject.py) needs to write a chunk's
anchor line, as in the design's own example ``{"ticket_id": 12345, "subject": "VPN接続が不安定"}``.
Dates are numbers (epoch seconds) so that ``greaterThan``/``lessThan`` filters work, and ISO
strings for people. Bedrock's limits are enforced here: a ticket that would exceed them loses its
least important attributes first (custom fields from the last one backwards, then the optional
built-in ones), deterministically, with a warning.

``url`` is the issue's page on Redmine (when the snapshot knows Redmine's address), and
``note_numbers`` the Redmine note number of each journal in the document's history, in order, as ranges
(``"1-3,5,7-12"``: Redmine numbers all of an issue's journals, so the ones a document leaves out,
private notes say, leave gaps). The chunker (anchorkit/chunk) turns them into links to the note a
chunk comes from; they are left out when pull could not know the numbers (anchorkit/source/notes.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from anchorkit.anchors import one_line
from anchorkit.note_ranges import format_note_numbers
from anchorkit.render.document import Lookups, parse_time
from anchorkit.settings import SIDECAR_SCHEMAS, default
from anchorkit.shared_json import OverlayEncoder
from anchorkit.untrusted import parse_json

Value = str | int | float | bool | list[str]

MAX_FILE_BYTES = 10 * 1024
MAX_STRING_CHARS = 2048
MAX_LIST_ITEMS = 10
RESERVED_PREFIX = "x-amz-bedrock-kb-"
SCHEMAS = SIDECAR_SCHEMAS
# A document's sidecar is the document's path plus this suffix (Bedrock's naming rule).
SIDECAR_SUFFIX = ".metadata.json"

# Built-in attributes that may be dropped, most important first (ticket_id is never dropped).
_OPTIONAL_ORDER = (
    "subject",
    "url",
    "note_numbers",
    "project",
    "status",
    "is_closed",
    "tracker",
    "updated",
    "updated_at",
    "created",
    "created_at",
    "priority",
    "assignee",
    "closed",
    "closed_at",
    "category",
    "version",
    "author",
)


def build_sidecar(
    issue: dict[str, Any],
    lookups: Lookups,
    schema: str = default("sidecar_schema"),
    *,
    url: str | None = None,
    notes: Sequence[int] | None = None,
    private: bool = False,
) -> tuple[bytes, list[str]]:
    """The sidecar's bytes and the warnings about what had to be truncated or dropped.

    ``url``: the issue's Redmine URL; ``notes``: the note numbers of the journals the document's
    history shows, in its order (both left out when None); ``private``: the document holds private
    content (``private: true``, never dropped; no attribute otherwise).
    """
    check_schema(schema)
    ticket = f"#{issue['id']}"
    noted = format_note_numbers(notes) if notes else None
    if noted is not None and len(noted) > MAX_STRING_CHARS:  # a list cut short would name wrong notes
        noted = None
    data, warnings = encode_sidecar(_attributes(issue, lookups, url, noted, private), schema, ticket)
    if notes and noted is None:
        warnings.insert(0, f"{ticket}: too many journals to list their note numbers in the sidecar")
    return data, warnings


def encode_sidecar(attributes: dict[str, Value], schema: str, ticket: str) -> tuple[bytes, list[str]]:
    """Attributes as sidecar bytes within Bedrock's limits, and the warnings about what had to go
    (``ticket``, "#12345", names the ticket in them)."""
    check_schema(schema)
    warnings: list[str] = []
    attributes = {
        key: _fit(key, value, ticket, warnings)
        for key, value in attributes.items()
        if not key.startswith(RESERVED_PREFIX)  # Bedrock's own keys: a file may not set them
    }
    droppable = [key for key in reversed(list(attributes)) if key.startswith("cf_")]
    droppable += [key for key in reversed(_OPTIONAL_ORDER) if key in attributes]
    while True:
        data = _encode(attributes, schema)
        if len(data) <= MAX_FILE_BYTES or not droppable:
            break
        dropped = droppable.pop(0)
        del attributes[dropped]
        warnings.append(f"{ticket}: sidecar over {MAX_FILE_BYTES} bytes, dropped attribute {dropped!r}")
    return data, warnings


def encode_sidecars(
    many: Iterable[tuple[Mapping[str, Value], Mapping[str, Value]]], schema: str, ticket: str
) -> Iterator[tuple[bytes, list[str]]]:
    """``encode_sidecar`` of ``{**shared, **own}`` for each ``(shared, own)`` of ``many`` (the chunks of one
    ticket, which share one mapping of the ticket's attributes and have a few of their own): the shared
    attributes are checked against Bedrock's limits and encoded once, and a set whose attributes are all
    within them is encoded as it is; only one that is not (or whose file would be too large) goes through
    ``encode_sidecar``'s fitting."""
    check_schema(schema)
    last: Mapping[str, Value] | None = None
    shared_fit, encoder = False, OverlayEncoder({})
    for shared, own in many:
        if shared is not last:
            last, shared_fit, encoder = shared, _within(shared, ticket), OverlayEncoder(_body(shared, schema))
        if shared_fit and _within(own, ticket):
            data = _sidecar_bytes(encoder.encode(_body(own, schema)))
            if len(data) <= MAX_FILE_BYTES:
                yield data, []
                continue
        yield encode_sidecar({**shared, **own}, schema, ticket)


def _within(attributes: Mapping[str, Value], ticket: str) -> bool:
    """Whether every attribute is one a sidecar may hold as it is (no reserved key, no value over a limit)."""
    return all(
        not key.startswith(RESERVED_PREFIX) and _fit(key, value, ticket, []) == value
        for key, value in attributes.items()
    )


def check_schema(schema: str) -> None:
    """Raise ValueError, naming the known schemas, unless ``schema`` is one of them."""
    if schema not in SCHEMAS:
        raise ValueError(f"unknown sidecar schema {schema!r} (expected one of {', '.join(SCHEMAS)})")


def _attributes(
    issue: dict[str, Any], lookups: Lookups, url: str | None, notes: str | None, private: bool
) -> dict[str, Value]:
    project = issue.get("project") or {}
    project_entry = lookups.get("projects", {}).get(str(project.get("id")), {})
    candidates: dict[str, Value | None] = {
        "ticket_id": issue["id"],
        "private": True if private else None,
        "subject": one_line(str(issue.get("subject") or "")),
        "url": url,
        "note_numbers": notes,
        "project": project_entry.get("identifier") or _name(project),
        "tracker": _name(issue.get("tracker")),
        "status": _name(issue.get("status")),
        "is_closed": _is_closed(issue, lookups),
        "priority": _name(issue.get("priority")),
        "author": _name(issue.get("author")),
        "assignee": _name(issue.get("assigned_to")),
        "category": _name(issue.get("category")),
        "version": _name(issue.get("fixed_version")),
    }
    for key, source in (("created", "created_on"), ("updated", "updated_on"), ("closed", "closed_on")):
        moment = parse_time(issue.get(source))
        if moment is not None:
            candidates[key] = int(moment.timestamp())
            candidates[f"{key}_at"] = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    for custom_field in issue.get("custom_fields") or []:
        if isinstance(custom_field, dict) and custom_field.get("name"):
            key = "cf_" + "_".join(one_line(str(custom_field["name"])).split(" "))
            candidates[key] = _custom_value(custom_field.get("value"))
    return {
        key: value
        for key, value in candidates.items()
        if value not in (None, "", []) and not key.startswith(RESERVED_PREFIX)
    }


def _fit(key: str, value: Value, ticket: str, warnings: list[str]) -> Value:
    if isinstance(value, str) and len(value) > MAX_STRING_CHARS:
        warnings.append(f"{ticket}: sidecar attribute {key!r} truncated to {MAX_STRING_CHARS} characters")
        return value[:MAX_STRING_CHARS]
    if isinstance(value, list):
        if len(value) > MAX_LIST_ITEMS:
            warnings.append(f"{ticket}: sidecar attribute {key!r} cut to its first {MAX_LIST_ITEMS} values")
            value = value[:MAX_LIST_ITEMS]
        return [_fit(key, item, ticket, warnings) for item in value]  # type: ignore[misc]
    return value


def _encode(attributes: Mapping[str, Value], schema: str) -> bytes:
    # One line: json's C encoder only runs without indent, and the sidecar is read by Bedrock, not people.
    return _sidecar_bytes(json.dumps(_body(attributes, schema), ensure_ascii=False))


def _body(attributes: Mapping[str, Value], schema: str) -> Mapping[str, Any]:
    """What ``metadataAttributes`` holds in ``schema``."""
    return attributes if schema == "simple" else {key: _typed(value) for key, value in attributes.items()}


def _sidecar_bytes(body: str) -> bytes:
    """The sidecar file of a ``metadataAttributes`` object's JSON text (as json.dumps writes the whole)."""
    return ('{"metadataAttributes": ' + body + "}\n").encode("utf-8")


def _typed(value: Value) -> dict[str, Any]:
    if isinstance(value, bool):
        typed = {"type": "BOOLEAN", "booleanValue": value}
    elif isinstance(value, (int, float)):
        typed = {"type": "NUMBER", "numberValue": value}
    elif isinstance(value, list):
        typed = {"type": "STRING_LIST", "stringListValue": value}
    else:
        typed = {"type": "STRING", "stringValue": value}
    return {"value": typed, "includeForEmbedding": False}


def _name(value: Any) -> str:
    return one_line(str(value.get("name") or "")) if isinstance(value, dict) else ""


def _custom_value(value: Any) -> Value | None:
    if isinstance(value, list):
        return [one_line(str(v)) for v in value if v not in (None, "")]
    return None if value is None else one_line(str(value))


def _is_closed(issue: dict[str, Any], lookups: Lookups) -> bool:
    status = issue.get("status") or {}
    if isinstance(status.get("is_closed"), bool):  # Redmine >= 5.1 says so itself
        return status["is_closed"]
    known = lookups.get("statuses", {}).get(str(status.get("id")), {}).get("is_closed")
    return known if isinstance(known, bool) else issue.get("closed_on") is not None


def read_sidecar(data: bytes) -> dict[str, Value]:
    """The attributes of a sidecar of either schema, as plain values (ValueError: not a sidecar)."""
    try:
        attributes = parse_json(data)["metadataAttributes"]
    except (ValueError, TypeError, KeyError):
        raise ValueError('not a sidecar: expected {"metadataAttributes": {...}}') from None
    if not isinstance(attributes, dict):
        raise ValueError("not a sidecar: metadataAttributes is not an object")
    return {key: _untyped(value) for key, value in attributes.items()}


_TYPED_KEYS = {
    "STRING": "stringValue",
    "NUMBER": "numberValue",
    "BOOLEAN": "booleanValue",
    "STRING_LIST": "stringListValue",
}


def _untyped(value: Any) -> Any:
    if isinstance(value, dict) and isinstance(value.get("value"), dict):
        typed = value["value"]
        return typed.get(_TYPED_KEYS.get(typed.get("type"), ""))
    return value
