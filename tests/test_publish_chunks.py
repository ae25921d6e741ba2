"""Publishing a chunk folder (``<id>/<id>-NNN.md`` + sidecars): which keys are a ticket's, what a shrunk
ticket's chunks and a change of layout delete, and the delete guard counting chunks. No server needed;
tests/test_sync_chunks.py runs the same against the real Redmine and S3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.folders import tree
from typer.testing import CliRunner

from anchorkit.chunk.core import chunk_document
from anchorkit.chunk.writers import chunk_relpath
from anchorkit.cli import app
from anchorkit.publish import keys
from anchorkit.publish import upload as publishing
from anchorkit.publish.upload import Checksums, DeleteLimit, LocalObject, RemoteObject
from anchorkit.render.sidecar import SIDECAR_SUFFIX
from tests.test_chunk import BYTES

runner = CliRunner()


def remote(key: str, data: bytes = b"x") -> RemoteObject:
    checksums = Checksums.of(data)
    return RemoteObject(key, checksums.size, checksums.md5)


def local(key: str, data: bytes = b"x") -> LocalObject:
    return LocalObject(key, Checksums.of(data), data)


def chunk_keys(ticket_id: int, count: int) -> list[str]:
    names = [f"{ticket_id}/{ticket_id}-{index:03d}.md" for index in range(count)]
    return sorted(names + [name + SIDECAR_SUFFIX for name in names])


def write_chunk_ticket(folder: Path, ticket_id: int, count: int, body: str = "本文") -> None:
    """A ticket's chunk files as `anchorkit chunk --out` names them (content as the writer would begin it)."""
    (folder / str(ticket_id)).mkdir(parents=True, exist_ok=True)
    for index in range(count):
        name = f"{ticket_id}/{ticket_id}-{index:03d}.md"
        (folder / name).write_text(f"> チケット #{ticket_id}: 件名\n\n{body} {index}\n", encoding="utf-8")
        sidecar = {"metadataAttributes": {"ticket_id": ticket_id, "chunk_index": index}}
        (folder / (name + SIDECAR_SUFFIX)).write_text(json.dumps(sidecar), encoding="utf-8")


# -- which keys are a ticket's ---------------------------------------------------------------------


def test_the_chunk_writers_names_are_chunk_keys_of_their_ticket() -> None:
    document = "# チケット #4321: 件名\n\n" + "本文の段落。\n\n" * 200
    chunks = chunk_document(document, {"ticket_id": 4321}, BYTES, 300).chunks
    assert len(chunks) > 3
    for chunk in chunks:
        for key in (chunk_relpath(chunk), chunk_relpath(chunk) + SIDECAR_SUFFIX, "sub/" + chunk_relpath(chunk)):
            assert keys.ticket_key(key) is not None
            assert (keys.ticket_of_key(key), keys.ticket_key(key).layout) == (4321, keys.CHUNKS)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("12.md", (12, keys.DOCUMENTS, "")),
        ("ops/12.md.metadata.json", (12, keys.DOCUMENTS, "ops")),
        ("12/12-000.md", (12, keys.CHUNKS, "")),
        ("12/12-1234.md.metadata.json", (12, keys.CHUNKS, "")),
        ("kb/12/12-007.md", (12, keys.CHUNKS, "kb")),
        ("12/13-000.md", None),  # the folder and the file name different tickets: nobody's
        ("12/12-00.md", None),
        ("12/notes.md", None),
        ("12/12-000.txt", None),
        ("readme.md", None),
        ("１２.md", None),  # full-width digits are not an id
        ("1234567890123.md", None),
        ("12.md.bak", None),
    ],
)
def test_ticket_keys_are_documents_chunks_and_sidecars_and_nothing_else(
    key: str, expected: tuple[int, str, str] | None
) -> None:
    found = keys.ticket_key(key)
    assert (None if found is None else (found.ticket_id, found.layout, found.folder)) == expected


# -- the plan --------------------------------------------------------------------------------------


