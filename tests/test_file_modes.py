"""Files that may hold private content are their owner's alone, on a real filesystem: what transform and chunk
write with --include-private (documents, sidecars, the private marks, chunk files, a JSON Lines file) is 0600 and
the folders they create for it 0700, a file an earlier run left included; a run without it writes with the
umask's mode, and leaves the mode of a file it does not rewrite as it is. The reports that quote private
content are 0600 too. (pull's snapshot: tests/test_security_pull.py.)"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchorkit.chunk.pipeline import ChunkOptions, chunk_source
from anchorkit.cli import app
from anchorkit.files import AtomicStream, sync_file, write_atomic, write_new_folder
from anchorkit.publish.aws import AwsSettings
from anchorkit.publish.upload import PublishReport, PublishSettings, open_destination, upload
from anchorkit.render.document import RenderOptions
from anchorkit.render.private_marks import PRIVATE_MARKS_FILE
from anchorkit.render.transform import TransformOptions, transform_snapshot

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
PRIVATE = 0o600


def umask_mode(folder: bool = False) -> int:
    """The mode the umask gives a new file (or folder)."""
    umask = os.umask(0o022)
    os.umask(umask)
    return (0o777 if folder else 0o666) & ~umask


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def modes(folder: Path) -> dict[str, int]:
    """The mode of every file under ``folder``, by its path relative to it."""
    return {str(path.relative_to(folder)): mode(path) for path in sorted(folder.rglob("*")) if path.is_file()}


def folder_modes(folder: Path) -> set[int]:
    return {mode(path) for path in [folder, *folder.rglob("*")] if path.is_dir()}


def test_the_atomic_writers_give_the_mode_asked_for_also_to_a_file_they_leave_unchanged(tmp_path: Path) -> None:
    write_atomic(tmp_path / "new" / "deeper" / "a.json", b"{}", PRIVATE)
    assert mode(tmp_path / "new" / "deeper" / "a.json") == PRIVATE
    assert mode(tmp_path / "new") == mode(tmp_path / "new" / "deeper") == 0o700, "the folders made for it"
    write_atomic(tmp_path / "plain" / "b.json", b"{}")
    assert (mode(tmp_path / "plain" / "b.json"), mode(tmp_path / "plain")) == (umask_mode(), umask_mode(folder=True))

    # A file of an earlier run holding the same bytes is written again (same bytes, the mode), in every writer.
    earlier = tmp_path / "plain" / "b.json"
    assert sync_file(earlier, b"{}", mode=PRIVATE) == "unchanged" and mode(earlier) == PRIVATE
    write_atomic(earlier, b"{}")
    with AtomicStream(earlier, PRIVATE) as stream:
        stream.write(b"{}")
        assert stream.commit() == "unchanged"
    assert mode(earlier) == PRIVATE and earlier.read_bytes() == b"{}"
    assert sync_file(earlier, b"{}", mode=PRIVATE) == "unchanged" and sync_file(earlier, b"{}") == "unchanged"
    assert mode(earlier) == PRIVATE, "a run without a mode leaves a file it does not rewrite as it is"

    # A symbolic link in its place (to a file holding the same bytes) is replaced; what it points to is left alone.
    target = tmp_path / "elsewhere.json"
    target.write_bytes(b"{}")
    target.chmod(0o644)
    (tmp_path / "plain" / "c.json").symlink_to(target)
    assert sync_file(tmp_path / "plain" / "c.json", b"{}", mode=PRIVATE) == "unchanged"
    assert not (tmp_path / "plain" / "c.json").is_symlink() and mode(tmp_path / "plain" / "c.json") == PRIVATE
    assert mode(target) == 0o644

    assert write_new_folder(tmp_path / "made" / "7", [("7-000.md", b"x"), ("7-001.md", b"y")], PRIVATE)
    assert modes(tmp_path / "made") == {"7/7-000.md": PRIVATE, "7/7-001.md": PRIVATE}
    assert folder_modes(tmp_path / "made") == {0o700}


def test_transform_with_include_private_writes_its_owners_files_and_folders_also_over_an_earlier_run(
    tmp_path: Path,
) -> None:
    private = TransformOptions(render=RenderOptions(include_private=True), sidecars=True, layout="by-project")
    public = TransformOptions(sidecars=True, layout="by-project")
    fresh = tmp_path / "fresh" / "out"
    assert not transform_snapshot(FIXTURES, fresh, private).failed
    assert PRIVATE_MARKS_FILE in modes(fresh) and any(name.endswith(".metadata.json") for name in modes(fresh))
    assert set(modes(fresh).values()) == {PRIVATE}
    assert folder_modes(tmp_path / "fresh") == {0o700}, "the folder, its parent and each project's folder"

    out = tmp_path / "out"
    assert not transform_snapshot(FIXTURES, out, public).failed
    assert set(modes(out).values()) == {umask_mode()}
    widened = transform_snapshot(FIXTURES, out, private)
    assert widened.unchanged > 0 and set(modes(out).values()) == {PRIVATE}, "the unchanged documents too"

    # Without it again: the private documents go, those it rewrites (without the private notes) get the umask's
    # mode, and those it leaves as they are keep theirs.
    narrowed = transform_snapshot(FIXTURES, out, public)
    written = set(narrowed.created + narrowed.changed)
    assert narrowed.removed and written
    assert {name: mode for name, mode in modes(out).items() if name in written} == dict.fromkeys(written, umask_mode())
    assert {mode for name, mode in modes(out).items() if name not in written} == {PRIVATE}
    assert not any("社外秘" in path.read_text(encoding="utf-8") for path in out.rglob("*.md"))


def test_chunk_with_include_private_writes_its_owners_chunk_files_and_json_lines(tmp_path: Path) -> None:
    options = ChunkOptions(TransformOptions(render=RenderOptions(include_private=True), sidecars=True))
    assert not chunk_source(FIXTURES, out=tmp_path / "chunks" / "out", options=options).failed
    assert set(modes(tmp_path / "chunks").values()) == {PRIVATE} and folder_modes(tmp_path / "chunks") == {0o700}

    lines = tmp_path / "lines" / "chunks.jsonl"
    assert not chunk_source(FIXTURES, jsonl=lines, options=options).failed
    assert (mode(lines), mode(lines.parent)) == (PRIVATE, 0o700)
    assert not chunk_source(FIXTURES, jsonl=lines).failed
    assert mode(lines) == umask_mode(), "rewritten without the private tickets: the umask's"


def upload_to_folder(source: Path, dest: Path) -> PublishReport:
    """`anchorkit upload SOURCE DEST` to a local folder."""
    settings = PublishSettings()
    report = upload(source, open_destination(source, str(dest), settings, AwsSettings(), None), settings)
    assert report.ok and report.results, (report.failures, report.results)
    return report


def test_upload_to_a_local_folder_keeps_private_documents_and_chunks_their_owners_alone(tmp_path: Path) -> None:
    private = RenderOptions(include_private=True)
    documents, chunks, public = tmp_path / "documents", tmp_path / "chunks", tmp_path / "public"
    assert not transform_snapshot(FIXTURES, documents, TransformOptions(render=private, layout="by-project")).failed
    assert not chunk_source(FIXTURES, out=chunks, options=ChunkOptions(TransformOptions(render=private))).failed
    assert not transform_snapshot(FIXTURES, public, TransformOptions()).failed

    # Documents transform wrote with --include-private (its private marks say so), and chunks chunk wrote with it
    # (no marks: their files are their owner's alone).
    for source, dest in ((documents, tmp_path / "kb" / "documents"), (chunks, tmp_path / "kb" / "chunks")):
        upload_to_folder(source, dest)
        assert any("社外秘" in path.read_text(encoding="utf-8") for path in dest.rglob("*.md")), "private content"
        assert set(modes(dest).values()) == {PRIVATE}, dest
        assert folder_modes(tmp_path / "kb") == {0o700}, "the folders made for them, and their parent"

    # The marks alone say so when the files lost their mode (copied by a tool that does not keep it).
    for path in documents.rglob("*.md"):
        path.chmod(0o644)
    upload_to_folder(documents, tmp_path / "copied")
    assert set(modes(tmp_path / "copied").values()) == {PRIVATE}

    upload_to_folder(public, tmp_path / "public-kb")
    assert set(modes(tmp_path / "public-kb").values()) == {umask_mode()}


@pytest.fixture
def usual_umask() -> Iterator[None]:
    """The usual umask (022), whatever the machine's: the umask's mode, 0644, is then not 0600."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


