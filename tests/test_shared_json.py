"""Objects that share their values, encoded once: the same JSON text as json.dumps writes for each."""

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
from anchorkit.shared_json import SharedValuesEncoder
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
def _objects_sharing_values(draw: st.DrawFn) -> list[dict[Any, Any]]:
    """Mappings whose values are drawn from one pool of objects (so the same objects recur, as the
    metadata of a ticket's chunks do), some holding a mapping of such values."""
    pool = draw(st.lists(_SCALARS, min_size=1, max_size=6))
    value = st.sampled_from(pool)
    flat = st.dictionaries(_KEYS, value, max_size=6)
    return draw(st.lists(st.dictionaries(_KEYS, value | flat, max_size=6), min_size=1, max_size=8))


@settings(max_examples=300)
@given(_objects_sharing_values())
def test_each_object_is_encoded_as_json_dumps_writes_it(objects: list[dict[Any, Any]]) -> None:
    encoder = SharedValuesEncoder()
    assert [encoder.encode(mapping) for mapping in objects] == [
        json.dumps(mapping, ensure_ascii=False) for mapping in objects
    ]


def test_a_value_that_is_another_object_under_the_same_key_is_encoded_again() -> None:
    encoder = SharedValuesEncoder()
    first, second = ["a"], ["b"]
    assert encoder.encode({"k": first, "n": 1}) == '{"k": ["a"], "n": 1}'
    assert encoder.encode({"k": second, "n": 1}) == '{"k": ["b"], "n": 1}'
    assert encoder.encode({"n": 2, "k": first}) == '{"n": 2, "k": ["a"]}'
    # Equal is not the same: 1, True and 1.0 are equal values with three JSON texts.
    assert [encoder.encode({"n": value}) for value in (1, True, 1.0)] == ['{"n": 1}', '{"n": true}', '{"n": 1.0}']


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
        many = [chunk.metadata for chunk in ticket.chunks]
        together = list(encode_sidecars(many, schema, f"#{ticket.ticket_id}"))
        assert together == [encode_sidecar(metadata, schema, f"#{ticket.ticket_id}") for metadata in many]
