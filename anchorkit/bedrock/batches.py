"""The batch files of a Bedrock custom transformation: read either shape, write back the shape read. Pure.

Bedrock's documentation gives one shape for the JSON objects a content batch key names::

    {"fileContents": [{"contentBody": "...", "contentType": "TEXT", "contentMetadata": {"k": "v"}}]}

and public handlers (and their tests) read another::

    {"version": "1.0", "chunks": [{"content": {"type": "TEXT", "text": "..."},
                                   "metadata": {"attributes": [{"key": "k", "value": "v", "type": "STRING"}]}}]}

(``chunkList`` in place of ``chunks`` too). A batch is answered in the shape it came in, with every
key anchorkit does not touch kept as it was. Anything else is refused with a ``BatchError`` that says
what was expected: guessing at a third shape could write batches Bedrock reads as empty. A ``null``
where the contract has an optional object (``contentMetadata``, ``metadata``, ``attributes``) or an
item's text (``contentBody``, ``content.text``: an empty chunk) is read as absent, as JSON writers
that serialise every field write it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from anchorkit.untrusted import JSONOverLimit, parse_json

MetadataValue = str | int | float | bool | list[str]
Item = dict[str, Any]

DOCUMENTED = "fileContents"
CHUNK_LIST_KEYS = ("chunks", "chunkList")
CHUNK_LIST_VERSION = "1.0"
TEXT = "TEXT"


class BatchError(ValueError):
    """A batch file anchorkit cannot read; the message says what is wrong with it."""


@dataclass(frozen=True)
class Batch:
    """One batch file: its shape (``fileContents``, ``chunks`` or ``chunkList``), the parsed JSON and its items."""

    shape: str
    data: dict[str, Any]

    @property
    def items(self) -> list[Item]:
        items: list[Item] = self.data[self.shape]
        return items

    def text(self, item: Item) -> str | None:
        """The item's text, or None for an item that is not text (an image, a table row...)."""
        if self.shape == DOCUMENTED:
            return item.get("contentBody") if item.get("contentType", TEXT) == TEXT else None
        content = item["content"]
        return content.get("text") if content.get("type") == TEXT else None

    def metadata(self, item: Item) -> dict[str, Any]:
        """The item's chunk-level metadata as plain ``{key: value}``."""
        if self.shape == DOCUMENTED:
            return dict(item.get("contentMetadata") or {})
        return {a["key"]: _attribute_value(a) for a in _attributes(item)}

    def updated(self, item: Item, text: str, metadata: Mapping[str, MetadataValue]) -> Item:
        """A copy of ``item`` with this text and these metadata keys set (others kept as they were)."""
        new = copy.deepcopy(item)
        if self.shape == DOCUMENTED:
            new["contentBody"] = text
            new["contentMetadata"] = {**(new.get("contentMetadata") or {}), **metadata}
            return new
        new["content"]["text"] = text
        attributes = [a for a in _attributes(new) if a["key"] not in metadata]
        holder = new["metadata"] = new.get("metadata") or {}
        holder["attributes"] = attributes + [_attribute(key, value) for key, value in metadata.items()]
        return new

    def made(self, text: str, metadata: Mapping[str, MetadataValue]) -> Item:
        """A new text item in this batch's shape (for chunks anchorkit makes)."""
        if self.shape == DOCUMENTED:
            return {"contentBody": text, "contentType": TEXT, "contentMetadata": dict(metadata)}
        return self.updated({"content": {"type": TEXT, "text": ""}}, text, metadata)

    def encode(self, items: Sequence[Item]) -> bytes:
        """The batch file with ``items`` in place of its items, every other key as it was."""
        return json.dumps({**self.data, self.shape: list(items)}, ensure_ascii=False).encode("utf-8")


