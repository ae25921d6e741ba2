"""Mappings laid over one shared mapping, its items encoded once: the same JSON text as json.dumps writes for each."""

from __future__ import annotations

import io
import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anchorkit.chunk.core import ChunkedTicket
from anchorkit.chunk.sources import chunk_items, iter_source
from anchorkit.chunk.writers import chunk_record, write_jsonl
from anchorkit.render.sidecar import encode_sidecar, encode_sidecars
from anchorkit.shared_json import OverlayEncoder
from anchorkit.source.notes import with_note_numbers
from tests.support.long_tickets import write_long_snapshot
from tests.test_chunk import BYTES
from tests.test_chunk_io import numbered_fixtures

_TEXT = st.text(st.characters(codec="utf-8") | st.sampled_from('"\\\n\t\x00\x1f\u2028'), max_size=12)
_SCALARS = (
    _TEXT
    | st.integers(-(2**70), 2**70)
    | st.booleans()
    | st.none()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.lists(_TEXT, max_size=3)
)
_KEYS = st.sampled_from(["ticket_id", "subject", "url", "件名", 'a"b', "", "chunk_index"]) | st.sampled_from(
    [1, None, True]
)


@st.composite
def _shared_and_own(draw: st.DrawFn) -> tuple[dict[Any, Any], list[dict[Any, Any]]]:
    """A mapping and mappings to lay over it, their keys from one small pool (so that they overlap)."""
    values = _SCALARS | st.dictionaries(_KEYS, _SCALARS, max_size=4)
    shared = draw(st.dictionaries(_KEYS, values, max_size=7))
    return shared, draw(st.lists(st.dictionaries(_KEYS, values, max_size=5), min_size=1, max_size=6))


@settings(max_examples=300, deadline=None)  # (a busy machine must not fail it)
@given(_shared_and_own())
def test_each_overlay_is_encoded_as_json_dumps_writes_the_merged_mapping(
    mappings: tuple[dict[Any, Any], list[dict[Any, Any]]],
) -> None:
    shared, overlays = mappings
    encoder = OverlayEncoder(shared)
    assert [encoder.encode(own) for own in overlays] == [
        json.dumps({**shared, **own}, ensure_ascii=False) for own in overlays
    ]


def test_an_own_item_replaces_a_shared_one_in_its_place_and_new_ones_follow() -> None:
    encoder = OverlayEncoder({"ticket_id": 7, "url": "https://r/issues/7", "status": "新規"})
    own = {"chunk_index": 1, "url": "https://r/issues/7#note-3"}
    assert encoder.encode(own) == (
        '{"ticket_id": 7, "url": "https://r/issues/7#note-3", "status": "新規", "chunk_index": 1}'
    )
    # The shared items are not changed by an overlay: the next one starts from them again.
    assert encoder.encode({}) == '{"ticket_id": 7, "url": "https://r/issues/7", "status": "新規"}'
    # Equal keys of other types are other keys, as in a dict: 1 and True are one key, "1" another.
    assert OverlayEncoder({1: "a"}).encode({True: "b", "1": "c"}) == '{"1": "b", "1": "c"}'


def numbered_long_tickets(folder: Path) -> Path:
    """Three generated long tickets (30+ journals, many custom fields, long subjects) as today's pull
    writes them: journals numbered, the Redmine URL recorded (so every chunk's url differs)."""
    write_long_snapshot(folder, 3, seed=0)
    for path in (folder / "issues").glob("*.json"):
        document = json.loads(path.read_text(encoding="utf-8"))
        path.write_text(json.dumps(with_note_numbers(document), ensure_ascii=False), encoding="utf-8")
    state = json.loads((folder / "state.json").read_text(encoding="utf-8"))
    (folder / "state.json").write_text(json.dumps({**state, "redmine_url": "https://redmine.example.com"}))
    return folder


@pytest.mark.parametrize("make_source", [numbered_fixtures, numbered_long_tickets])
def test_the_json_lines_and_sidecars_are_the_chunk_records_as_json_dumps_writes_them(
    tmp_path: Path, make_source: Callable[[Path], Path]
) -> None:
    source = make_source(tmp_path / "snapshot")
    out = io.BytesIO()
    write_jsonl(chunk_items(iter_source(source), BYTES, 600), out)
    tickets = [t for t in chunk_items(iter_source(source), BYTES, 600) if isinstance(t, ChunkedTicket)]
    chunks = [c for t in tickets for c in t.chunks]
    assert len(chunks) > 40 and any("note" in chunk.metadata for chunk in chunks)
    expected = "".join(json.dumps(chunk_record(chunk), ensure_ascii=False) + "\n" for chunk in chunks)
    assert out.getvalue().decode("utf-8") == expected
    for ticket, schema in itertools.product(tickets, ("simple", "typed")):
        many = [(chunk.shared, chunk.own) for chunk in ticket.chunks]
        together = list(encode_sidecars(many, schema, f"#{ticket.ticket_id}"))
        assert together == [encode_sidecar(chunk.metadata, schema, f"#{ticket.ticket_id}") for chunk in ticket.chunks]
