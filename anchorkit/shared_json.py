"""JSON text of many mappings laid over one shared mapping, byte for byte what
``json.dumps({**shared, **own}, ensure_ascii=False)`` writes for each.

The chunks of one ticket carry the ticket's metadata each (project, status, dates, custom fields:
about 20 of a chunk's 27 items, 2.5 times the chunk's own text) and a few items of their own (section,
note, position). The shared items are encoded once a ticket; a chunk only encodes its own and joins.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from json.encoder import encode_basestring  # what json.dumps(..., ensure_ascii=False) writes a str with
from typing import Any


class OverlayEncoder:
    """Encodes ``{**shared, **own}`` for one ``shared`` mapping and any ``own``: an own key that the shared
    mapping has replaces its value in place (as the merge does), the others follow in their order."""

    def __init__(self, shared: Mapping[Any, Any]) -> None:
        self._prefixes = [json_key(key) for key in shared]
        self._pairs = [prefix + json_value(value) for prefix, value in zip(self._prefixes, shared.values())]
        self._index = {key: index for index, key in enumerate(shared)}

    def encode(self, own: Mapping[Any, Any]) -> str:
        # (Inlined: a chunk's few own items are encoded for every chunk, the shared ones once a ticket.)
        pairs = self._pairs.copy()
        index, prefixes, known_keys = self._index.get, self._prefixes, _KEYS.get
        for key, value in own.items():
            kind = type(value)
            text = (
                encode_basestring(value) if kind is str else int.__repr__(value) if kind is int else json_value(value)
            )
            at = index(key)
            if at is None:
                pairs.append((known_keys(key) or json_key(key)) + text)
            else:  # the key as the merged mapping keeps it: the shared one (1 where the own is True)
                pairs[at] = prefixes[at] + text
        return "{" + ", ".join(pairs) + "}"


# The keys met so far and their text (a chunk's own keys recur in every chunk): bounded, keys are few.
_KEYS: dict[str, str] = {}
_MAX_KEYS = 1024


def json_key(key: Any) -> str:
    """``"key": `` as json.dumps writes it inside an object."""
    if type(key) is not str:  # json's own conversion of a number, bool or None key
        return json.dumps({key: 0}, ensure_ascii=False)[1:-2]
    text = _KEYS.get(key)
    if text is None:
        text = encode_basestring(key) + ": "
        if len(_KEYS) < _MAX_KEYS:
            _KEYS[key] = text
    return text


def json_value(value: Any) -> str:
    """``value`` as json.dumps writes it."""
    if type(value) is str:
        return encode_basestring(value)
    if type(value) is int:
        return int.__repr__(value)
    return json.dumps(value, ensure_ascii=False)