@pytest.mark.usefixtures("usual_umask", "clean_cli_environment")
def test_reports_of_private_content_are_their_owners_alone_and_others_the_umasks_mode(tmp_path: Path) -> None:
    """`stats --html` quotes what it measured: 0600 when that may be private (a snapshot rendered with
    include_private, a folder whose marks say so, chunks only their owner may read), the umask's mode otherwise."""
    private, public = tmp_path / "private", tmp_path / "public"
    with_private = TransformOptions(render=RenderOptions(include_private=True))
    assert not transform_snapshot(FIXTURES, private, with_private).failed
    assert not transform_snapshot(FIXTURES, public, TransformOptions()).failed
    chunks = tmp_path / "chunks.jsonl"
    assert not chunk_source(FIXTURES, jsonl=chunks, options=ChunkOptions(with_private)).failed
    quick = ["--tokenizer", "approx", "--lengths", "none", "-q"]
    documents = [*quick, "--chunking", "fixed"]
    runs = {
        "snapshot-private.html": ([str(FIXTURES), *documents], {"ANCHORKIT_INCLUDE_PRIVATE": "true"}, PRIVATE),
        "output-private.html": ([str(private), *documents], {}, PRIVATE),
        "chunks-private.html": ([str(chunks), *quick], {}, PRIVATE),
        "snapshot.html": ([str(FIXTURES), *documents], {}, 0o644),
        "output.html": ([str(public), *documents], {}, 0o644),
    }
    for page, (arguments, env, expected) in runs.items():
        result = CliRunner().invoke(app, ["stats", *arguments, "--html", str(tmp_path / page)], env=env)
        assert result.exit_code == 0, result.stderr
        assert mode(tmp_path / page) == expected, page


@pytest.mark.usefixtures("usual_umask")
def test_verify_eval_and_inject_write_what_they_quote_of_a_retrieval_for_its_owner_alone(tmp_path: Path) -> None:
    """Nothing in a retrieval says whether its chunks are private: the files that quote them are 0600 always."""
    examples = FIXTURES / "eval"
    runs = {
        "verify.html": ["verify", "-a", str(examples / "retrieve-and-generate.json"), "--html"],
        "eval.html": ["eval", str(examples / "cases.jsonl"), "--html"],
        "anchored.json": ["inject", str(examples / "retrieval-bedrock.json"), "--out"],
    }
    for name, arguments in runs.items():
        result = CliRunner().invoke(app, [*arguments, str(tmp_path / name)])
        assert result.exit_code == 0, result.stderr
        assert mode(tmp_path / name) == PRIVATE, name
