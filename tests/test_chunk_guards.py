"""What `anchorkit chunk` refuses before it writes anything, and what it never chunks: a SOURCE that holds no
ticket, a label or a chunk length that no ticket could be chunked with, and the private content of a
transform folder made with --include-private (unless it is asked for again)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from anchorkit.anchors import MAX_LABEL_CHARS, find_anchors, find_titles, one_line
from anchorkit.chunk.core import MIN_CONTENT_TOKENS
from anchorkit.chunk.pipeline import MIN_CHUNK_TOKENS
from anchorkit.render.private_marks import PRIVATE_MARKS_FILE
from anchorkit.tokens import choose_tokenizer
from tests.test_chunk_cli import FIXTURES, issues, named, records_of, run
from tests.test_transform import run as run_command

pytestmark = pytest.mark.usefixtures("clean_cli_environment")


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    """A copy of the fixtures, for a test to change."""
    return Path(shutil.copytree(FIXTURES, tmp_path / "snapshot", ignore=shutil.ignore_patterns("eval")))


def contents(path: Path) -> dict[str, bytes]:
    """A file's bytes, or every file's under a folder by its path in it."""
    if path.is_file():
        return {"": path.read_bytes()}
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def transform(snapshot: Path, out: str, *options: str) -> None:
    code, _, stderr = run_command("transform", str(snapshot), "--out", out, *options)
    assert code == 0, stderr


# ---------------------------------------------------------------------------------------------------------------
# A SOURCE without tickets


@pytest.mark.parametrize("target", ["--out", "--jsonl"])
@pytest.mark.parametrize("wrong", ["issues", "empty", "missing"])
def test_a_source_that_is_neither_a_snapshot_nor_documents_is_refused_and_the_chunks_stay(
    snapshot: Path, tmp_path: Path, target: str, wrong: str
) -> None:
    chunks = tmp_path / ("chunks" if target == "--out" else "chunks.jsonl")
    assert run(str(snapshot), target, str(chunks))[0] == 0
    before = contents(chunks)
    assert len(before) > 100 or target == "--jsonl"
    source = {"issues": snapshot / "issues", "empty": tmp_path / "empty", "missing": tmp_path / "missing"}[wrong]
    if wrong == "empty":
        source.mkdir()
    code, stdout, stderr = run(str(source), target, str(chunks), "--json")
    assert code == 2 and json.loads(stdout)["exit_code"] == 2
    said = "no such folder" if wrong == "missing" else "neither a snapshot nor a folder of documents"
    assert f"{source}: {said}" in stderr
    assert contents(chunks) == before


@pytest.mark.parametrize("wrong", ["empty", "documents"])
def test_transform_refuses_a_folder_that_is_no_snapshot_and_keeps_its_documents(
    snapshot: Path, tmp_path: Path, wrong: str
) -> None:
    transform(snapshot, "out", "--sidecars")
    before = contents(Path("out"))
    source = tmp_path / "empty" if wrong == "empty" else Path("out")  # transform's own output is no snapshot
    source.mkdir(exist_ok=True)
    code, _, stderr = run_command("transform", str(source), "--out", "out", "--sidecars")
    assert code == 2 and f"error: {source}: not a snapshot (no issues/ folder)" in stderr
    # The folder given is named (not <it>/issues), and a transform output is told apart.
    assert ("it holds .md documents: a transform output, not the snapshot it was made from" in stderr) == (
        wrong == "documents"
    )
    assert contents(Path("out")) == before


# ---------------------------------------------------------------------------------------------------------------
# A label or a chunk length no ticket could be chunked with


def test_a_label_longer_than_anchors_hold_is_refused_and_the_longest_one_makes_anchors_anchorkit_finds(
    snapshot: Path,
) -> None:
    retrieval = FIXTURES / "eval" / "retrieval-chunks.json"
    commands = (
        ["transform", str(snapshot), "--out", "out"],
        ["chunk", str(snapshot), "--jsonl", "chunks.jsonl"],
        ["inject", str(retrieval), "--out", "anchored.json"],
    )
    for command in commands:
        code, _, stderr = run_command(*command, "--label", "ラ" * 41)
        assert code == 2 and "--label may be at most 40 characters, not 41" in stderr, command
    assert [path.name for path in Path().iterdir()] == ["snapshot"]

    for command in commands:
        assert run_command(*command, "--label", "ラ" * 40)[0] == 0, command
    for document in Path("out").glob("*.md"):
        text = document.read_text(encoding="utf-8")
        ticket_id = int(document.stem)
        assert {anchor.ticket_id for anchor in find_anchors(text)} == {ticket_id}
        assert find_titles(text.split("\n", 1)[0])[0].ticket_id == ticket_id
    records = records_of(Path("chunks.jsonl"))
    assert records and all(named(record["text"]) == {record["ticket_id"]} for record in records)


def test_help_states_the_limits_the_code_holds() -> None:
    """--help writes the numbers out (it must not load the chunker): they are the ones the checks use."""
    for command in ("chunk", "sync"):
        shown = " ".join(run_command(command, "--help")[1].replace("│", " ").split())
        assert f"up to {MAX_LABEL_CHARS} characters" in shown
        assert f"at least {MIN_CHUNK_TOKENS}, and room for the shortest anchor" in shown
        assert f"--chunk-overlap and {MIN_CONTENT_TOKENS} tokens of content" in shown
        assert "at most half of --chunk-tokens" in shown


def least_chunk_tokens(source: Path, options: list[str]) -> int:
    """The --chunk-tokens the usage error asks for at 32 (the least the chunker takes with ``options``)."""
    code, _, stderr = run(str(source), "--jsonl", "refused.jsonl", "--chunk-tokens", "32", *options)
    found = re.search(r"give --chunk-tokens (\d+) or more", stderr)
    assert code == 2 and found is not None, stderr
    return int(found[1])


@pytest.mark.parametrize(
    "options",
    [
        ["--chunk-overlap", "16"],  # the QA's case: 32/16 passed the half check, then every ticket failed
        ["--chunk-overlap", "16", "--tokenizer", "approx"],
        ["--label", "チケット番号" * 6],  # no overlap: a long label alone
    ],
)
def test_the_least_chunk_length_accepted_is_the_one_that_chunks_the_shortest_anchors_ticket(
    tmp_path: Path, options: list[str]
) -> None:
    snap = tmp_path / "snap"
    (snap / "issues").mkdir(parents=True)
    issue = {"id": 1, "subject": "", "description": "\n\n".join(f"段落{n}の本文です。" * 3 for n in range(30))}
    (snap / "issues" / "1.json").write_text(json.dumps({"issue": issue}, ensure_ascii=False), encoding="utf-8")
    least = least_chunk_tokens(snap, options)
    assert least > 32
    code, _, stderr = run(str(snap), "--jsonl", "chunks.jsonl", "--chunk-tokens", str(least - 1), *options)
    assert code == 2 and f"give --chunk-tokens {least} or more" in stderr
    assert not Path("chunks.jsonl").exists()

    code, stdout, stderr = run(str(snap), "--jsonl", "chunks.jsonl", "--chunk-tokens", str(least), *options, "--json")
    assert code == 0 and json.loads(stdout)["failed"] == [], stderr
    records = records_of(Path("chunks.jsonl"))
    tokenizer = choose_tokenizer("approx" if "approx" in options else "cl100k_base")
    assert len(records) > 3 and max(tokenizer.count(record["text"]) for record in records) <= least


# ---------------------------------------------------------------------------------------------------------------
# A transform folder with private content


def private_content(snapshot: Path) -> tuple[set[int], list[str]]:
    """The tickets whose documents hold private content with --include-private, and bits of their private texts."""
    everything = issues(snapshot)
    noted = {
        ticket_id: [j["notes"][:20] for j in issue.get("journals", []) if j.get("private_notes") and j.get("notes")]
        for ticket_id, issue in everything.items()
    }
    private_issues = {ticket_id for ticket_id, issue in everything.items() if issue.get("is_private")}
    texts = [text for ticket_id, notes in noted.items() for text in notes]
    texts += [everything[ticket_id]["subject"] for ticket_id in private_issues]
    return private_issues | {ticket_id for ticket_id, notes in noted.items() if notes}, texts


def chunked(source: str, *options: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    code, stdout, stderr = run(source, "--jsonl", "chunks.jsonl", *options, "--json")
    assert code == 0, stderr
    return json.loads(stdout), records_of(Path("chunks.jsonl"))


@pytest.mark.parametrize("sidecars", [True, False])
def test_a_transform_folder_with_private_content_is_chunked_without_it_unless_asked_for_again(
    snapshot: Path, sidecars: bool
) -> None:
    holding, texts = private_content(snapshot)
    private_issues = {ticket_id for ticket_id, issue in issues(snapshot).items() if issue.get("is_private")}
    assert len(holding - private_issues) > 1 and private_issues and texts
    transform(snapshot, "out", "--include-private", *(["--sidecars"] if sidecars else []))
    assert json.loads(Path("out", PRIVATE_MARKS_FILE).read_text())["private_tickets"] == sorted(holding)

    report, records = chunked("out")
    assert not [piece for piece in texts if piece in "\n".join(record["text"] for record in records)]
    # A public issue with private notes is chunked without them: its chunks are those of the snapshot's ticket
    # rendered without --include-private, links to notes included.
    _, expected = chunked(str(snapshot))
    assert [(r["id"], r["text"]) for r in records] == [(r["id"], r["text"]) for r in expected]
    assert not sidecars or records == expected  # (without sidecars the chunks only have the documents' metadata)
    assert {record["ticket_id"] for record in records} == set(issues(snapshot)) - private_issues
    assert report["private_skipped"] == len(private_issues) and report["failed"] == []

    report, widened = chunked("out", "--include-private")
    assert all(piece in "\n".join(record["text"] for record in widened) for piece in texts)
    assert {record["ticket_id"] for record in widened} == set(issues(snapshot)) and report["private_skipped"] == 0
    report, again = chunked("out")  # the chunks of the run that was asked for it go
    assert report["private_skipped"] == len(private_issues) and again == records


def test_a_document_that_is_not_the_one_its_marks_were_written_for_is_left_out_whole(snapshot: Path) -> None:
    holding, _ = private_content(snapshot)
    transform(snapshot, "out", "--include-private")
    noted = min(ticket_id for ticket_id in holding if not issues(snapshot)[ticket_id].get("is_private"))
    document = Path("out", f"{noted}.md")
    heading = re.search(r"^### .*\n", document.read_text(encoding="utf-8"), re.MULTILINE)
    assert heading is not None  # one journal less than the marks say: which are private is no longer known
    document.write_text(document.read_text(encoding="utf-8").replace(heading[0], "", 1), encoding="utf-8")
    report, records = chunked("out")
    assert noted not in {record["ticket_id"] for record in records} and report["failed"] == []
    marks = Path("out", PRIVATE_MARKS_FILE)
    details = json.loads(marks.read_text())
    details["private_journals"][str(noted)]["private"] = [99]  # past the journals it counts: not trusted
    marks.write_text(json.dumps(details), encoding="utf-8")
    code, _, stderr = run("out", "--jsonl", "chunks.jsonl")
    assert code == 2 and f"{marks}: not a list of the tickets" in stderr


def test_the_sidecar_says_private_even_without_the_folders_marks(snapshot: Path) -> None:
    holding, _ = private_content(snapshot)
    transform(snapshot, "out", "--include-private", "--sidecars")
    for ticket_id in issues(snapshot):
        sidecar = json.loads(Path("out", f"{ticket_id}.md.metadata.json").read_text(encoding="utf-8"))
        assert sidecar["metadataAttributes"].get("private") is (True if ticket_id in holding else None)
    Path("out", PRIVATE_MARKS_FILE).unlink()  # a copy of the documents and their sidecars alone
    report, records = chunked("out")
    assert report["private_skipped"] == len(holding) and not {r["ticket_id"] for r in records} & holding


def test_marks_of_an_unfinished_run_keep_every_document_out_and_unreadable_marks_are_refused(snapshot: Path) -> None:
    transform(snapshot, "out", "--include-private")
    marks = Path("out", PRIVATE_MARKS_FILE)
    marks.write_text('{"private_tickets": "all"}', encoding="utf-8")  # as a run cut short leaves them
    report, records = chunked("out")
    assert records == [] and report["private_skipped"] == len(issues(snapshot))
    marks.write_text('{"private_tickets": [12333, "x"]}', encoding="utf-8")
    code, _, stderr = run("out", "--jsonl", "chunks.jsonl")
    assert code == 2 and f"{marks}: not a list of the tickets" in stderr


def test_transform_keeps_its_marks_true_run_after_run(snapshot: Path) -> None:
    holding, _ = private_content(snapshot)
    transform(snapshot, "out", "--include-private")
    marks = Path("out", PRIVATE_MARKS_FILE)
    kept = min(holding)
    (snapshot / "issues" / f"{kept}.json").write_text("{", encoding="utf-8")  # fails: its document stays, marked
    assert run_command("transform", str(snapshot), "--out", "out")[0] == 1
    assert Path("out", f"{kept}.md").exists()
    assert json.loads(marks.read_text())["private_tickets"] == [kept]
    shutil.copy(FIXTURES / "issues" / f"{kept}.json", snapshot / "issues")
    transform(snapshot, "out")  # nothing private is left: no marks
    assert not marks.exists()
    assert run_command("upload", "out", "published")[0] == 0
    assert not Path("published", PRIVATE_MARKS_FILE).exists()


# ---------------------------------------------------------------------------------------------------------------
# Metadata of documents without sidecars


def test_chunks_of_documents_without_sidecars_carry_the_subject_of_their_title_line(snapshot: Path) -> None:
    tricky = "Outlook *起動* <b>不可</b> [手順](x) \\ #12: 再発 _a_ `b` #"
    path = snapshot / "issues" / "12345.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    document["issue"]["subject"] = tricky
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    transform(snapshot, "out")
    _, from_documents = chunked("out")
    subjects = {record["ticket_id"]: record["metadata"]["subject"] for record in from_documents}
    assert subjects[12345] == one_line(tricky)
    _, from_snapshot = chunked(str(snapshot))
    assert subjects == {record["ticket_id"]: record["metadata"]["subject"] for record in from_snapshot}
