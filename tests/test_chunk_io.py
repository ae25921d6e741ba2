"""Chunks from a snapshot or a transform output folder, out as JSON Lines or as a Bedrock folder."""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from anchorkit.anchors import find_anchors, find_titles
from anchorkit.chunk.core import ChunkedTicket
from anchorkit.chunk.sources import chunk_items, iter_source
from anchorkit.chunk.writers import write_chunk_folder, write_jsonl, write_jsonl_file
from anchorkit.files import write_new_folder
from anchorkit.note_ranges import parse_note_numbers
from anchorkit.render.document import RenderOptions
from anchorkit.render.sidecar import (
    MAX_FILE_BYTES,
    MAX_LIST_ITEMS,
    MAX_STRING_CHARS,
    RESERVED_PREFIX,
    encode_sidecar,
    encode_sidecars,
)
from anchorkit.render.transform import TicketFailure, TransformOptions, transform_snapshot
from anchorkit.source.notes import with_note_numbers
from tests.test_chunk import BYTES

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
LIMIT = 600  # bytes: a few hundred tokens of Japanese


def numbered_fixtures(folder: Path) -> Path:
    """The fixtures as a pull of today writes them: each journal with its Redmine note number."""
    shutil.copytree(FIXTURES, folder)
    for path in (folder / "issues").glob("*.json"):
        document = json.loads(path.read_text(encoding="utf-8"))
        path.write_text(json.dumps(with_note_numbers(document), ensure_ascii=False), encoding="utf-8")
    return folder


def chunks_of(source: Path, **options: Any) -> list[ChunkedTicket | TicketFailure | str]:
    return list(chunk_items(iter_source(source, **options), BYTES, LIMIT))


def jsonl_records(source: Path) -> list[dict[str, Any]]:
    out = io.BytesIO()
    report = write_jsonl(chunk_items(iter_source(source), BYTES, LIMIT), out)
    assert report.failed == [] and report.private_skipped == 1
    return [json.loads(line) for line in out.getvalue().decode("utf-8").splitlines()]


def test_jsonl_has_one_object_per_chunk_with_its_id_ticket_text_and_metadata() -> None:
    records = jsonl_records(FIXTURES)
    assert len(records) > 34 and len({r["id"] for r in records}) == len(records)
    for record in records:
        assert set(record) == {"id", "ticket_id", "text", "metadata"}
        ticket_id, metadata = record["ticket_id"], record["metadata"]
        assert record["id"] == f"{ticket_id}-{metadata['chunk_index']:03d}" and metadata["ticket_id"] == ticket_id
        assert metadata["url"].startswith(f"https://redmine.example.co.jp/issues/{ticket_id}")
        assert {a.ticket_id for a in find_anchors(record["text"]) + find_titles(record["text"])} == {ticket_id}
        assert metadata["section"] in ("details", "description", "history") and "project" in metadata


def test_a_jsonl_file_is_rewritten_only_when_its_bytes_change(tmp_path: Path) -> None:
    path = tmp_path / "chunks.jsonl"
    first = write_jsonl_file(chunk_items(iter_source(FIXTURES), BYTES, LIMIT), path)
    os.utime(path, (1, 1))
    second = write_jsonl_file(chunk_items(iter_source(FIXTURES), BYTES, LIMIT), path)
    assert (first.created, second.unchanged, path.stat().st_mtime) == (["chunks.jsonl"], 1, 1)
    third = write_jsonl_file(chunk_items(iter_source(FIXTURES), BYTES, 500), path)
    assert third.changed == ["chunks.jsonl"] and [p.name for p in tmp_path.iterdir()] == ["chunks.jsonl"]


def test_jsonl_records_load_into_langchain_documents_with_their_metadata() -> None:
    documents = pytest.importorskip("langchain_core.documents")
    records = jsonl_records(FIXTURES)
    loaded = [documents.Document(page_content=r["text"], metadata=r["metadata"], id=r["id"]) for r in records]
    assert [(d.id, d.page_content, d.metadata) for d in loaded] == [
        (r["id"], r["text"], r["metadata"]) for r in records
    ]
    assert all(d.metadata["url"] and d.metadata["ticket_id"] for d in loaded)


