"""`anchorkit stats` on chunks as they are: `anchorkit chunk`'s JSON Lines and folder, and the Bedrock
Lambda's output batches and audit lines (real S3), judged by their text, no chunker emulated."""

from __future__ import annotations

import json
import logging
import math
from itertools import pairwise
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from support.bedrock import NATIVE_CHUNKERS, documented_batch, event, in_batches, native_chunks, put_file, rendered
from support.s3_server import S3Server
from typer.testing import CliRunner

from anchorkit import tokens
from anchorkit.anchors import anchor_line, identified_ticket_ids
from anchorkit.audit.chunk_layouts import CHUNK_KINDS, chunk_kind
from anchorkit.audit.schema import REPORT_SCHEMA
from anchorkit.bedrock.audit import read_audit_lines
from anchorkit.bedrock.runner import S3Store, Settings, run
from anchorkit.chunk import sources, writers
from anchorkit.cli import app
from anchorkit.render.transform import PRIVATE

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
N = 300
runner = CliRunner()


def stats(*args: str) -> tuple[int, dict[str, Any]]:
    result = runner.invoke(app, ["stats", *args, "--json"])
    report = json.loads(result.stdout)
    jsonschema.validate(report, REPORT_SCHEMA)
    return result.exit_code, report


@pytest.fixture(scope="module")
def cl100k() -> tokens.TiktokenTokenizer:
    return tokens.load_cl100k_base()


@pytest.fixture(scope="module")
def chunked(cl100k: tokens.TiktokenTokenizer) -> list[Any]:
    """The fixtures' tickets, chunked by anchorkit's chunker at N tokens."""
    results = list(sources.chunk_items(sources.iter_source(FIXTURES), cl100k, N))
    assert all(isinstance(result, sources.ChunkedTicket) or result == PRIVATE for result in results), results
    return [result for result in results if isinstance(result, sources.ChunkedTicket)]


