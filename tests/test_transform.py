"""`anchorkit transform`: the batch over a snapshot, --check, layouts, bad input."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchorkit import parallel
from anchorkit.anchors import find_anchors, strip_anchors
from anchorkit.cli import app
from anchorkit.render.document import text_format_at
from anchorkit.render.transform import TransformOptions, resolve_render_options, transform_snapshot

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
runner = CliRunner()


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    copy = tmp_path / "snapshot"
    shutil.copytree(FIXTURES, copy, ignore=shutil.ignore_patterns("eval"))
    return copy


def public_ticket_ids() -> set[int]:
    ids = set()
    for path in (FIXTURES / "issues").glob("*.json"):
        issue = json.loads(path.read_text(encoding="utf-8"))["issue"]
        if not issue.get("is_private"):
            ids.add(issue["id"])
    return ids


def test_transform_fixtures_writes_one_anchored_document_and_sidecar_per_public_ticket(
    snapshot: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    code, stdout, _ = run("transform", str(snapshot), "--out", str(out), "--sidecars", "--json")
    assert code == 0
    report = json.loads(stdout)
    ids = public_ticket_ids()
    assert report["tickets"] == len(ids) >= 30 and report["failed"] == []
    assert {int(p.name.removesuffix(".md")) for p in out.glob("*.md")} == ids
    assert {int(p.name.split(".")[0]) for p in out.glob("*.md.metadata.json")} == ids
    for ticket_id in ids:
        anchors = find_anchors((out / f"{ticket_id}.md").read_text(encoding="utf-8"))
        assert anchors and {a.ticket_id for a in anchors} == {ticket_id}


def test_private_issue_is_left_out_unless_asked_for(snapshot: Path, tmp_path: Path) -> None:
    assert run("transform", str(snapshot), "--out", str(tmp_path / "a"))[0] == 0
    assert not (tmp_path / "a" / "12333.md").exists()
    assert run("transform", str(snapshot), "--out", str(tmp_path / "b"), "--include-private")[0] == 0
    assert "社外秘" in (tmp_path / "b" / "12333.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "broken", [{"subject": 123}, {"journals": "x"}, {"id": "12301"}, {"description": "x" * 1_000_001}, {}]
)
def test_a_ticket_made_private_loses_its_document_whatever_else_is_wrong_with_it(
    snapshot: Path, tmp_path: Path, broken: dict[str, object]
) -> None:
    """A failed ticket keeps its old document (a bad field must not withdraw it); a private one must not."""
    out = tmp_path / "out"
    assert run("transform", str(snapshot), "--out", str(out), "--sidecars")[0] == 0
    path = snapshot / "issues" / "12301.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    document["issue"] |= {"is_private": True, **broken}
    path.write_text(json.dumps(document), encoding="utf-8")
    code, stdout, _ = run("transform", str(snapshot), "--out", str(out), "--sidecars", "--json")
    report = json.loads(stdout)
    assert code == 0 and report["failed"] == [] and report["private_skipped"] == 2, report
    assert sorted(report["removed"]) == ["12301.md", "12301.md.metadata.json"]
    assert not (out / "12301.md").exists()


def test_a_private_note_over_the_size_limit_neither_fails_nor_is_named_by_a_run_without_include_private(
    snapshot: Path, tmp_path: Path
) -> None:
    """A snapshot pulled with --include-private, transformed without it: the note is left out, so its size (and
    the journal's id) is none of the run's business; with it, the limit applies as to any text."""
    path = snapshot / "issues" / "12315.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    (private_note,) = [j for j in document["issue"]["journals"] if j["private_notes"]]
    private_note["notes"] = "社外秘の調査ログ。" * 150_000  # 4 MB
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")

    code, stdout, stderr = run("transform", str(snapshot), "--out", str(tmp_path / "public"), "--json")
    assert code == 0 and json.loads(stdout)["failed"] == [], stdout
    assert str(private_note["id"]) not in stdout + stderr
    assert "社外秘" not in (tmp_path / "public" / "12315.md").read_text(encoding="utf-8")

    code, stdout, _ = run("transform", str(snapshot), "--out", str(tmp_path / "all"), "--json", "--include-private")
    (failure,) = json.loads(stdout)["failed"]
    assert code == 1 and f"journal {private_note['id']} notes is 4,050,000 bytes" in failure["message"], failure


def test_rerun_is_byte_identical_and_rewrites_nothing(snapshot: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run("transform", str(snapshot), "--out", str(out), "--sidecars")
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns, p.stat().st_ino) for p in out.iterdir()}
    code, stdout, _ = run("transform", str(snapshot), "--out", str(out), "--sidecars", "--json")
    report = json.loads(stdout)
    assert code == 0 and report["created"] == report["changed"] == report["removed"] == []
    after = {p.name: (p.read_bytes(), p.stat().st_mtime_ns, p.stat().st_ino) for p in out.iterdir()}
    assert after == before
    other = tmp_path / "other"
    run("transform", str(snapshot), "--out", str(other), "--sidecars")
    assert {p.name: p.read_bytes() for p in other.iterdir()} == {name: v[0] for name, v in before.items()}


def test_check_reports_what_would_change_and_writes_nothing(snapshot: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, stdout, _ = run("transform", str(snapshot), "--out", str(out), "--check")
    assert code == 1 and "would create" in stdout and not out.exists()
    run("transform", str(snapshot), "--out", str(out))
    assert run("transform", str(snapshot), "--out", str(out), "--check")[0] == 0
    # Change one ticket, remove another: --check names both and still writes nothing.
    path = snapshot / "issues" / "12301.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    document["issue"]["subject"] = "件名を変更"
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    (snapshot / "issues" / "12304.json").unlink()
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    code, stdout, _ = run("transform", str(snapshot), "--out", str(out), "--check")
    assert code == 1
    assert f"would change {out / '12301.md'}" in stdout and f"would remove {out / '12304.md'}" in stdout
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_outputs_of_tickets_that_left_the_snapshot_are_removed_and_other_files_kept(
    snapshot: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    run("transform", str(snapshot), "--out", str(out), "--sidecars")
    (out / "notes.txt").write_text("mine")
    (out / ".12301.md.abc123.tmp").write_text("left by a killed run")
    (snapshot / "issues" / "12304.json").unlink()
    code, stdout, _ = run("transform", str(snapshot), "--out", str(out), "--sidecars", "--json")
    assert code == 0
    assert sorted(json.loads(stdout)["removed"]) == [".12301.md.abc123.tmp", "12304.md", "12304.md.metadata.json"]
    assert (out / "notes.txt").read_text() == "mine"


def test_the_users_own_numbered_files_in_out_survive(snapshot: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "2024.md").write_text("# 2024 年度の振り返り\n\n自分のメモ\n", encoding="utf-8")
    (out / "2024.md.metadata.json").write_text('{"metadataAttributes": {"year": 2024}}\n')
    (out / "7.md").write_text(
        "# チケット #12345: a copy under another name\n", encoding="utf-8"
    )  # not ticket 7's title
    for check in (["--check"], []):
        code, stdout, _ = run("transform", str(snapshot), "--out", str(out), "--sidecars", "--json", *check)
        assert code == (1 if check else 0) and json.loads(stdout)["removed"] == []
    assert (out / "2024.md").read_text(encoding="utf-8") == "# 2024 年度の振り返り\n\n自分のメモ\n"
    assert (out / "2024.md.metadata.json").exists() and (out / "7.md").exists()
    # What transform wrote is still recognised as its own once its ticket leaves the snapshot.
    (snapshot / "issues" / "12304.json").unlink()
    code, stdout, _ = run("transform", str(snapshot), "--out", str(out), "--sidecars", "--json")
    assert sorted(json.loads(stdout)["removed"]) == ["12304.md", "12304.md.metadata.json"]
    assert (out / "2024.md").exists() and (out / "2024.md.metadata.json").exists()


def test_the_summary_says_how_many_private_tickets_were_skipped(snapshot: Path, tmp_path: Path) -> None:
    code, stdout, _ = run("transform", str(snapshot), "--out", str(tmp_path / "a"))
    assert code == 0 and "0 failed, 1 private skipped in" in stdout
    code, stdout, _ = run("transform", str(snapshot), "--out", str(tmp_path / "b"), "--include-private", "--json")
    assert code == 0 and json.loads(stdout)["private_skipped"] == 0


def test_by_project_layout(snapshot: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert run("transform", str(snapshot), "--out", str(out), "--layout", "by-project")[0] == 0
    assert (out / "helpdesk" / "12345.md").exists() and (out / "infra" / "12310.md").exists()
    assert not list(out.glob("*.md"))
    # Switching back to flat removes the by-project files.
    assert run("transform", str(snapshot), "--out", str(out))[0] == 0
    assert (out / "12345.md").exists() and not list(out.glob("*/*.md"))


def test_a_symlinked_project_folder_in_out_is_not_written_through(snapshot: Path, tmp_path: Path) -> None:
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / "helpdesk").symlink_to(elsewhere)
    code, stdout, _ = run("transform", str(snapshot), "--out", str(out), "--layout", "by-project", "--json")
    assert code == 1 and list(elsewhere.iterdir()) == []
    failed = {failure["ticket_id"]: failure["message"] for failure in json.loads(stdout)["failed"]}
    assert failed[12345] == f"{out / 'helpdesk'}: a symbolic link: documents are not written through it (remove it)"
    assert (out / "infra" / "12310.md").exists()  # the other projects' documents are written


BAD_TICKETS = {
    "90001.json": (b'{"issue": {"id": 90001, "subject": "broken', "malformed JSON"),
    "90002.json": (b'{"issue": {"id": 90002}}', "has no subject"),
    "90003.json": (b'{"issue": {"id": 90003, "subject": "s", "journals": "oops"}}', "'journals' must be a list"),
    "90004.json": (b'{"issue": {"id": 90004, "subject": "\xff\xfe"}}', "invalid UTF-8"),
    "90005.json": (b'{"issue": {"id": "90005", "subject": "s"}}', "invalid issue id"),
    "90006.json": (b'{"issue": {"id": 90006, "subject": "s", "description": 42}}', "'description' must be a string"),
    "90008.json": (b'{"issue": {"id": 90008, "subject": "s", "status": "open"}}', "'status' must be an object"),
    "90009.json": (
        b'{"issue": {"id": 90009, "subject": "s", "journals": [null, 5, "x"]}}',
        "#90009: 'journals[0]' must be an object, not NoneType",
    ),
    "90010.json": (
        b'{"issue": {"id": 90010, "subject": "s", "journals": [{"id": 7, "notes": 5}]}}',
        "#90010: journal 7: 'notes' must be a string, not int",
    ),
    "90011.json": (
        b'{"issue": {"id": 90011, "subject": "s", "journals": [{"id": 8, "notes": "n", "created_on": 1749513600}]}}',
        "#90011: journal 8: 'created_on' must be a string, not int",
    ),
    "90012.json": (b'{"issue": {"id": 90012, "subject": "s", "updated_on": 5}}', "'updated_on' must be a string"),
}


def test_bad_input_names_the_file_and_the_problem_and_the_batch_goes_on(snapshot: Path, tmp_path: Path) -> None:
    for name, (data, _) in BAD_TICKETS.items():
        (snapshot / "issues" / name).write_bytes(data)
    huge = {"issue": {"id": 90007, "subject": "huge", "description": "ログ" * 2_000_000}}
    (snapshot / "issues" / "90007.json").write_text(json.dumps(huge, ensure_ascii=False), encoding="utf-8")
    out = tmp_path / "out"
    code, stdout, stderr = run("transform", str(snapshot), "--out", str(out), "--json")
    assert code == 1
    report = json.loads(stdout)
    failures = {Path(f["source"]).name: f["message"] for f in report["failed"]}
    for name, (_, problem) in BAD_TICKETS.items():
        assert name in failures[name] and problem in failures[name], failures[name]
    assert "over the 1,000,000-byte limit" in failures["90007.json"]
    assert len(list(out.glob("*.md"))) == len(public_ticket_ids())
    code, _, stderr = run("transform", str(snapshot), "--out", str(out))
    assert code == 1 and "90001.json: malformed JSON" in stderr


def test_jobs_split_the_work_across_processes_without_changing_outputs_or_report(
    snapshot: Path, tmp_path: Path
) -> None:
    for name, (data, _) in BAD_TICKETS.items():
        (snapshot / "issues" / name).write_bytes(data)
    reports = {}
    for jobs in ("1", "3"):
        out = tmp_path / f"out{jobs}"
        code, stdout, _ = run("transform", str(snapshot), "--out", str(out), "--sidecars", "--jobs", jobs, "--json")
        assert code == 1  # the bad tickets fail, in a worker process as in this one
        reports[jobs] = {k: v for k, v in json.loads(stdout).items() if k not in ("seconds", "out")}
    assert reports["1"] == reports["3"] and len(reports["3"]["failed"]) == len(BAD_TICKETS)
    files = {jobs: {p.name: p.read_bytes() for p in (tmp_path / f"out{jobs}").iterdir()} for jobs in ("1", "3")}
    assert files["1"] == files["3"] and len(files["3"]) == 2 * len(public_ticket_ids())
    (tmp_path / "out3" / "12345.md").write_text("edited by hand", encoding="utf-8")
    code, stdout, _ = run(
        "transform", str(snapshot), "--out", str(tmp_path / "out3"), "--sidecars", "--jobs", "2", "--check"
    )
    assert code == 1 and stdout.splitlines()[0] == f"would change {tmp_path / 'out3' / '12345.md'}"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_broken_state_or_lookups_file_stops_the_run_with_its_name(snapshot: Path, tmp_path: Path, jobs: str) -> None:
    (snapshot / "state.json").write_text('{"text_format": "markdown"}', encoding="utf-8")
    code, _, stderr = run("transform", str(snapshot), "--out", str(tmp_path / "o"), "--jobs", jobs)
    assert code == 2 and f"{snapshot / 'state.json'}: unknown text format 'markdown'" in stderr
    (snapshot / "state.json").write_text("{}", encoding="utf-8")
    (snapshot / "lookups.json").write_text('{"statuses": []}', encoding="utf-8")
    code, _, stderr = run("transform", str(snapshot), "--out", str(tmp_path / "o"), "--jobs", jobs)
    assert code == 2 and "lookups.json" in stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("", "unknown text format ''"),
        ([{"since": "bad", "format": "common_mark"}], "each since an ISO time"),
        ([{"since": 20240401, "format": "common_mark"}], "each since an ISO time"),
        ([{"since": "2024-04-01T00:00:00Z", "format": "markdown"}], "unknown text format 'markdown'"),
    ],
)
def test_a_text_format_of_state_json_that_is_no_format_is_refused_naming_the_file(
    snapshot: Path, tmp_path: Path, setting: object, message: str
) -> None:
    (snapshot / "state.json").write_text(json.dumps({"text_format": setting}), encoding="utf-8")
    for command in ("transform", "chunk"):
        code, _, stderr = run(command, str(snapshot), "--out", str(tmp_path / "o"))
        assert code == 2 and f"{snapshot / 'state.json'}: " in stderr and message in stderr, stderr
    assert not (tmp_path / "o").exists()


def test_a_text_format_switch_takes_effect_at_its_time_in_any_time_zone(snapshot: Path) -> None:
    """A note written at 15:00Z on March 31st is written after a switch at midnight in Tokyo on April 1st."""
    switch = {"since": "2026-04-01T00:00:00+09:00", "format": "common_mark"}
    (snapshot / "state.json").write_text(json.dumps({"text_format": [switch]}), encoding="utf-8")
    options = resolve_render_options(snapshot, TransformOptions())
    assert options.text_format == (("2026-03-31T15:00:00Z", "common_mark"),)
    assert text_format_at(options.text_format, "2026-03-31T15:00:00Z") == "common_mark"
    assert text_format_at(options.text_format, "2026-03-31T14:59:59Z") == "textile"


def test_jobs_zero_starts_processes_only_for_more_than_one_batch() -> None:
    jobs, batches = parallel.resolve_jobs(0, parallel.batched(range(256), 256))
    assert jobs == 1 and [len(b) for b in batches] == [256]
    jobs, batches = parallel.resolve_jobs(0, parallel.batched(range(600), 256))
    assert jobs == min(os.cpu_count() or 1, 3) and [len(b) for b in batches] == [256, 256, 88]


def test_no_more_processes_start_than_there_are_batches() -> None:
    """--jobs 100000 over three batches forked 100,000 workers, until the machine ran out of memory."""
    jobs, batches = parallel.resolve_jobs(100_000, parallel.batched(range(600), 256))
    assert jobs == 3 and [len(b) for b in batches] == [256, 256, 88]
    jobs, batches = parallel.resolve_jobs(4, parallel.batched(range(0), 256))
    assert jobs == 1 and list(batches) == []


def _in_worker(_: tuple[()], batch: list[int]) -> list[bool]:
    return [parallel.in_worker() for _ in batch]


def test_work_knows_whether_it_runs_in_a_worker_process() -> None:
    assert set(parallel.map_batches(_in_worker, range(10), 2, setup=tuple, batch_size=3)) == {True}
    assert set(parallel.map_batches(_in_worker, range(10), 1, setup=tuple, batch_size=3)) == {False}


INTERRUPTED_BATCHES = """
import os, sys, time
from pathlib import Path
from anchorkit import parallel

def work(folder, batch):
    (folder / str(os.getpid())).touch()
    time.sleep(60)
    return batch

try:
    list(parallel.map_batches(work, range(4), 2, setup=Path, args=(sys.argv[1],), batch_size=1))
except KeyboardInterrupt:
    sys.exit(130)
"""


def test_ctrl_c_stops_the_worker_processes_without_a_traceback(tmp_path: Path) -> None:
    """Ctrl-C reaches the whole process group: the workers leave it to the process that started them,
    which stops them and ends as the CLI does on Ctrl-C, quietly with 130."""
    started = subprocess.Popen(
        [sys.executable, "-c", INTERRUPTED_BATCHES, str(tmp_path)],
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        for _ in range(600):
            if len(list(tmp_path.iterdir())) == 2:
                break
            time.sleep(0.05)
        assert len(list(tmp_path.iterdir())) == 2, "the two workers did not start"
        os.killpg(started.pid, signal.SIGINT)
        _, stderr = started.communicate(timeout=30)
    finally:
        started.kill()
    workers = {int(marker.name) for marker in tmp_path.iterdir()}
    assert (started.returncode, stderr) == (130, "")
    for pid in workers:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_a_ticket_that_turns_bad_keeps_its_previous_output(snapshot: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run("transform", str(snapshot), "--out", str(out))
    good = (out / "12345.md").read_bytes()
    (snapshot / "issues" / "12345.json").write_text('{"issue": {"id": 12345', encoding="utf-8")
    assert run("transform", str(snapshot), "--out", str(out))[0] == 1
    assert (out / "12345.md").read_bytes() == good


def test_usage_errors_exit_2(snapshot: Path, tmp_path: Path) -> None:
    assert run("transform", str(tmp_path / "missing"), "--out", str(tmp_path / "o"))[0] == 2
    code, _, stderr = run("transform", str(snapshot), "--out", str(tmp_path / "o"), "--layout", "nested")
    flat = " ".join(stderr.replace("│", " ").split())  # click's message, boxed by rich
    assert code == 2 and "'nested' is not one of 'flat', 'by-project'" in flat
    assert run("transform", str(snapshot), "--out", str(tmp_path / "o"), "--timezone", "Mars/Base")[0] == 2


def test_an_unknown_sidecar_schema_is_one_error_before_any_ticket(snapshot: Path, tmp_path: Path) -> None:
    options = TransformOptions(sidecars=True, sidecar_schema="tpyed")
    with pytest.raises(ValueError, match=r"unknown sidecar schema 'tpyed' \(expected one of simple, typed\)"):
        transform_snapshot(snapshot, tmp_path / "out", options, jobs=1)
    assert not (tmp_path / "out").exists()


def test_chunk_tokens_adds_spacing_anchors_that_strip_back_to_the_structural_document(
    snapshot: Path, tmp_path: Path
) -> None:
    assert run("transform", str(snapshot), "--out", str(tmp_path / "zero"), "--chunk-tokens", "0")[0] == 0
    code, stdout, _ = run("transform", str(snapshot), "--out", str(tmp_path / "300"), "--tokenizer", "approx", "--json")
    assert code == 0 and json.loads(stdout)["tokenizer"] == "approx"
    assert (
        run(
            "transform", str(snapshot), "--out", str(tmp_path / "120"), "--chunk-tokens", "120", "--tokenizer", "approx"
        )[0]
        == 0
    )
    counts = {}
    for name in ("zero", "300", "120"):
        document = (tmp_path / name / "12307.md").read_text(encoding="utf-8")
        counts[name] = len(find_anchors(document))
        assert strip_anchors(document) == strip_anchors((tmp_path / "zero" / "12307.md").read_text(encoding="utf-8"))
    assert counts["zero"] < counts["300"] < counts["120"]


def test_spacing_anchors_are_short_unless_asked_for_in_full(snapshot: Path, tmp_path: Path) -> None:
    common = ("--chunk-tokens", "120", "--tokenizer", "approx")
    assert run("transform", str(snapshot), "--out", str(tmp_path / "short"), *common)[0] == 0
    assert (
        run("transform", str(snapshot), "--out", str(tmp_path / "full"), *common, "--spacing-anchors", "full")[0] == 0
    )
    short = (tmp_path / "short" / "12307.md").read_text(encoding="utf-8")
    full = (tmp_path / "full" / "12307.md").read_text(encoding="utf-8")
    assert "\n> チケット #12307:\n" in short and "\n> チケット #12307:\n" not in full
    assert {a.subject for a in find_anchors(full)} == {a.subject for a in find_anchors(short)} - {""}
    assert strip_anchors(short) == strip_anchors(full)
    assert run("transform", str(snapshot), "--out", str(tmp_path / "x"), "--spacing-anchors", "long")[0] == 2


def test_an_unavailable_tokenizer_is_a_usage_error(snapshot: Path, tmp_path: Path) -> None:
    code, _, stderr = run(
        "transform",
        str(snapshot),
        "--out",
        str(tmp_path / "o"),
        "--tokenizer",
        "cl100k_base",
        "--tiktoken-file",
        str(tmp_path / "none.tiktoken"),
    )
    assert code == 2 and f"cl100k_base vocabulary file {tmp_path / 'none.tiktoken'}: cannot read" in stderr
    code, _, stderr = run("transform", str(snapshot), "--out", str(tmp_path / "o"), "--tokenizer", "gpt2")
    assert code == 2 and "--tokenizer must be one of cl100k_base, approx" in stderr
    assert not (tmp_path / "o").exists()


def test_python_dash_m_entry_point(snapshot: Path, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "anchorkit", "transform", str(snapshot), "--out", str(tmp_path / "o"), "--lang", "en"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "transform: " in result.stdout
    assert (tmp_path / "o" / "12345.md").read_text(encoding="utf-8").startswith("# Ticket #12345: ")


def test_link_issues_turns_ticket_mentions_into_links(snapshot: Path, tmp_path: Path) -> None:
    assert (
        run(
            "transform", str(snapshot), "--out", str(tmp_path / "o"), "--link-issues", "https://redmine.example.co.jp/"
        )[0]
        == 0
    )
    document = (tmp_path / "o" / "12345.md").read_text(encoding="utf-8")
    assert "\n[#12301](https://redmine.example.co.jp/issues/12301) は「IPv6 を優先」" in document
    # Like Redmine, a mention glued to Japanese punctuation stays text.
    assert "（#12301 と同様の事象" in document
    assert find_anchors(document) and {a.ticket_id for a in find_anchors(document)} == {12345}
    assert run("transform", str(snapshot), "--out", str(tmp_path / "p"), "--link-issues", "javascript:alert(1)")[0] == 2


def test_failures_print_paths_with_brackets_literally(tmp_path: Path) -> None:
    snapshot = tmp_path / "snap[/archive] [bold]"  # rich would take both for markup
    shutil.copytree(FIXTURES, snapshot, ignore=shutil.ignore_patterns("eval"))
    (snapshot / "issues" / "90001.json").write_bytes(BAD_TICKETS["90001.json"][0])
    code, _, stderr = run("transform", str(snapshot), "--out", str(tmp_path / "out"))
    assert code == 1
    assert f"failed: {snapshot / 'issues' / '90001.json'}: malformed JSON" in stderr


def test_custom_fields_only_some_roles_see_stay_out_of_documents_of_a_snapshot_pulled_with_them(
    snapshot: Path, tmp_path: Path
) -> None:
    # pull --include-private keeps the values of custom fields restricted to some roles, and records which
    # fields they are: a document made without --include-private leaves them out, its own and its history's.
    state = json.loads((snapshot / "state.json").read_text(encoding="utf-8"))
    state |= {"include_private": True, "restricted_custom_fields": [8]}
    (snapshot / "state.json").write_text(json.dumps(state), encoding="utf-8")
    path = snapshot / "issues" / "12345.json"
    ticket = json.loads(path.read_text(encoding="utf-8"))
    change = {"property": "cf", "name": "8", "old_value": "PC-2023-0001", "new_value": "PC-2024-0777"}
    ticket["issue"]["journals"][0]["details"].append(change)
    path.write_text(json.dumps(ticket, ensure_ascii=False), encoding="utf-8")
    holding = {12309, 12326, 12336, 12372, 12375, 12345}

    assert run("transform", str(snapshot), "--out", str(tmp_path / "public"), "--sidecars")[0] == 0
    published = "".join(p.read_text(encoding="utf-8") for p in (tmp_path / "public").iterdir())
    assert "PC資産番号" not in published and "PC-2024-0777" not in published  # (in rows, changes and sidecars)
    assert "問い合わせ経路" in published  # a field everyone sees stays

    assert run("transform", str(snapshot), "--out", str(tmp_path / "all"), "--include-private")[0] == 0
    assert "PC-2024-0777" in (tmp_path / "all" / "12345.md").read_text(encoding="utf-8")
    marks = json.loads((tmp_path / "all" / ".anchorkit-private.json").read_text(encoding="utf-8"))
    assert holding <= set(marks["private_tickets"]) and not holding & set(map(int, marks.get("private_journals", {})))
    code, _, stderr = run("chunk", str(tmp_path / "all"), "--jsonl", str(tmp_path / "chunks.jsonl"))
    assert code == 0, stderr
    chunks = (tmp_path / "chunks.jsonl").read_text(encoding="utf-8")
    assert "PC資産番号" not in chunks and not {json.loads(line)["ticket_id"] for line in chunks.splitlines()} & holding


def test_subtask_subjects_of_a_snapshot_pulled_with_private_content_stay_out_unless_asked_for(
    snapshot: Path, tmp_path: Path
) -> None:
    # pull --include-private keeps every subtask's subject in its parent (without it, a private subtask is
    # stored as its number only); which subtasks are private is not in the parent, and a private one may
    # be in a project not pulled at all.
    state = json.loads((snapshot / "state.json").read_text(encoding="utf-8"))
    (snapshot / "state.json").write_text(json.dumps({**state, "include_private": True}), encoding="utf-8")
    child_path = snapshot / "issues" / "12341.json"
    child = json.loads(child_path.read_text(encoding="utf-8"))
    child["issue"]["is_private"] = True
    child_path.write_text(json.dumps(child, ensure_ascii=False), encoding="utf-8")
    secret = child["issue"]["subject"]

    assert run("transform", str(snapshot), "--out", str(tmp_path / "public"))[0] == 0
    document = (tmp_path / "public" / "12340.md").read_text(encoding="utf-8")
    assert "- 子チケット: #12341, #12342, #12343, #12344\n" in document and secret not in document
    code, _, stderr = run("chunk", str(snapshot), "--jsonl", str(tmp_path / "chunks.jsonl"))
    assert code == 0, stderr
    assert secret not in (tmp_path / "chunks.jsonl").read_text(encoding="utf-8")

    assert run("transform", str(snapshot), "--out", str(tmp_path / "all"), "--include-private")[0] == 0
    assert f"#12341 {secret}" in (tmp_path / "all" / "12340.md").read_text(encoding="utf-8")
    # Chunked without --include-private, that folder's parent is left out whole: which subjects to drop is unknown.
    code, _, stderr = run("chunk", str(tmp_path / "all"), "--jsonl", str(tmp_path / "from-all.jsonl"))
    assert code == 0, stderr
    chunked = [json.loads(line) for line in (tmp_path / "from-all.jsonl").read_text(encoding="utf-8").splitlines()]
    assert secret not in json.dumps(chunked, ensure_ascii=False) and 12340 not in {r["ticket_id"] for r in chunked}
