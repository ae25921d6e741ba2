"""`anchorkit stats` says what it measured (``rendering``): the options a snapshot was rendered with, after the
config file and the environment, or that an output folder or chunks were read as found; and whether that may
hold private content, and why. In the JSON, on the terminal and in the page's record."""

from __future__ import annotations

import json
import shlex
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner

from anchorkit.audit.rendering import as_flags
from anchorkit.audit.schema import REPORT_SCHEMA
from anchorkit.cli import app
from anchorkit.render.document import RenderOptions
from anchorkit.render.private_marks import PRIVATE_MARKS_FILE
from anchorkit.render.transform import TransformOptions, transform_snapshot
from anchorkit.settings import default

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
QUICK = ("--tokenizer", "approx", "--chunking", "fixed", "--lengths", "none")
runner = CliRunner()


def stats(*args: str, env: dict[str, str] | None = None) -> tuple[dict[str, Any], str]:
    """The JSON report of `anchorkit stats ARGS` (checked against the schema), and the terminal's summary."""
    as_json = runner.invoke(app, ["stats", *args, *QUICK, "--json"], env=env)
    assert as_json.exit_code == 0, as_json.stderr
    report = json.loads(as_json.stdout)
    jsonschema.validate(report, REPORT_SCHEMA)
    summary = runner.invoke(app, ["stats", *args, *QUICK], env=env)
    assert summary.exit_code == 0, summary.stderr
    return report, summary.stdout


class _Record(HTMLParser):
    """The rows of the page's record table (``id="record"``): {header: cell}."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, str] = {}
        self._inside, self._cells = False, list[str]()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._inside = ("id", "record") in attrs
        elif tag == "tr":
            self._cells = []

    def handle_data(self, data: str) -> None:
        if self._inside:
            self._cells.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr" and self._inside and len(self._cells) == 2:
            self.rows[self._cells[0]] = self._cells[1]
        elif tag == "table":
            self._inside = False


def record_of(page: Path) -> dict[str, str]:
    parsed = _Record()
    parsed.feed(page.read_text(encoding="utf-8"))
    return parsed.rows


@pytest.mark.usefixtures("clean_cli_environment")
def test_a_snapshot_report_records_the_options_it_was_rendered_with_not_the_defaults(tmp_path: Path) -> None:
    """English labels from the environment, full spacing anchors from anchorkit.toml, 512-token chunks and a
    20-character subject from stats' own flags: the report says each, where it used to say nothing of the
    language, the spacing anchors or the text format."""
    Path("anchorkit.toml").write_text('[transform]\nspacing_anchors = "full"\n', encoding="utf-8")
    env = {"ANCHORKIT_LANG": "en"}
    flags = ("--chunk-tokens", "512", "--anchor-subject-chars", "20")
    report, summary = stats(str(FIXTURES), *flags, env=env)
    rendering = report["rendering"]
    assert rendering["documents"] == "rendered from the snapshot"
    options = rendering["options"]
    assert (options["lang"], options["spacing_anchors"]) == ("en", "full")
    assert (options["chunk_tokens"], options["anchor_subject_chars"]) == (512, 20)
    assert (options["include_private"], options["tokenizer"], options["sidecars"]) == (False, "approx", True)
    # None of these is the default: a report that recorded the defaults would fail here.
    defaults = {name: default(name) for name in ("lang", "spacing_anchors", "chunk_tokens", "anchor_subject_chars")}
    assert all(options[name] != value for name, value in defaults.items()), defaults
    assert rendering["private_content"] is False
    assert rendering["private_content_evidence"].startswith("include_private is off")

    # The terminal says so in one line, under the first, and the page in its record.
    lines = summary.splitlines()
    assert lines[0].startswith("stats: 34 documents (snapshot ")
    assert lines[1].startswith("rendering: rendered from the snapshot with --lang en --anchor-basic-info ")
    assert "--chunk-tokens 512 --anchor-subject-chars 20 --spacing-anchors full" in lines[1]
    assert lines[1].endswith(
        "; private content: no (include_private is off: private issues and private notes were left out)"
    )
    page = tmp_path / "stats.html"
    assert runner.invoke(app, ["stats", str(FIXTURES), *flags, *QUICK, "--html", str(page)], env=env).exit_code == 0
    assert record_of(page)["rendering"] == lines[1].removeprefix("rendering: ")


@pytest.mark.usefixtures("clean_cli_environment")
def test_the_options_a_report_records_make_the_documents_it_measured(tmp_path: Path) -> None:
    """The recorded options are the ones applied: transform given them as flags writes documents whose audit
    gives the very figures of the snapshot's."""
    env = {"ANCHORKIT_LANG": "en", "ANCHORKIT_SPACING_ANCHORS": "full"}
    from_snapshot, summary = stats(str(FIXTURES), "--chunk-tokens", "400", env=env)
    flags = summary.splitlines()[1].removeprefix("rendering: rendered from the snapshot with ").split(";")[0]
    out = tmp_path / "out"
    transformed = runner.invoke(app, ["transform", str(FIXTURES), "--out", str(out), "-q", *shlex.split(flags)])
    assert transformed.exit_code == 0, transformed.stderr
    as_written, _ = stats(str(out), "--chunk-tokens", "400")
    assert as_written["overhead"] == from_snapshot["overhead"]
    assert as_written["chunking"] == from_snapshot["chunking"]
    # Without the environment, the defaults' documents differ: the flags carried what the environment gave.
    default_out = tmp_path / "default"
    assert runner.invoke(app, ["transform", str(FIXTURES), "--out", str(default_out), "-q"]).exit_code == 0
    assert stats(str(default_out), "--chunk-tokens", "400")[0]["overhead"] != from_snapshot["overhead"]


