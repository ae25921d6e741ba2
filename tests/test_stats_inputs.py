"""`anchorkit stats` on inputs that are not what they claim to be: named pipes and symbolic links where
documents or chunks should be, a document whose line breaks were converted, JSON Lines whose first line is
broken, sidecars that are no sidecars, chunker SPECs that say too much, options that do not apply."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from anchorkit.audit.chunk_layouts import iter_chunks
from anchorkit.audit.sources import iter_output_folder
from anchorkit.bedrock.audit import audit_line
from anchorkit.bedrock.counts import Counts
from anchorkit.cli import app
from anchorkit.render.transform import TransformOptions, transform_snapshot

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
runner = CliRunner()


def stats(*args: str) -> tuple[int, dict[str, Any]]:
    """Exit code and JSON report of `anchorkit stats ARGS --json --lengths none`."""
    result = runner.invoke(app, ["stats", *args, "--json", "--lengths", "none"])
    return result.exit_code, json.loads(result.stdout)


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixtures as `transform --sidecars --layout by-project` writes them (a project folder to link)."""
    folder = tmp_path_factory.mktemp("out")
    report = transform_snapshot(FIXTURES, folder, TransformOptions(sidecars=True, layout="by-project"))
    assert not report.failed
    return folder


@pytest.fixture(scope="module")
def out_report(out: Path) -> dict[str, Any]:
    code, report = stats(str(out))
    assert code == 0 and report["source"]["documents"] > 0
    return report