def test_a_shrunk_tickets_chunks_are_deleted_without_delete_and_foreign_keys_are_kept() -> None:
    before = chunk_keys(7, 5) + chunk_keys(8, 2) + ["7/notes.md", "7/7-002.md.bak", "readme.md", "9/9-000.md"]
    after = chunk_keys(7, 3) + chunk_keys(8, 2)
    plan = publishing.diff([local(k) for k in after], [remote(k) for k in before], {}, delete=False)
    assert sorted(o.key for o in plan.superseded) == sorted(set(chunk_keys(7, 5)) - set(chunk_keys(7, 3)))
    assert sorted(o.key for o in plan.deletes) == sorted(o.key for o in plan.superseded)
    # Not ours by name, or a ticket the local side does not publish (gone: only with --delete).
    assert sorted(o.key for o in plan.stale) == ["7/7-002.md.bak", "7/notes.md", "9/9-000.md", "readme.md"]
    assert len(plan.skips) == len(after)


def test_a_change_of_layout_replaces_the_tickets_objects_in_the_same_folder_only() -> None:
    documents = ["5.md", "5.md.metadata.json", "6.md", "ops/5.md"]
    to_chunks = publishing.diff([local(k) for k in chunk_keys(5, 2)], [remote(k) for k in documents], {}, delete=False)
    assert sorted(o.key for o in to_chunks.superseded) == ["5.md", "5.md.metadata.json"]
    assert sorted(o.key for o in to_chunks.stale) == ["6.md", "ops/5.md"]
    to_documents = publishing.diff([local("5.md")], [remote(k) for k in chunk_keys(5, 2)], {}, delete=False)
    assert sorted(o.key for o in to_documents.superseded) == chunk_keys(5, 2)
    # Between the two document layouts nothing is decided by name (as before chunks existed).
    flat = publishing.diff([local("5.md")], [remote("ops/5.md"), remote("5.md.metadata.json")], {}, delete=False)
    assert plan_keys(flat) == ([], ["5.md.metadata.json", "ops/5.md"])


def plan_keys(plan: publishing.Plan) -> tuple[list[str], list[str]]:
    return sorted(o.key for o in plan.superseded), sorted(o.key for o in plan.stale)


def test_a_withdrawn_tickets_chunks_all_go_without_delete_and_outside_the_guard() -> None:
    plan = publishing.diff(
        [local(k) for k in chunk_keys(1, 1)],
        [remote(k) for k in chunk_keys(1, 1) + chunk_keys(2, 4) + ["2/keep.md"]],
        {},
        delete=False,
        withdrawn_ids={2},
    )
    assert sorted(o.key for o in plan.withdrawn) == chunk_keys(2, 4)
    assert [o.key for o in plan.stale] == ["2/keep.md"]
    assert plan.guarded == [] and publishing.delete_refusal(plan, DeleteLimit(count=0), force=False) is None


def test_a_withdrawn_tickets_keys_go_in_every_folder_and_a_refusal_names_the_ticket_it_leaves_published() -> None:
    # The ordinary sync does not know where it published a ticket (by-project moves it with its project):
    # every key shaped like the ticket's goes; other keys that merely hold its number stay.
    withdrawn = ["2.md", "2.md.metadata.json", "ops/2.md", "old/ops/2/2-000.md", *chunk_keys(2, 2)]
    foreign = ["2/notes.md", "ops/12.md", "2/3-000.md"]
    plan = publishing.diff(
        [local(k) for k in chunk_keys(1, 1)],
        [remote(k) for k in chunk_keys(1, 10) + withdrawn + foreign],
        {},
        delete=False,
        withdrawn_ids={2},
    )
    assert sorted(o.key for o in plan.withdrawn) == sorted(withdrawn)
    refusal = publishing.delete_refusal(plan, DeleteLimit(percent=10), force=False)
    assert refusal is not None and refusal.startswith("refusing to delete 18 of 31 objects (of 1 ticket")
    assert refusal.endswith(
        "pass --force; until then the 8 objects of #2, withdrawn from publication (private now, or moved out of the "
        "projects), stay published"
    )