def test_jsonl_records_load_into_llamaindex_text_nodes_with_their_metadata() -> None:
    schema = pytest.importorskip("llama_index.core.schema")
    records = jsonl_records(FIXTURES)
    nodes = [schema.TextNode(text=r["text"], id_=r["id"], metadata=r["metadata"]) for r in records]
    assert [(n.node_id, n.text, n.metadata) for n in nodes] == [(r["id"], r["text"], r["metadata"]) for r in records]
    # What LlamaIndex embeds and what it shows the LLM both keep the ticket's anchor.
    assert all(find_anchors(n.get_content()) or find_titles(n.get_content()) for n in nodes)


# ---------------------------------------------------------------------------------------------
# The folder of chunk files for Bedrock


def check_bedrock_sidecar(data: bytes, schema: str) -> dict[str, Any]:
    """The sidecar's attributes, after checking Bedrock's rules (render/sidecar.py's limits)."""
    assert len(data) <= MAX_FILE_BYTES
    attributes = json.loads(data)["metadataAttributes"]
    for key, value in attributes.items():
        assert not key.startswith(RESERVED_PREFIX)
        if schema == "typed":
            assert value["includeForEmbedding"] is False
            typed = value["value"]
            kind = typed["type"]
            value = typed[
                {"STRING": "stringValue", "NUMBER": "numberValue", "BOOLEAN": "booleanValue"}.get(
                    kind, "stringListValue"
                )
            ]
        assert isinstance(value, (str, int, float, bool, list))
        if isinstance(value, str):
            assert len(value) <= MAX_STRING_CHARS
        if isinstance(value, list):
            assert len(value) <= MAX_LIST_ITEMS and all(isinstance(item, str) for item in value)
    return attributes


@pytest.mark.parametrize("schema", ["simple", "typed"])
def test_the_folder_has_a_file_and_a_valid_sidecar_per_chunk(tmp_path: Path, schema: str) -> None:
    out = tmp_path / "chunks"
    report = write_chunk_folder(chunk_items(iter_source(FIXTURES), BYTES, LIMIT), out, schema)
    assert report.failed == [] and len(report.created) == 2 * report.chunks
    documents = sorted(out.glob("*/*.md"))
    assert len(documents) == report.chunks
    for path in documents:
        ticket_id = int(path.parent.name)
        assert path.name.startswith(f"{ticket_id}-")
        text = path.read_text(encoding="utf-8")
        assert {a.ticket_id for a in find_anchors(text) + find_titles(text)} == {ticket_id}
        sidecar = path.with_name(path.name + ".metadata.json").read_bytes()
        attributes = check_bedrock_sidecar(sidecar, schema)
        ticket = attributes["ticket_id"]["value"]["numberValue"] if schema == "typed" else attributes["ticket_id"]
        assert ticket == ticket_id


def test_running_again_changes_nothing_and_a_shrunk_or_removed_ticket_loses_its_stale_chunks(tmp_path: Path) -> None:
    snap, out = tmp_path / "snap", tmp_path / "chunks"
    shutil.copytree(FIXTURES, snap)
    write_chunk_folder(chunk_items(iter_source(snap), BYTES, LIMIT), out)
    (out / "notes.txt").write_text("mine")  # not ours: never touched
    (out / "12345" / "12345-draft.md").write_text("mine too")
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}

    again = write_chunk_folder(chunk_items(iter_source(snap), BYTES, LIMIT), out)
    assert (again.created, again.changed, again.removed) == ([], [], [])
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before

    path = snap / "issues" / "12345.json"
    issue = json.loads(path.read_text(encoding="utf-8"))
    issue["issue"]["journals"] = issue["issue"]["journals"][:1]
    path.write_text(json.dumps(issue, ensure_ascii=False), encoding="utf-8")
    (snap / "issues" / "12301.json").unlink()
    count_before = len(list((out / "12345").glob("12345-*.md")))
    shrunk = write_chunk_folder(chunk_items(iter_source(snap), BYTES, LIMIT), out)
    kept = sorted(p.name for p in (out / "12345").glob("12345-0*.md"))
    assert len(kept) < count_before and kept == [f"12345-{n:03d}.md" for n in range(len(kept))]
    assert {name.split("/")[0] for name in shrunk.removed} == {"12345", "12301"}
    assert not (out / "12301").exists()
    assert (out / "notes.txt").read_text() == "mine" and (out / "12345" / "12345-draft.md").exists()
    assert not shrunk.changed or all(name.startswith("12345/") for name in shrunk.changed)