@pytest.mark.usefixtures("clean_cli_environment")
def test_an_output_folder_or_chunks_are_read_as_found_and_their_private_content_named(tmp_path: Path) -> None:
    public, private = tmp_path / "public", tmp_path / "private"
    assert not transform_snapshot(FIXTURES, public, TransformOptions(tokenizer="approx")).failed
    private_options = TransformOptions(render=RenderOptions(include_private=True), tokenizer="approx")
    assert not transform_snapshot(FIXTURES, private, private_options).failed
    for path in public.rglob("*"):  # a folder copied by a tool that does not keep modes: only its marks tell
        path.chmod(0o644)

    report, summary = stats(str(public))
    assert report["rendering"] == {
        "documents": "read as found",
        "options": None,
        "private_content": False,
        "private_content_evidence": "no private marks (.anchorkit-private.json) and no file only its owner may read",
    }
    assert summary.splitlines()[1] == (
        "rendering: read as found (the input records no rendering options); private content: no (no private marks "
        "(.anchorkit-private.json) and no file only its owner may read)"
    )

    report, _ = stats(str(private))
    assert report["rendering"]["private_content"] is True
    assert report["rendering"]["private_content_evidence"].startswith(f"its {PRIVATE_MARKS_FILE} lists ")

    # Chunks as they are: a JSON Lines file chunk wrote with --include-private is its owner's alone.
    lines = tmp_path / "chunks.jsonl"
    chunked = runner.invoke(app, ["chunk", str(FIXTURES), "--jsonl", str(lines), "--include-private", "-q"])
    assert chunked.exit_code == 0, chunked.stderr
    as_json = runner.invoke(app, ["stats", str(lines), "--tokenizer", "approx", "--json"])
    chunks = json.loads(as_json.stdout)
    jsonschema.validate(chunks, REPORT_SCHEMA)
    assert chunks["rendering"]["documents"] == "read as found" and chunks["rendering"]["private_content"] is True
    assert chunks["rendering"]["private_content_evidence"] == (
        "chunks.jsonl may be read by its owner alone, as --include-private writes it"
    )


def test_recorded_flags_quote_a_value_with_a_space_as_a_shell_reads_it() -> None:
    flags = as_flags({"label": "Support ticket", "chunk_tokens": 400})
    assert shlex.split(flags) == ["--label", "Support ticket", "--chunk-tokens", "400"]