def read_batch(raw: bytes) -> Batch:
    """The batch file's content, checked; BatchError says why it cannot be read."""
    try:
        data = parse_json(raw.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise BatchError(f"not UTF-8 JSON ({error.reason} at byte {error.start})") from None
    except json.JSONDecodeError as error:
        raise BatchError(f"not JSON ({error.msg} at line {error.lineno} column {error.colno})") from None
    except JSONOverLimit as error:
        raise BatchError(str(error)) from None
    if not isinstance(data, dict):
        raise BatchError(f"a JSON {type(data).__name__}, not an object with fileContents or chunks")
    present = [key for key in (DOCUMENTED, *CHUNK_LIST_KEYS) if key in data]
    if not present:
        raise BatchError(
            f"no fileContents, chunks or chunkList (keys: {', '.join(sorted(data)) or 'none'}): "
            "not a batch shape anchorkit knows"
        )
    if len(present) > 1:
        raise BatchError(f"both {' and '.join(present)}: which one holds the chunks is ambiguous")
    shape = present[0]
    if shape != DOCUMENTED and data.get("version") != CHUNK_LIST_VERSION:
        raise BatchError(f"{shape} batch of version {data.get('version')!r} (anchorkit reads {CHUNK_LIST_VERSION!r})")
    items = data[shape]
    if not isinstance(items, list):
        raise BatchError(f"{shape} is a JSON {type(items).__name__}, not a list")
    check = _check_documented if shape == DOCUMENTED else _check_chunk
    for position, item in enumerate(items):
        problem = check(item) if isinstance(item, dict) else f"a JSON {type(item).__name__}, not an object"
        if problem:
            raise BatchError(f"{shape}[{position}]: {problem}")
    return Batch(shape, data)


def _check_documented(item: Item) -> str | None:
    if item.get("contentType", TEXT) == TEXT and not isinstance(item.get("contentBody", ""), str | None):
        return "a TEXT item whose contentBody is not a string"
    if not isinstance(item.get("contentMetadata"), dict | None):
        return "contentMetadata is not an object"
    return None


def _check_chunk(item: Item) -> str | None:
    content = item.get("content")
    if not isinstance(content, dict):
        return "no content object"
    if content.get("type") == TEXT and not isinstance(content.get("text", ""), str | None):
        return "a TEXT chunk whose content.text is not a string"
    metadata = item.get("metadata") or {}
    attributes = metadata.get("attributes") or [] if isinstance(metadata, dict) else None
    if not isinstance(attributes, list) or not all(
        isinstance(a, dict) and isinstance(a.get("key"), str) for a in attributes
    ):
        return "metadata.attributes is not a list of {key, value, type} objects"
    return None


def _attributes(item: Item) -> list[dict[str, Any]]:
    """A chunk's metadata attributes (none when ``metadata`` or its ``attributes`` is absent or null)."""
    attributes: list[dict[str, Any]] = (item.get("metadata") or {}).get("attributes") or []
    return attributes


# Attribute values as the chunks shape writes them: the value itself beside its type. Bedrock's typed
# objects are read too: {"stringValue": ...}, and a typed sidecar's {"value": {...}, "includeForEmbedding": ...}.
_TYPED_VALUE_KEYS = ("stringValue", "numberValue", "booleanValue", "stringListValue")


def plain_value(value: Any) -> Any:
    """A metadata value without Bedrock's type wrapping, if it has one."""
    if isinstance(value, dict) and isinstance(value.get("value"), dict):
        value = value["value"]
    if isinstance(value, dict):
        return next((value[key] for key in _TYPED_VALUE_KEYS if key in value), value)
    return value


def _attribute_value(attribute: Mapping[str, Any]) -> Any:
    return plain_value(attribute.get("value"))


def _attribute(key: str, value: MetadataValue) -> dict[str, Any]:
    if isinstance(value, bool):
        kind = "BOOLEAN"
    elif isinstance(value, (int, float)):
        kind = "NUMBER"
    elif isinstance(value, list):
        kind = "STRING_LIST"
    else:
        kind = "STRING"
    return {"key": key, "value": value, "type": kind}