def test_a_check_run_says_what_would_change_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "chunks"
    report = write_chunk_folder(chunk_items(iter_source(FIXTURES), BYTES, LIMIT), out, check=True)
    assert report.created and not out.exists()


# ---------------------------------------------------------------------------------------------
# A transform output folder as the source


def test_a_transform_folder_gives_the_same_chunks_and_note_links_as_its_snapshot(tmp_path: Path) -> None:
    snap = numbered_fixtures(tmp_path / "snap")
    out = tmp_path / "out"
    assert not transform_snapshot(snap, out, TransformOptions(sidecars=True), jobs=1).failed
    from_snapshot = [c for t in chunks_of(snap) if isinstance(t, ChunkedTicket) for c in t.chunks]
    from_folder = [c for t in chunks_of(out) if isinstance(t, ChunkedTicket) for c in t.chunks]
    assert [(c.id, c.text, c.metadata) for c in from_folder] == [(c.id, c.text, c.metadata) for c in from_snapshot]
    noted = [c for c in from_folder if c.metadata["section"] == "history"]
    assert noted and all(c.metadata["url"].endswith(f"#note-{c.metadata['note']}") for c in noted)


def test_an_include_private_folder_gives_the_public_chunks_and_note_links_without_include_private(
    tmp_path: Path,
) -> None:
    snap = numbered_fixtures(tmp_path / "snap")
    out = tmp_path / "out"
    widened = TransformOptions(sidecars=True, render=RenderOptions(include_private=True))
    assert not transform_snapshot(snap, out, widened, jobs=1).failed
    from_snapshot = [c for t in chunks_of(snap) if isinstance(t, ChunkedTicket) for c in t.chunks]
    from_folder = [c for t in chunks_of(out) if isinstance(t, ChunkedTicket) for c in t.chunks]
    assert [(c.id, c.text, c.metadata) for c in from_folder] == [(c.id, c.text, c.metadata) for c in from_snapshot]
    # 12322's notes 2 and 4 are private: the others keep Redmine's numbers, and no chunk links to those two.
    journals = json.loads((snap / "issues" / "12322.json").read_text(encoding="utf-8"))["issue"]["journals"]
    private = {j["note_number"] for j in journals if j.get("private_notes")}
    held = [parse_note_numbers(c.metadata.get("chunk_notes")) or [] for c in from_folder if c.ticket_id == 12322]
    noted = {note for notes in held for note in notes}
    assert private == {2, 4} and noted == {j["note_number"] for j in journals} - private