@pytest.fixture(scope="module")
def jsonl(chunked: list[Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("jsonl") / "chunks.jsonl"
    writers.write_jsonl_file(chunked, path)
    return path


def fewest(chunked: list[Any], cl100k: tokens.TiktokenTokenizer) -> int:
    """The packing bound, computed from the chunker's own chunk objects (not from the audited text)."""
    total = 0
    for ticket in chunked:
        header = cl100k.count(ticket.chunks[1].header) if len(ticket.chunks) > 1 else 0
        content = sum(cl100k.count(chunk.text) for chunk in ticket.chunks) - header * (len(ticket.chunks) - 1)
        total += max(1, math.ceil((content - header) / (N - header)))
    return total


def test_anchorkits_own_chunks_as_json_lines_all_name_their_ticket_within_n_tokens(
    jsonl: Path, chunked: list[Any], cl100k: tokens.TiktokenTokenizer
) -> None:
    code, report = stats(str(jsonl), "--chunk-tokens", str(N))
    assert code == 0 and report["ok"]
    assert (report["version"], report["layout"], report["source"]["kind"]) == (5, "chunks", "chunks-jsonl")
    measured = report["chunks"]
    count = sum(len(ticket.chunks) for ticket in chunked)
    assert (measured["chunks"], measured["tickets"], measured["chunk_tokens"]) == (count, len(chunked), N)
    assert (measured["identified"], measured["coverage_percent"]) == (count, 100.0)
    assert [measured[name] for name in ("unknown_ticket", "no_own_anchor", "other_ticket_anchor")] == [0, 0, 0]
    assert measured["over_chunk_tokens"] == 0 and 0 < measured["longest_chunk_tokens"] <= N
    assert measured["tokens"] == sum(cl100k.count(chunk.text) for ticket in chunked for chunk in ticket.chunks)
    assert measured["fewest_chunks"] == fewest(chunked, cl100k)
    assert measured["ratio_to_fewest"] == round(count / measured["fewest_chunks"], 3) <= 1.25
    assert measured["problems"] == []


def test_a_chunk_folder_gives_the_same_figures_as_the_json_lines(
    jsonl: Path, chunked: list[Any], tmp_path: Path
) -> None:
    folder = tmp_path / "chunks"
    writers.write_chunk_folder(chunked, folder)
    assert chunk_kind(folder) == "chunk-folder"
    code, report = stats(str(folder), "--chunk-tokens", str(N))
    _, from_jsonl = stats(str(jsonl), "--chunk-tokens", str(N))
    assert code == 0 and (report["layout"], report["source"]["kind"]) == ("chunks", "chunk-folder")
    assert report["chunks"] == from_jsonl["chunks"]


def test_broken_chunks_are_counted_and_named(jsonl: Path, tmp_path: Path) -> None:
    records = [json.loads(line) for line in jsonl.read_text(encoding="utf-8").splitlines()]
    later = [index for index, record in enumerate(records) if not record["id"].endswith("-000")]
    foreign = min(later, key=lambda index: len(records[index]["text"]))  # room for another anchor within N
    headless, long = [index for index in later if index != foreign][:2]
    own, other = (
        records[headless]["ticket_id"],
        next(r["ticket_id"] for r in records if r["ticket_id"] != records[foreign]["ticket_id"]),
    )
    header = records[headless]["text"].split("\n\n", 1)[0]
    assert identified_ticket_ids(header) == {own}
    records[headless]["text"] = records[headless]["text"].split("\n\n", 1)[1]  # its header removed
    records[foreign]["text"] += f"\n\n{anchor_line(other, 'よそのチケット')}\n"  # another ticket's anchor
    records[long]["text"] += "\n\n" + "長い行です。" * 200  # over N tokens
    broken = tmp_path / "broken.jsonl"
    broken.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")

    code, report = stats(str(broken), "--chunk-tokens", str(N))
    measured = report["chunks"]
    assert code == 0  # no gate set: the figures say it
    assert (measured["no_own_anchor"], measured["other_ticket_anchor"], measured["over_chunk_tokens"]) == (1, 1, 1)
    assert measured["identified"] == len(records) - 2  # over-long but named: still covered
    assert {item["where"].split(" ")[0]: item["problems"] for item in measured["problems"]} == {
        f"broken.jsonl:{headless + 1}": ["no_own_anchor"],
        f"broken.jsonl:{foreign + 1}": ["other_ticket_anchor"],
        f"broken.jsonl:{long + 1}": ["over_chunk_tokens"],
    }
    code, report = stats(str(broken), "--chunk-tokens", str(N), "--fail-under-coverage", "100")
    assert code == 1 and report["gates"]["failures"] == [
        f"chunks as they are: coverage {measured['coverage_percent']}% is under 100.0%"
    ]


def test_a_line_that_is_not_a_chunk_is_an_error_naming_it_and_the_rest_is_measured(jsonl: Path, tmp_path: Path) -> None:
    lines = jsonl.read_text(encoding="utf-8").splitlines()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([lines[0], "{not json", '{"id": "x"}', *lines[1:]]) + "\n", encoding="utf-8")
    code, report = stats(str(bad))
    assert code == 1 and not report["ok"]
    assert [error["path"] for error in report["errors"]] == ["bad.jsonl:2", "bad.jsonl:3"]
    assert report["chunks"]["chunks"] == len(lines)


@pytest.mark.parametrize(
    "content",
    [
        "# README\n\nSome text.\n\n- a list\n",  # a Markdown document
        '{\n  "fileContents": []\n}\n',  # pretty-printed JSON
        "[1, 2]\n" + '{"id": "x"}\n' * 3,  # JSON lines, none of them a chunk
    ],
)
def test_a_file_that_holds_neither_chunks_nor_audit_lines_is_one_usage_error(tmp_path: Path, content: str) -> None:
    path = tmp_path / "README.md"
    path.write_text(content, encoding="utf-8")
    result = runner.invoke(app, ["stats", str(path)])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.count(f"{path}: not chunks") == 1 and "not JSON" not in result.stderr


def test_a_json_lines_file_whose_first_chunk_is_longer_than_its_head_is_read_as_chunks(
    jsonl: Path, tmp_path: Path
) -> None:
    record = json.loads(jsonl.read_text(encoding="utf-8").splitlines()[0])
    record["metadata"]["padding"] = "x" * 100_000  # (its one line is longer than the head read to tell the kind)
    path = tmp_path / "long.jsonl"
    path.write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
    assert chunk_kind(path) == "chunks-jsonl"
    code, report = stats(str(path))
    assert code == 0 and report["chunks"]["chunks"] == 1


def test_an_empty_file_is_json_lines_without_chunks_and_a_note_says_so(tmp_path: Path) -> None:
    path = tmp_path / "none.jsonl"
    path.write_text("\n", encoding="utf-8")
    code, report = stats(str(path))
    assert code == 0 and report["chunks"]["chunks"] == 0 and report["source"]["kind"] == "chunks-jsonl"
    assert f"note: no chunks found in {path}" in runner.invoke(app, ["stats", str(path)]).stderr


def test_chunks_written_twice_are_counted_and_said(jsonl: Path, tmp_path: Path) -> None:
    lines = jsonl.read_text(encoding="utf-8")
    appended = tmp_path / "appended.jsonl"
    appended.write_text(lines + lines, encoding="utf-8")  # a cron job's `>>` instead of `>`
    code, report = stats(str(appended))
    once = stats(str(jsonl))[1]["chunks"]
    assert code == 0 and report["chunks"]["chunks"] == 2 * once["chunks"]
    assert report["chunks"]["repeated_chunks"] == once["chunks"] and once["repeated_chunks"] == 0
    printed = runner.invoke(app, ["stats", str(appended)]).stdout
    assert f"repeated: {once['chunks']:,} chunks with the id of a chunk before" in printed


def test_document_options_are_refused_on_chunks(jsonl: Path) -> None:
    result = runner.invoke(app, ["stats", str(jsonl), "--fail-over-overhead", "10"])
    assert result.exit_code == 2 and "--fail-over-overhead: documents only" in result.stderr


def test_a_documents_report_says_its_layout(tmp_path: Path) -> None:
    code, report = stats(str(FIXTURES), "--lengths", "none", "--chunking", "fixed")
    assert code == 0 and report["layout"] == "documents" and report["source"]["documents"] > 0
    assert set(CHUNK_KINDS.values()) == {"chunks", "lambda output"}


# --- the Bedrock Lambda's real output ------------------------------------------------------------


@pytest.mark.s3
def test_the_lambdas_output_batches_and_audit_lines_give_the_real_coverage(
    s3_server: S3Server,
    s3_prefix: str,
    cl100k: tokens.TiktokenTokenizer,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Inject mode on fixed 300/20% chunks of the fixtures, in both batch shapes: the output batches,
    downloaded, and the invocation's log, exported with other lines around it."""
    caplog.set_level(logging.INFO, logger="anchorkit.bedrock")
    client, bucket = s3_server.client(), s3_server.bucket
    documents = rendered(FIXTURES)
    files = []
    for index, document in enumerate(documents):
        texts = native_chunks(document.markdown, NATIVE_CHUNKERS["fixed"], cl100k)
        batches = [documented_batch(part) for part in in_batches(texts, 10)]
        if index % 2:  # the other shape
            batches = [
                {"version": "1.0", "chunks": [{"content": {"type": "TEXT", "text": t}} for t in part]}
                for part in in_batches(texts, 10)
            ]
        files.append(put_file(client, bucket, s3_prefix, document.relpath, batches, {"ticket_id": document.ticket_id}))
    settings = Settings.from_environment({"ANCHORKIT_REDMINE_URL": "https://redmine.example.co.jp"})
    answer = run(event(bucket, files), settings, S3Store(client))

    folder = tmp_path / "output"
    for output in answer["outputFiles"]:
        for batch in output["contentBatches"]:
            path = folder / batch["key"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(client.get_object(Bucket=bucket, Key=batch["key"])["Body"].read())
    assert chunk_kind(folder) == "lambda-batches"
    code, report = stats(str(folder))
    counts, found = read_audit_lines(record.getMessage() for record in caplog.records)
    assert found == 1 and counts.chunks_out > len(documents)
    assert code == 0 and (report["layout"], report["source"]["kind"]) == ("lambda output", "lambda-batches")
    assert report["chunks"]["chunks"] == counts.chunks_out
    assert report["chunks"]["identified"] == counts.already_anchored + counts.anchored == counts.chunks_out
    assert report["chunks"]["coverage_percent"] == 100.0

    log = tmp_path / "cloudwatch.log"
    exported = ["START RequestId: r1", *(f"[INFO]\tr1\t{record.getMessage()}" for record in caplog.records), "END"]
    log.write_text("\n".join(exported * 2) + "\n", encoding="utf-8")  # two invocations
    assert chunk_kind(log) == "lambda-log"
    code, report = stats(str(log))
    lambda_counts = report["lambda"]
    assert code == 0 and report["source"]["kind"] == "lambda-log"
    assert lambda_counts["invocations"] == 2
    assert (lambda_counts["files"], lambda_counts["chunks_out"]) == (2 * counts.files, 2 * counts.chunks_out)
    assert (lambda_counts["already_anchored"], lambda_counts["anchored"]) == (
        2 * counts.already_anchored,
        2 * counts.anchored,
    )
    assert lambda_counts["coverage_percent"] == 100.0 and report["source"]["chunks"] == 2 * counts.chunks_out


def test_the_terminal_and_the_page_say_which_layout_was_audited(jsonl: Path, tmp_path: Path) -> None:
    page = tmp_path / "stats.html"
    result = runner.invoke(app, ["stats", str(jsonl), "--html", str(page)])
    _, report = stats(str(jsonl))
    count = report["chunks"]["chunks"]
    assert result.exit_code == 0
    assert f"stats: chunks (chunks-jsonl {jsonl})" in result.stdout
    assert (
        f"{count:,} chunks of {report['chunks']['tickets']:,} tickets: {count:,} name their own ticket" in result.stdout
    )
    html = page.read_text(encoding="utf-8")
    assert "anchorkit stats: chunks as they are" in html and f"{count:,} chunks of" in html


def test_documents_in_project_folders_are_not_taken_for_chunks_or_batches(tmp_path: Path) -> None:
    (tmp_path / "2024-ops").mkdir()
    (tmp_path / "2024-ops" / "12301.md").write_text("# チケット #12301: 件名\n", encoding="utf-8")
    (tmp_path / "2024-ops" / "12301.md.metadata.json").write_text('{"metadataAttributes": {}}', encoding="utf-8")
    (tmp_path / "notes.json").write_text("{}", encoding="utf-8")
    assert chunk_kind(tmp_path) is None
    (tmp_path / "2024-ops" / "12301.md").unlink()
    assert chunk_kind(tmp_path) == "lambda-batches"


def test_the_packing_bound_does_not_depend_on_the_order_of_the_lines(jsonl: Path, tmp_path: Path) -> None:
    lines = jsonl.read_text(encoding="utf-8").splitlines(keepends=True)
    reordered = tmp_path / "reordered.jsonl"
    reordered.write_text("".join(lines[1::2] + lines[::2]), encoding="utf-8")  # first chunks no longer first
    _, report = stats(str(reordered), "--chunk-tokens", str(N))
    _, original = stats(str(jsonl), "--chunk-tokens", str(N))
    assert report["chunks"] == original["chunks"]


def fixture_chunks(cl100k: tokens.TiktokenTokenizer, limit: int, overlap: int = 0) -> list[sources.ChunkedTicket]:
    results = sources.chunk_items(sources.iter_source(FIXTURES), cl100k, limit, overlap)
    return [result for result in results if isinstance(result, sources.ChunkedTicket)]


@pytest.mark.parametrize("overlap", [0, 30])
def test_chunks_that_repeat_text_of_the_chunk_before_are_counted_and_said(
    cl100k: tokens.TiktokenTokenizer, tmp_path: Path, overlap: int
) -> None:
    chunked = fixture_chunks(cl100k, 100, overlap)
    repeating = sum(later.start < earlier.end for ticket in chunked for earlier, later in pairwise(ticket.chunks))
    assert (repeating > 0) == (overlap > 0)
    path = tmp_path / "chunks.jsonl"
    writers.write_jsonl_file(chunked, path)
    _, report = stats(str(path), "--chunk-tokens", "100")
    assert report["chunks"]["overlapping_chunks"] == repeating
    said = f"overlap: {repeating:,} chunks repeating text of the chunk before"
    assert (said in runner.invoke(app, ["stats", str(path), "--chunk-tokens", "100"]).stdout) == (overlap > 0)
    folder = tmp_path / "folder"
    writers.write_chunk_folder(chunked, folder)
    assert stats(str(folder), "--chunk-tokens", "100")[1]["chunks"]["overlapping_chunks"] == repeating


@pytest.mark.parametrize("first_line", ["{not json", '{"id": "x", "text": "no ticket_id"}'])
def test_chunks_quoting_an_audit_line_are_audited_as_chunks_not_taken_for_a_lambda_log(
    jsonl: Path, tmp_path: Path, first_line: str
) -> None:
    records = [json.loads(line) for line in jsonl.read_text(encoding="utf-8").splitlines()]
    records[0]["text"] += '\n\n```\n{"event": "anchorkit.bedrock.audit", "version": 1, "files": 1}\n```\n'
    quoting = tmp_path / "quoting.jsonl"
    lines = [first_line, *(json.dumps(record, ensure_ascii=False) for record in records)]
    quoting.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert chunk_kind(quoting) == "chunks-jsonl"
    code, report = stats(str(quoting))
    broken = first_line == "{not json"  # an error; a chunk without its ticket is a chunk of an unknown ticket
    assert code == broken and report["chunks"]["chunks"] == len(records) + (not broken)
    log = tmp_path / "lambda.log"
    log.write_text('START\n{"event": "anchorkit.bedrock.audit", "version": 1, "files": 1}\n', encoding="utf-8")
    assert chunk_kind(log) == "lambda-log"


def test_a_line_nested_too_deeply_is_an_error_naming_it(jsonl: Path, tmp_path: Path) -> None:
    lines = jsonl.read_text(encoding="utf-8").splitlines()
    deep = tmp_path / "deep.jsonl"
    deep.write_text("\n".join([lines[0], "[" * 100_000, *lines[1:]]) + "\n", encoding="utf-8")
    code, report = stats(str(deep))
    assert code == 1 and report["chunks"]["chunks"] == len(lines)
    assert report["errors"] == [
        {"path": "deep.jsonl:2", "message": "deep.jsonl:2: not JSON (JSON nested too deeply (more than 200 levels))"}
    ]


@pytest.mark.parametrize("name", ["12x", "0"])
def test_a_chunk_folder_whose_name_is_no_ticket_id_holds_chunks_of_an_unknown_ticket(
    chunked: list[Any], tmp_path: Path, name: str
) -> None:
    folder = tmp_path / "chunks"
    writers.write_chunk_folder(chunked[:1], folder, sidecars=False)
    first = chunked[0].chunks[0]
    (folder / name).mkdir()
    (folder / name / f"{first.id}.md").write_text(first.text, encoding="utf-8")
    code, report = stats(str(folder))
    assert code == 0 and report["chunks"]["tickets"] == 1
    assert report["chunks"]["unknown_ticket"] == 1 and report["chunks"]["chunks"] == len(chunked[0].chunks) + 1
    assert [item["where"] for item in report["chunks"]["problems"]] == [f"{name}/{first.id}.md"]


@pytest.mark.parametrize("document", ["12301.md", "2024-ops/12301.md"])
def test_a_folder_holding_documents_beside_chunks_is_a_usage_error_naming_both_layouts(
    chunked: list[Any], tmp_path: Path, document: str
) -> None:
    """Audited as chunks, its documents would be ignored without a word (a coverage gate passing on part
    of what is published): refused, as transform and chunk refuse such an --out folder."""
    folder = tmp_path / "mixed"
    writers.write_chunk_folder(chunked[:1], folder)
    (folder / document).parent.mkdir(parents=True, exist_ok=True)
    (folder / document).write_text("# チケット #12301: 件名\n", encoding="utf-8")
    result = runner.invoke(app, ["stats", str(folder), "--fail-under-coverage", "99"])
    assert result.exit_code == 2 and result.stdout == ""
    assert f"{folder} holds both layouts: documents (e.g. {document}) and chunks (e.g. {chunked[0].ticket_id}/" in (
        result.stderr
    )
    (folder / document).unlink()
    assert chunk_kind(folder) == "chunk-folder"  # a folder of chunks alone is audited as before


def test_a_line_that_is_not_utf8_is_an_error_naming_it_and_the_rest_is_measured(jsonl: Path, tmp_path: Path) -> None:
    """Replaced by U+FFFD, its chunk would pass as good where every loader of docs/layouts.md fails on the file."""
    lines = jsonl.read_bytes().splitlines(keepends=True)
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(b"".join([lines[0], lines[1].replace(b'"text": "', b'"text": "\xff', 1), *lines[2:]]))
    code, report = stats(str(broken))
    assert code == 1 and not report["ok"]
    assert [error["path"] for error in report["errors"]] == ["broken.jsonl:2"]
    assert report["errors"][0]["message"].startswith("broken.jsonl:2: not UTF-8 (invalid start byte at byte ")
    assert report["chunks"]["chunks"] == len(lines) - 1 and report["chunks"]["coverage_percent"] == 100.0


def test_a_chunk_of_unknown_ticket_names_another_ticket_only_when_it_names_two(tmp_path: Path) -> None:
    """Without its ticket_id, the one ticket a chunk names may be its own: only unknown_ticket. Naming two,
    at least one is another's, whichever is its own."""
    own = {"id": "12301-003", "text": f"{anchor_line(12301, '件名')}\n\n本文", "metadata": {"ticket_id": 12301}}
    two = {**own, "text": f"{own['text']}\n\n{anchor_line(12302, 'よそのチケット')}\n"}
    path = tmp_path / "unknown.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in (own, two)), encoding="utf-8")
    _, report = stats(str(path))
    assert (report["chunks"]["unknown_ticket"], report["chunks"]["other_ticket_anchor"]) == (2, 1)
    assert [item["problems"] for item in report["chunks"]["problems"]] == [
        ["unknown_ticket"],
        ["unknown_ticket", "other_ticket_anchor"],
    ]


def test_no_escape_sequence_of_the_input_reaches_the_terminal(tmp_path: Path) -> None:
    """Chunk ids (JSON Lines) and file names (Lambda batches) are the input's, listed with their problems;
    an escape sequence in them could retitle or clear the operator's terminal."""
    escape = "\x1b]0;PWNED\x07\x1b[2J\x9b31m"
    path = tmp_path / "chunks.jsonl"
    path.write_text(json.dumps({"id": f"a{escape}", "ticket_id": 12301, "text": "no anchor"}) + "\n", encoding="utf-8")
    batches = tmp_path / "batches"
    batches.mkdir()
    (batches / f"b{escape}.json").write_text(json.dumps(documented_batch(["no anchor"])), encoding="utf-8")
    (batches / f"c{escape}.json").write_text("not a batch", encoding="utf-8")
    for audited, shown in ((path, "chunks.jsonl:1 (a): no_own_anchor"), (batches, "b.json[0] (fileContents): ")):
        result = runner.invoke(app, ["stats", str(audited)])
        assert shown in result.stdout
        assert not any(control in result.stdout + result.stderr for control in ("\x1b", "\x07", "\x9b"))
