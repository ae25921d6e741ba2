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
        self._keys = list(shared)
        self._pairs = [json_pair(key, value) for key, value in shared.items()]
        self._index = {key: index for index, key in enumerate(shared)}

    def encode(self, own: Mapping[Any, Any]) -> str:
        pairs = self._pairs.copy()
        index = self._index.get
        for key, value in own.items():
            at = index(key)
            if at is None:
                pairs.append(json_pair(key, value))
            else:  # the key as the merged mapping keeps it: the shared one (1 where the own is True)
                pairs[at] = json_pair(self._keys[at], value)
        return "{" + ", ".join(pairs) + "}"


def json_pair(key: Any, value: Any) -> str:
    """``"key": value`` as json.dumps writes it inside an object."""
    if type(key) is not str:  # json's own conversion of a number, bool or None key
        return json.dumps({key: value}, ensure_ascii=False)[1:-1]
    if type(value) is str:
        encoded = encode_basestring(value)
    elif type(value) is int:
        encoded = int.__repr__(value)
    else:
        encoded = json.dumps(value, ensure_ascii=False)
    return f"{encode_basestring(key)}: {encoded}"