def test_the_guard_counts_chunks_and_says_how_many_tickets_they_are() -> None:
    before = chunk_keys(1, 10) + chunk_keys(2, 10)
    plan = publishing.diff([local(k) for k in chunk_keys(1, 2)], [remote(k) for k in before], {}, delete=True)
    assert len(plan.guarded) == 16 + 20 and plan.remote_count == 40
    refusal = publishing.delete_refusal(plan, DeleteLimit(percent=10), force=False)
    assert refusal is not None
    assert refusal.startswith("refusing to delete 36 of 40 objects (of 2 tickets, 36 of them chunks")
    assert "raise --max-delete or pass --force" in refusal
    assert publishing.delete_refusal(plan, DeleteLimit(count=36), force=False) is None
    assert publishing.delete_refusal(plan, DeleteLimit(count=35), force=True) is None


# -- upload of a chunk folder (local destination; S3: tests/test_sync_chunks.py) --------------------


def test_upload_publishes_a_chunk_folder_by_content_and_removes_what_a_shrunk_ticket_lost(tmp_path: Path) -> None:
    out, dest = tmp_path / "chunks", tmp_path / "published"
    write_chunk_ticket(out, 31, 6)
    write_chunk_ticket(out, 32, 2)
    first = runner.invoke(app, ["upload", str(out), str(dest), "--json"])
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["uploaded"] == 16 and tree(dest) == tree(out)
    again = json.loads(runner.invoke(app, ["upload", str(out), str(dest), "--json"]).stdout)
    assert (again["uploaded"], again["skipped"], again["deleted"]) == (0, 16, 0)

    for index in range(3, 6):  # ticket 31 shrank from 6 chunks to 3
        (out / f"31/31-{index:03d}.md").unlink()
        (out / f"31/31-{index:03d}.md{SIDECAR_SUFFIX}").unlink()
    (dest / "31" / "mine.txt").write_text("an operator's file", encoding="utf-8")
    refused = runner.invoke(app, ["upload", str(out), str(dest), "--json"])  # 6 of 16 > 10%
    assert refused.exit_code == 1
    assert "refusing to delete 6 of 17 objects (of 1 ticket, 6 of them chunks" in json.loads(refused.stdout)["refused"]
    assert len(tree(dest)) == 17
    shrunk = runner.invoke(app, ["upload", str(out), str(dest), "--max-delete", "6", "--json"])
    assert shrunk.exit_code == 0, shrunk.output
    report = json.loads(shrunk.stdout)
    assert (report["deleted"], report["planned"]["superseded"], report["planned"]["stale_kept"]) == (6, 6, 1)
    assert tree(dest) == {**tree(out), "31/mine.txt": b"an operator's file"}


def write_document(folder: Path, ticket_id: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{ticket_id}.md").write_text(f"# チケット #{ticket_id}: 件名\n\n本文\n", encoding="utf-8")


def test_a_folder_holding_documents_and_chunks_is_refused_before_the_destination_is_touched(tmp_path: Path) -> None:
    mixed, dest = tmp_path / "mixed", tmp_path / "published"
    write_chunk_ticket(mixed, 31, 2)
    write_document(mixed, 31)  # (transform's output copied into a chunk folder: every ticket indexed twice)
    dest.mkdir()
    result = runner.invoke(app, ["upload", str(mixed), str(dest)])
    assert result.exit_code == 2 and result.stdout == ""
    assert f"{mixed} holds both documents (e.g. 31.md) and chunks (e.g. 31/31-000.md)" in result.stderr
    assert tree(dest) == {}


def test_a_refusal_to_replace_the_other_layout_says_that_is_why_so_much_goes(tmp_path: Path) -> None:
    documents, chunks, dest = tmp_path / "documents", tmp_path / "chunks", tmp_path / "published"
    for ticket_id in (31, 32):
        write_document(documents, ticket_id)
        write_chunk_ticket(chunks, ticket_id, 2)
    assert runner.invoke(app, ["upload", str(documents), str(dest)]).exit_code == 0
    refused = runner.invoke(app, ["upload", str(chunks), str(dest), "--json"])
    assert refused.exit_code == 1
    message = json.loads(refused.stdout)["refused"]
    assert message.startswith("refusing to delete 2 of 2 objects")
    assert "this upload publishes chunks where the destination has documents, which they replace" in message
    shrinking = runner.invoke(app, ["upload", str(documents), str(dest), "--json"])  # back: nothing to replace
    assert shrinking.exit_code == 0 and set(tree(dest)) == {"31.md", "32.md"}