def test_a_folder_without_sidecars_links_to_the_issue_when_given_the_redmine_url(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert not transform_snapshot(FIXTURES, out, TransformOptions(), jobs=1).failed
    options = TransformOptions(redmine_url="https://redmine.example.jp/")
    tickets = [t for t in chunks_of(out, options=options) if isinstance(t, ChunkedTicket)]
    assert len(tickets) == 34
    for ticket in tickets:
        assert {c.metadata["url"] for c in ticket.chunks} == {f"https://redmine.example.jp/issues/{ticket.ticket_id}"}


def test_bad_documents_fail_one_by_one_naming_the_file_and_the_rest_is_chunked(tmp_path: Path) -> None:
    out = tmp_path / "out"
    transform_snapshot(FIXTURES, out, TransformOptions(sidecars=True), jobs=1)
    (out / "12301.md").write_bytes(b"\xff\xfe not UTF-8")
    (out / "12304.md.metadata.json").write_text("{not json")
    (out / "12307.md").write_text("a document without its title line\n", encoding="utf-8")
    (out / "12309.md").write_text((out / "12310.md").read_text(encoding="utf-8"), encoding="utf-8")  # another's
    results = chunks_of(out)
    failures = {Path(f.source).name: f.message for f in results if isinstance(f, TicketFailure)}
    assert set(failures) == {"12301.md", "12304.md.metadata.json", "12307.md", "12309.md"}
    assert "not UTF-8" in failures["12301.md"] and "not a sidecar" in failures["12304.md.metadata.json"]
    assert "title line" in failures["12307.md"] and "ticket #12309" in failures["12309.md"]
    assert all(str(out) in message for message in failures.values())
    assert sum(isinstance(r, ChunkedTicket) for r in results) == 30


def test_a_failed_ticket_keeps_the_chunk_files_it_had(tmp_path: Path) -> None:
    snap, out = tmp_path / "snap", tmp_path / "chunks"
    shutil.copytree(FIXTURES, snap)
    write_chunk_folder(chunk_items(iter_source(snap), BYTES, LIMIT), out)
    files = sorted(p.name for p in (out / "12345").iterdir())
    (snap / "issues" / "12345.json").write_text("{broken", encoding="utf-8")
    report = write_chunk_folder(chunk_items(iter_source(snap), BYTES, LIMIT), out)
    assert [f.ticket_id for f in report.failed] == [12345] and "12345.json" in report.failed[0].message
    assert sorted(p.name for p in (out / "12345").iterdir()) == files and not report.removed


def test_a_ticket_folder_that_is_a_symbolic_link_is_not_written_through(tmp_path: Path) -> None:
    snap, out, elsewhere = tmp_path / "snap", tmp_path / "chunks", tmp_path / "elsewhere"
    shutil.copytree(FIXTURES, snap)
    write_chunk_folder(chunk_items(iter_source(snap), BYTES, LIMIT), out)
    shutil.move(out / "12345", elsewhere)  # someone's copy of a ticket's chunks, linked into the folder
    (out / "12345").symlink_to(elsewhere)
    stale = elsewhere / "12345-099.md"
    shutil.copy(elsewhere / "12345-000.md", stale)
    before = {p.name: p.read_bytes() for p in elsewhere.iterdir()}
    (snap / "issues" / "12345.json").write_text((snap / "issues" / "12345.json").read_text().replace("VPN", "L2TP"))
    report = write_chunk_folder(chunk_items(iter_source(snap), BYTES, LIMIT), out)
    assert [f.ticket_id for f in report.failed] == [12345]
    assert "12345" in report.failed[0].message and "symbolic link" in report.failed[0].message
    assert {p.name: p.read_bytes() for p in elsewhere.iterdir()} == before
    (snap / "issues" / "12345.json").unlink()  # the ticket gone: its linked folder is not emptied either
    gone = write_chunk_folder(chunk_items(iter_source(snap), BYTES, LIMIT), out)
    assert not any(name.startswith("12345/") for name in gone.removed)
    assert {p.name: p.read_bytes() for p in elsewhere.iterdir()} == before and (out / "12345").is_symlink()


@pytest.mark.parametrize("check", [False, True])
def test_a_failed_ticket_keeps_its_lines_of_the_json_lines_file_in_their_place(tmp_path: Path, check: bool) -> None:
    snap, path = tmp_path / "snap", tmp_path / "chunks.jsonl"
    shutil.copytree(FIXTURES, snap)
    write_jsonl_file(chunk_items(iter_source(snap), BYTES, LIMIT), path)
    before = path.read_bytes()
    kept = before.count(b'{"id": "12345-')
    assert kept > 1
    (snap / "issues" / "12345.json").write_text("{broken", encoding="utf-8")
    (snap / "issues" / "12378.json").unlink()  # another ticket's change is written all the same
    report = write_jsonl_file(chunk_items(iter_source(snap), BYTES, LIMIT), path, check=check)
    assert [f.ticket_id for f in report.failed] == [12345]
    assert report.warnings == [f"#12345: failed: its {kept} lines of the last run kept"]
    expected = b"".join(line for line in before.splitlines(keepends=True) if not line.startswith(b'{"id": "12378-'))
    assert path.read_bytes() == (before if check else expected)
    assert report.chunks == expected.count(b"\n") and report.changed == ["chunks.jsonl"]


def test_json_lines_escape_the_line_breaks_that_json_leaves_raw(tmp_path: Path) -> None:
    snap = tmp_path / "snap"
    shutil.copytree(FIXTURES, snap)
    issue_path = snap / "issues" / "12301.json"
    document = json.loads(issue_path.read_text(encoding="utf-8"))
    document["issue"]["description"] = "一行目\u2028二行目\u2029三行目\x85四行目"
    issue_path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    out = io.BytesIO()
    write_jsonl(chunk_items(iter_source(snap), BYTES, LIMIT), out)
    text = out.getvalue().decode("utf-8")
    records = [json.loads(line) for line in text.splitlines()]  # str.splitlines breaks at all three
    assert "一行目\u2028二行目\u2029三行目\x85四行目" in "".join(r["text"] for r in records if r["ticket_id"] == 12301)
    assert text.count("\n") == len(records)


def test_private_issues_and_private_notes_stay_out_of_the_chunks_unless_asked_for(tmp_path: Path) -> None:
    private_notes = [
        j["notes"]
        for path in (FIXTURES / "issues").glob("*.json")
        for j in json.loads(path.read_text(encoding="utf-8"))["issue"].get("journals", [])
        if j.get("private_notes") and j.get("notes")
    ]
    assert len(private_notes) >= 6
    records = jsonl_records(FIXTURES)  # (one private issue skipped: asserted there)
    texts = "\n".join(record["text"] for record in records)
    assert not [note for note in private_notes if note[:20] in texts]
    options = TransformOptions(render=RenderOptions(include_private=True))
    widened = [c.text for t in chunks_of(FIXTURES, options=options) if isinstance(t, ChunkedTicket) for c in t.chunks]
    assert all(note[:20] in "\n".join(widened) for note in private_notes)


def test_sidecars_encoded_together_are_the_sidecars_encoded_one_by_one() -> None:
    too_long = {"ticket_id": 7, "subject": "件名", "cf_長い": "あ" * (MAX_STRING_CHARS + 5), "cf_list": ["a"] * 12}
    fitting = {"ticket_id": 7, "subject": "件名", "project": "p"}
    many = [
        (fitting, {"chunk_index": 0}),
        (fitting, {"chunk_index": 1, f"{RESERVED_PREFIX}x": "y"}),
        (too_long, {"chunk_index": 2}),
        (fitting, {"chunk_index": 3, **{f"cf_{n}": "い" * 2000 for n in range(8)}}),  # over 10 KB
        (fitting, {"chunk_index": 4, "subject": "あ" * (MAX_STRING_CHARS + 1)}),  # a shared key, too long here
        (fitting, {"chunk_index": 5, "subject": "別"}),
    ]
    for schema in ("simple", "typed"):
        together = list(encode_sidecars(many, schema, "#7"))
        assert together == [encode_sidecar({**shared, **own}, schema, "#7") for shared, own in many]
        assert all(len(data) <= MAX_FILE_BYTES for data, _ in together)
        assert [bool(warnings) for _, warnings in together] == [False, False, True, True, True, False]


@pytest.mark.parametrize("relative_opens", [True, False])
def test_a_new_folder_holds_the_same_files_whether_they_are_opened_relative_to_it_or_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, relative_opens: bool
) -> None:
    if not relative_opens:  # a system without dir_fd for os.open: each file by its whole path
        monkeypatch.setattr(os, "supports_dir_fd", set())
    files = [(f"12-{n:03d}.md{suffix}", f"チャンク {n}{suffix}".encode()) for n in range(40) for suffix in ("", ".x")]
    assert write_new_folder(tmp_path / "12", files)
    assert sorted((p.name, p.read_bytes()) for p in (tmp_path / "12").iterdir()) == sorted(files)
    assert [p.name for p in tmp_path.iterdir()] == ["12"]


def test_a_new_ticket_folder_appears_whole_and_an_interrupted_one_is_cleaned_up(tmp_path: Path) -> None:
    target = tmp_path / "out" / "12"
    assert write_new_folder(target, [("12-000.md", b"a"), ("12-001.md", b"b")])
    assert sorted(p.name for p in target.iterdir()) == ["12-000.md", "12-001.md"]
    assert not write_new_folder(target, [("12-000.md", b"other")]) and (target / "12-000.md").read_bytes() == b"a"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["12"]  # no temporary folder left

    out = tmp_path / "chunks"
    interrupted, foreign = out / ".12345.4242.tmp", out / ".12346.4242.tmp"
    for folder, name in ((interrupted, "12345-000.md"), (foreign, "notes.txt")):
        folder.mkdir(parents=True)
        (folder / name).write_text("cut sh")
    write_chunk_folder(chunk_items(iter_source(FIXTURES), BYTES, LIMIT), out)
    assert not interrupted.exists() and (foreign / "notes.txt").exists()
    assert (out / "12345" / "12345-000.md").is_file()