@pytest.fixture(scope="module")
def chunk_folder(out: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`anchorkit chunk out --out chunks --sidecars`."""
    folder = tmp_path_factory.mktemp("chunks") / "chunks"
    result = runner.invoke(app, ["chunk", str(out), "--out", str(folder), "--sidecars", "-q"])
    assert result.exit_code == 0, result.stderr
    return folder


def copied(folder: Path, tmp_path: Path) -> Path:
    copy = tmp_path / folder.name
    shutil.copytree(folder, copy)
    return copy


def first_ticket_folder(folder: Path) -> Path:
    return min(path for path in folder.iterdir() if path.is_dir())


def read_all_or_hang(read: Callable[[], list[Any]]) -> list[Any] | None:
    """What ``read()`` returns, or None if it is still waiting after 20 s (on a named pipe with no writer)."""
    result: list[list[Any]] = []
    thread = threading.Thread(target=lambda: result.append(read()), daemon=True)
    thread.start()
    thread.join(20)
    return result[0] if result else None


def release(pipe: Path) -> None:
    """Open the named pipe for writing and close it: a reader stuck on it (old code) goes on."""
    with contextlib.suppress(OSError):  # nobody reads it: nothing to release
        os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))


# ---------------------------------------------------------------------------------------------
# Named pipes and symbolic links: never followed nor waited on, as upload never publishes them


@pytest.mark.parametrize("name", ["99999.md", "{first}.metadata.json"])
def test_a_named_pipe_among_documents_fails_by_name_instead_of_hanging_the_audit(
    out: Path, tmp_path: Path, name: str
) -> None:
    folder = copied(out, tmp_path)
    project = first_ticket_folder(folder)
    first = min(path.name for path in project.glob("*.md"))
    pipe = project / name.format(first=first)
    pipe.unlink(missing_ok=True)
    os.mkfifo(pipe)
    try:
        items = read_all_or_hang(lambda: list(iter_output_folder(folder)))
    finally:
        release(pipe)
    assert items is not None, "the audit waited for a writer on a named pipe"
    relpath = pipe.relative_to(folder).as_posix()
    errors = [item.message for item in items if hasattr(item, "message")]
    assert errors == [f"{relpath}: not a regular file"]


def test_a_named_pipe_among_chunks_fails_by_name_instead_of_hanging_the_audit(
    chunk_folder: Path, tmp_path: Path
) -> None:
    folder = copied(chunk_folder, tmp_path)
    ticket = first_ticket_folder(folder)
    pipe = ticket / f"{ticket.name}-999.md"
    os.mkfifo(pipe)
    try:
        items = read_all_or_hang(lambda: list(iter_chunks(folder, "chunk-folder")))
    finally:
        release(pipe)
    assert items is not None, "the audit waited for a writer on a named pipe"
    assert [item.message for item in items if hasattr(item, "message")] == [
        f"{ticket.name}/{pipe.name}: not a regular file"
    ]


def test_a_project_folder_that_is_a_symbolic_link_is_named_and_not_measured_twice(
    out: Path, out_report: dict[str, Any], tmp_path: Path
) -> None:
    folder = copied(out, tmp_path)
    project = first_ticket_folder(folder)
    (folder / "linked").symlink_to(project, target_is_directory=True)  # its documents again, under another name
    code, report = stats(str(folder))
    message = "linked/: a symbolic link to a folder (not followed: upload publishes nothing in it"
    assert code == 1 and [error["path"] for error in report["errors"]] == ["linked/"]
    assert report["errors"][0]["message"].startswith(message)
    assert report["source"]["documents"] == out_report["source"]["documents"]
    assert report["overhead"] == out_report["overhead"]


def test_a_document_that_is_a_symbolic_link_fails_by_name(
    out: Path, out_report: dict[str, Any], tmp_path: Path
) -> None:
    folder = copied(out, tmp_path)
    document = min(first_ticket_folder(folder).glob("*.md"))
    target = tmp_path / "elsewhere.md"
    document.rename(target)
    document.symlink_to(target)
    code, report = stats(str(folder))
    relpath = document.relative_to(folder).as_posix()
    assert code == 1 and report["errors"] == [
        {"path": relpath, "message": f"{relpath}: a symbolic link (not followed)"}
    ]
    assert report["source"]["documents"] == out_report["source"]["documents"] - 1


def test_a_ticket_folder_of_chunks_that_is_a_symbolic_link_is_named_and_not_counted_twice(
    chunk_folder: Path, tmp_path: Path
) -> None:
    code, alone = stats(str(chunk_folder))
    assert code == 0
    folder = copied(chunk_folder, tmp_path)
    (folder / "99999").symlink_to(first_ticket_folder(folder), target_is_directory=True)
    code, report = stats(str(folder))
    assert code == 1 and [error["path"] for error in report["errors"]] == ["99999/"]
    assert "a symbolic link to a folder (not followed" in report["errors"][0]["message"]
    # Read through the link, the same chunks came twice and passed for chunks made with --chunk-overlap.
    assert report["chunks"] == alone["chunks"] and report["chunks"]["overlapping_chunks"] == 0


# ---------------------------------------------------------------------------------------------
# What a file holds


def test_a_document_with_converted_line_breaks_fails_by_name_and_the_others_are_measured(
    out: Path, out_report: dict[str, Any], tmp_path: Path
) -> None:
    folder = copied(out, tmp_path)
    document = min(first_ticket_folder(folder).glob("*.md"))
    document.write_bytes(document.read_bytes().replace(b"\n", b"\r\n"))  # core.autocrlf, or an editor
    code, report = stats(str(folder))
    relpath = document.relative_to(folder).as_posix()
    # Measured, its anchors stayed in its "stripped" version: an overhead near 0 %, coverage without anchors as
    # high as with them.
    assert code == 1 and [error["path"] for error in report["errors"]] == [relpath]
    assert report["errors"][0]["message"].startswith(
        f"{relpath}: carriage returns (CR LF line breaks), which transform never writes"
    )
    assert report["source"]["documents"] == out_report["source"]["documents"] - 1


def test_a_broken_first_line_before_a_long_chunk_is_one_error_not_a_file_of_no_chunks(tmp_path: Path) -> None:
    text = "# チケット #7: Long\n\n" + "word " * 20_000  # its line is longer than the head read to tell the kind
    path = tmp_path / "chunks.jsonl"
    path.write_text('{"id": "7-000"\n' + json.dumps({"id": "7-000", "ticket_id": 7, "text": text}) + "\n")
    code, report = stats(str(path), "--chunk-tokens", "30000")
    assert code == 1 and report["chunks"]["chunks"] == report["chunks"]["identified"] == 1
    # Where in the line the parser stopped (its line 1: the line break of the file's line is not part of it).
    assert report["errors"] == [
        {
            "path": "chunks.jsonl:1",
            "message": "chunks.jsonl:1: not JSON (Expecting ',' delimiter: line 1 column 15 (char 14))",
        }
    ]


def test_a_sidecar_that_is_no_sidecar_is_the_file_named(chunk_folder: Path, tmp_path: Path) -> None:
    folder = copied(chunk_folder, tmp_path)
    chunk = min(first_ticket_folder(folder).glob("*.md"))
    sidecar = chunk.with_name(chunk.name + ".metadata.json")
    sidecar.write_text("not json", encoding="utf-8")
    code, report = stats(str(folder))
    relpath = sidecar.relative_to(folder).as_posix()
    assert code == 1 and report["errors"] == [
        {
            "path": chunk.relative_to(folder).as_posix(),
            "message": f'{relpath}: not a sidecar: expected {{"metadataAttributes": {{...}}}}',
        }
    ]


def test_a_chunk_that_is_not_utf8_says_so_as_a_document_does(chunk_folder: Path, tmp_path: Path) -> None:
    folder = copied(chunk_folder, tmp_path)
    chunk = min(first_ticket_folder(folder).glob("*.md"))
    chunk.write_bytes(b"\xff\xfe")
    code, report = stats(str(folder))
    relpath = chunk.relative_to(folder).as_posix()
    assert code == 1
    assert report["errors"] == [
        {"path": relpath, "message": f"{relpath}: not valid UTF-8 (invalid start byte at byte 0)"}
    ]


# ---------------------------------------------------------------------------------------------
# Options


def test_chunkers_to_emulate_on_chunks_as_they_are_are_a_usage_error_not_ignored(chunk_folder: Path) -> None:
    result = runner.invoke(app, ["stats", str(chunk_folder), "--chunking", "fixed:max_tokens=512"])
    assert result.exit_code == 2 and "--chunking: documents only" in result.stderr
    result = runner.invoke(app, ["stats", str(chunk_folder), "--lengths", "many"])
    assert result.exit_code == 2 and "--lengths must be positive token counts" in result.stderr


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("fixed:max_tokens=300,max_tokens=200", "'fixed:max_tokens=300,max_tokens=200': max_tokens is given twice"),
        # The overlap in the way is the default the SPEC did not give: the message shows it.
        (
            "hierarchical:child=50",
            "'hierarchical:child=50' (hierarchical:parent=1500,child=50,overlap=60): need overlap < child <= parent",
        ),
    ],
)
def test_a_spec_that_says_too_much_or_does_not_fit_its_defaults_is_a_usage_error_naming_it(
    out: Path, spec: str, message: str
) -> None:
    result = runner.invoke(app, ["stats", str(out), "--chunking", spec])
    assert result.exit_code == 2 and message in result.stderr


def test_a_folder_of_json_that_holds_no_batch_is_one_usage_error_not_an_error_a_file(tmp_path: Path) -> None:
    """A snapshot's issues/ (JSON files, no document): taken for the Lambda's batches, each issue was an error."""
    snapshot = copied(FIXTURES, tmp_path)
    result = runner.invoke(app, ["stats", str(snapshot / "issues")])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.count("error: ") == 1 and "not a batch file anchorkit reads" not in result.stderr
    assert f"{snapshot / 'issues'}: not the Bedrock Lambda's output batches: none of its" in result.stderr
    assert f"a snapshot is audited as the folder that holds issues/: {snapshot}" in result.stderr


def test_an_audit_line_whose_counts_no_handler_writes_is_named_and_left_out_of_the_sums(tmp_path: Path) -> None:
    genuine = audit_line(
        Counts(files=1, chunks_in=4, chunks_out=4, already_anchored=2, anchored=1, unknown_ticket=1), {}
    )
    broken = [
        genuine.replace('"files": 1', '"files": "many"'),  # a count that is no number: was a traceback
        genuine.replace('"chunks_out": 4', '"chunks_out": -40'),  # summed: coverage -8 %
        genuine.replace('"chunks_out": 4', '"chunks_out": 1'),  # summed: coverage 150 %
        genuine.replace('"shapes": {}', '"shapes": {"fileContents": "x"}'),
    ]
    log = tmp_path / "lambda.log"
    log.write_text("\n".join(["START RequestId: 1", genuine, *broken, genuine]) + "\n", encoding="utf-8")
    code, report = stats(str(log))
    assert code == 1 and report["layout"] == "lambda output"
    assert [error["path"] for error in report["errors"]] == [f"lambda.log:{line}" for line in (3, 4, 5, 6)]
    assert (
        report["errors"][1]["message"]
        == "lambda.log:4: an audit line left out of the sums: negative counts (chunks_out)"
    )
    assert report["errors"][2]["message"].endswith(
        "4 chunks sorted (already anchored, anchored, ticket unknown, not text) of 1 out"
    )
    assert report["lambda"]["invocations"] == 2 and report["lambda"]["chunks_out"] == 8
    assert report["lambda"]["coverage_percent"] == 75.0


def test_a_ticket_written_twice_in_one_output_folder_is_measured_once_and_named(
    out: Path, out_report: dict[str, Any], tmp_path: Path
) -> None:
    folder = copied(out, tmp_path)
    document = min(first_ticket_folder(folder).glob("*.md"))
    shutil.copy(document, folder / document.name)  # the flat layout's copy beside the by-project one
    code, report = stats(str(folder))
    relpath = document.relative_to(folder).as_posix()
    assert code == 1 and [error["path"] for error in report["errors"]] == [relpath]
    assert report["errors"][0]["message"].startswith(f"{relpath}: ticket #{document.stem} again, after {document.name}")
    assert report["source"]["documents"] == out_report["source"]["documents"]
    totals = ("tokens_with_anchors", "tokens_without_anchors", "anchor_tokens", "percent", "per_ticket_percent")
    assert [report["overhead"][key] for key in totals] == [out_report["overhead"][key] for key in totals]


def test_a_file_named_with_digits_that_are_not_ascii_is_no_document_of_that_ticket(
    out: Path, out_report: dict[str, Any], tmp_path: Path
) -> None:
    folder = copied(out, tmp_path)
    document = min(first_ticket_folder(folder).glob("*.md"))
    arabic_indic = document.stem.translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩"))
    shutil.copy(document, folder / f"{arabic_indic}.md")  # int() reads it as the ticket's number
    code, report = stats(str(folder))
    assert code == 0 and report["errors"] == []
    assert report["source"]["documents"] == out_report["source"]["documents"]


def test_a_ratio_to_the_fewest_chunks_below_1_says_the_chunks_do_not_fit_the_length_asked(chunk_folder: Path) -> None:
    """Chunks made at 300 audited at 100 (the --chunk-tokens forgotten): fewer chunks than the "fewest possible"."""
    code, report = stats(str(chunk_folder), "--chunk-tokens", "100")
    chunks = report["chunks"]
    assert code == 0 and chunks["ratio_to_fewest"] < 1 and chunks["over_chunk_tokens"] > 0
    printed = runner.invoke(app, ["stats", str(chunk_folder), "--chunk-tokens", "100"]).stdout
    assert f"over: {chunks['over_chunk_tokens']:,} chunks longer than 100 tokens, which the fewest count is for" in (
        printed.replace("\n", " ")
    )


# ---------------------------------------------------------------------------------------------
# The settings kept for every run (environment, anchorkit.toml)


@pytest.mark.usefixtures("clean_cli_environment")
def test_a_snapshot_is_rendered_with_transforms_settings_as_transform_renders_it(tmp_path: Path) -> None:
    """ANCHORKIT_LANG=en (or lang in anchorkit.toml) for the whole pipeline: transform writes English labels;
    the snapshot's audit rendered Japanese ones, and reported another corpus's overhead."""
    env = {"ANCHORKIT_LANG": "en", "ANCHORKIT_SPACING_ANCHORS": "full"}
    published = tmp_path / "out"
    transformed = runner.invoke(app, ["transform", str(FIXTURES), "--out", str(published), "-q"], env=env)
    assert transformed.exit_code == 0, transformed.stderr
    as_published = runner.invoke(app, ["stats", str(published), "--json", "--lengths", "none"], env=env)
    from_snapshot = runner.invoke(app, ["stats", str(FIXTURES), "--json", "--lengths", "none"], env=env)
    overhead = [json.loads(result.stdout)["overhead"] for result in (as_published, from_snapshot)]
    assert overhead[0]["tokens_with_anchors"] == overhead[1]["tokens_with_anchors"]
    assert overhead[0]["percent"] == overhead[1]["percent"]


@pytest.mark.usefixtures("clean_cli_environment")
def test_snapshot_options_kept_for_every_run_are_no_usage_error_where_they_do_not_apply(
    out: Path, chunk_folder: Path
) -> None:
    """anchorkit.toml keeps transform's --anchor-subject-chars for every run (docs/reference.md); the same
    setting is stats' snapshot option, so `stats OUT` failed with a usage error blaming a flag nobody gave."""
    Path("anchorkit.toml").write_text("[transform]\nanchor_subject_chars = 20\n", encoding="utf-8")
    env = {"ANCHORKIT_ANCHOR_BASIC_INFO": "false", "ANCHORKIT_FAIL_OVER_OVERHEAD": "90"}
    for audited in (out, chunk_folder):
        result = runner.invoke(app, ["stats", str(audited), "--lengths", "none", "-q"], env=env)
        assert result.exit_code == 0, result.stderr
    # Given on the command line, they are still refused there.
    result = runner.invoke(app, ["stats", str(out), "--anchor-subject-chars", "20"])
    assert result.exit_code == 2 and "apply to snapshot input only" in result.stderr
    result = runner.invoke(app, ["stats", str(chunk_folder), "--fail-over-overhead", "90"])
    assert result.exit_code == 2 and "--fail-over-overhead: documents only" in result.stderr


def test_a_folder_name_that_is_not_utf8_is_named_and_the_page_is_written(out: Path, tmp_path: Path) -> None:
    """No S3 key holds such a name (upload fails it); read, its documents' paths ended the run in a traceback
    when the page was written, and the JSON carried lone surrogates."""
    folder = copied(out, tmp_path)
    project = first_ticket_folder(folder)
    os.rename(project, os.fsencode(project) + b"\xff")
    page = tmp_path / "stats.html"
    result = runner.invoke(app, ["stats", str(folder), "--json", "--lengths", "none", "--html", str(page)])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)  # typer.Exit(1), not a traceback
    report = json.loads(result.stdout)
    assert report["errors"] == [
        {
            "path": f"{project.name}\\xff/",
            "message": f"{project.name}\\xff/: a folder name that is not UTF-8 (a name in another encoding: no S3 key "
            "can hold it, so upload publishes nothing in it, and nothing in it is measured)",
        }
    ]
    assert f"{project.name}\\xff/" in page.read_text(encoding="utf-8")
