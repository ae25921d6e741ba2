"""The mistakes operators make end in one clear line and the right exit code, and nothing is leaked,
deleted or half-written: a wrong or revoked API key, a malformed S3 URL, an unreachable endpoint, a
missing bucket, no credentials, a folder that is a file or read-only, a snapshot in someone's folder,
a locked snapshot. Against the real Redmine and S3 (SeaweedFS) and real read-only folders."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.folders import tree, write_ticket
from support.redmine_server import RedmineAdmin, RedmineServer
from support.s3_server import S3Server
from typer.testing import CliRunner, Result

from anchorkit.cli import app
from anchorkit.source import preflight, snapshot

runner = CliRunner()
UNREACHABLE_REDMINE = "http://127.0.0.1:9"  # the discard port: nothing listens there
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
EVAL = FIXTURES / "eval"


def one_line_error(result: Result, code: int) -> str:
    """The run ended with `code` and exactly one line on stderr (no traceback); that line."""
    assert result.exit_code == code, (result.exit_code, result.output)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.fixture
def read_only_folder(tmp_path: Path) -> Iterator[Path]:
    """A folder nobody may write in: mode 0555 for an ordinary user; for root (who ignores modes),
    the kernel's /sys, which refuses new files to everyone."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        candidates = [folder, Path("/sys")]
        for candidate in candidates:
            try:
                (candidate / ".probe").touch()
            except OSError:
                yield candidate
                return
            (candidate / ".probe").unlink()
        pytest.skip("no read-only folder on this machine")
    finally:
        folder.chmod(0o755)


# --------------------------------------------------------------------------------------------------
# 1. A wrong or revoked API key


@pytest.fixture
def revoked_key(redmine_admin: RedmineAdmin) -> str:
    """The key of a user who has been locked: Redmine now answers it as anonymous."""
    user = redmine_admin.create_user()
    redmine_admin.request("PUT", f"/users/{user['id']}.json", json={"user": {"status": 3}})
    return str(user["api_key"])


@pytest.mark.redmine
def test_a_wrong_or_revoked_key_fails_pull_and_sync_before_anything_is_written(
    tmp_path: Path, redmine_server: RedmineServer, revoked_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    runs = {
        "pull": ["pull", "--url", redmine_server.url, "--snapshot", "snap"],
        "sync": ["sync", "docs", "--url", redmine_server.url, "--snapshot", "snap", "--out", "out"],
        "sync --state": ["sync", "docs", "--url", redmine_server.url, "--state", "state"],
        "pull --state": ["pull", "--url", redmine_server.url, "--snapshot", "snap", "--state", "state"],
    }
    wrong_key = redmine_server.admin_key[::-1]
    for key in (wrong_key, revoked_key):
        for name, argv in runs.items():
            shutil.rmtree(tmp_path / "snap", ignore_errors=True)
            result = runner.invoke(app, argv, env={"REDMINE_API_KEY": key})
            line = one_line_error(result, 2)
            assert "does not accept the API key" in line, name
            assert key not in result.output
            assert not (tmp_path / "docs").exists() and not (tmp_path / "state" / "manifest.json").exists(), name
            assert not snapshot.stored_issue_ids(tmp_path / "snap"), name
            if name in ("pull", "sync", "pull --state"):
                assert not (tmp_path / "snap").exists(), f"{name} left no empty snapshot behind"


@pytest.mark.parametrize("command", ["pull", "sync"])
def test_a_key_typed_in_full_width_is_a_setup_error_not_a_traceback(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = {"pull": ["pull"], "sync": ["sync", "docs", "--out", "out"]}[command]
    key = "ａｂｃ１２３ｄｅｆ"  # an input method left in full-width mode
    result = runner.invoke(
        app, [*argv, "--url", UNREACHABLE_REDMINE, "--snapshot", "snap"], env={"REDMINE_API_KEY": key}
    )
    assert "non-ASCII characters" in one_line_error(result, 2)
    assert key not in result.output and not (tmp_path / "snap").exists()


@pytest.mark.redmine
def test_a_key_that_redmine_accepts_pulls_with_one_key_check_request(
    tmp_path: Path, redmine_server: RedmineServer, redmine_admin: RedmineAdmin
) -> None:
    project = redmine_admin.create_project()
    redmine_admin.create_issue(project["id"], "VPN接続が不安定になる")
    result = runner.invoke(
        app,
        [
            "pull",
            "--url",
            redmine_server.url,
            "--snapshot",
            str(tmp_path / "snap"),
            "--project",
            project["identifier"],
            "--json",
        ],
        env={"REDMINE_API_KEY": redmine_server.admin_key},
    )
    report = json.loads(result.stdout)
    assert result.exit_code == 0 and report["ok"] is True
    assert report["requests_by_purpose"]["key check"] == 1 and report["fetched"] == 1


def test_an_unreachable_redmine_names_the_host_and_the_cause_and_creates_no_snapshot(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["pull", "--url", UNREACHABLE_REDMINE, "--snapshot", str(tmp_path / "snap"), "--retries", "1"],
        env={"REDMINE_API_KEY": "0123456789abcdef"},
    )
    line = one_line_error(result, 2)
    assert "cannot reach Redmine at 127.0.0.1:9" in line and "Connection refused" in line
    assert "0123456789abcdef" not in result.output
    assert not (tmp_path / "snap").exists()


BAD_REDMINE_URLS = {
    "http://127.0.0.1:99999": "the Redmine URL is malformed (Port out of range 0-65535)",
    "http://[bad": "the Redmine URL is malformed (Invalid IPv6 URL)",
    "http://ops:pw-53cr3t@127.0.0.1:3117x": "the Redmine URL is malformed (Port could not be cast to integer value",
    "http://redmine.example.com/?key=53cr3t": "the Redmine URL must not have a query or a fragment",
    "http://redmine.example.com/#53cr3t": "the Redmine URL must not have a query or a fragment",
}


@pytest.mark.parametrize("url", BAD_REDMINE_URLS)
def test_a_malformed_redmine_url_is_a_usage_error_in_one_line_that_echoes_no_secret(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REDMINE_API_KEY", "never-used")
    for argv in (
        ["pull", "--url", url, "--snapshot", "snap", "--json"],
        ["pull", "--url", url, "--snapshot", "snap", "--state", "state", "--json"],
        ["sync", "docs", "--url", url, "--snapshot", "snap", "--out", "out", "--json"],
        ["sync", "docs", "--url", url, "--state", "state", "--json"],
    ):
        result = runner.invoke(app, argv)
        line = one_line_error(result, 2)
        assert line.startswith(f"error: {BAD_REDMINE_URLS[url]}"), (argv, line)
        assert json.loads(result.stdout)["exit_code"] == 2
        assert "53cr3t" not in result.output, "neither the password nor a key in the query"
        assert list(tmp_path.iterdir()) == [], f"{argv}: nothing created"


# --------------------------------------------------------------------------------------------------
# 2. S3 URLs that are almost right


MALFORMED_S3_URLS = ["s3:/bucket/docs", "S3://bucket/docs", "s3//bucket/docs", "s3:bucket/docs"]


@pytest.mark.parametrize("url", MALFORMED_S3_URLS)
def test_a_malformed_s3_url_is_a_usage_error_and_creates_nothing(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_ticket(tmp_path / "out", 1)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REDMINE_API_KEY", "never-used")
    runs = [
        ["upload", "out", url],
        ["sync", url, "--url", UNREACHABLE_REDMINE, "--snapshot", "snap", "--out", "out2"],
        ["sync", "docs", "--url", UNREACHABLE_REDMINE, "--state", url],
        ["pull", "--url", UNREACHABLE_REDMINE, "--snapshot", "snap", "--state", url],
    ]
    for argv in runs:
        line = one_line_error(runner.invoke(app, argv), 2)
        assert "malformed S3 URL" in line and url in line
        assert sorted(path.name for path in tmp_path.iterdir()) == ["out"], f"{argv}: nothing created"


def test_a_folder_whose_name_only_starts_with_s3_is_still_a_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_ticket(tmp_path / "out", 1)
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["upload", "out", "s3-mirror/docs"])
    assert result.exit_code == 0
    assert tree(tmp_path / "s3-mirror" / "docs") == tree(tmp_path / "out")


# --------------------------------------------------------------------------------------------------
# 3. Everyday errors in one line: S3 that cannot be used, folders that cannot be written


def test_an_unreachable_s3_endpoint_in_state_mode_names_the_host(
    tmp_path: Path, aws_environment: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REDMINE_API_KEY", "never-used")
    for argv in (
        ["sync", "s3://kb-docs/tickets", "--state", "s3://kb-docs/anchorkit-state"],
        ["pull", "--snapshot", str(tmp_path / "snap"), "--state", "s3://kb-docs/anchorkit-state"],
    ):
        result = runner.invoke(
            app, [*argv, "--url", UNREACHABLE_REDMINE, "--endpoint-url", "http://127.0.0.1:9", "--max-attempts", "1"]
        )
        line = one_line_error(result, 2)
        assert "cannot connect to S3 at 127.0.0.1:9" in line and "Connection refused" in line


@pytest.mark.s3
def test_a_missing_bucket_in_state_mode_is_a_setup_error(
    s3_server: S3Server, tmp_path: Path, aws_environment: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REDMINE_API_KEY", "never-used")
    result = runner.invoke(
        app,
        [
            "sync",
            "s3://no-such-bucket-here/tickets",
            "--state",
            "s3://no-such-bucket-here/state",
            "--url",
            UNREACHABLE_REDMINE,
            "--endpoint-url",
            s3_server.endpoint_url,
            "--json",
        ],
    )
    line = one_line_error(result, 2)
    assert "NoSuchBucket" in line and "no-such-bucket-here" in line
    assert json.loads(result.stdout) == {"ok": False, "error": line.removeprefix("error: "), "exit_code": 2}


@pytest.mark.redmine
@pytest.mark.s3
@pytest.mark.parametrize(
    "mode",
    [
        "folders",  # the ordinary sync: it used to pull and render first, and stop at the upload
        "state in another bucket",  # it used to check nothing: SeaweedFS made the bucket at the first PUT
        "local state",
        "state, dry run",  # it used to plan happily
    ],
)
def test_a_missing_destination_bucket_stops_every_sync_before_any_work(
    mode: str,
    s3_server: S3Server,
    redmine_server: RedmineServer,
    redmine_admin: RedmineAdmin,
    tmp_path: Path,
    aws_environment: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    project = redmine_admin.create_project()
    redmine_admin.create_issue(project["id"], "VPN接続が不安定になる")
    monkeypatch.setenv("REDMINE_API_KEY", redmine_server.admin_key)
    missing = f"missing-{os.urandom(4).hex()}"
    state_prefix = f"state-{os.urandom(4).hex()}"
    where = {
        "folders": ["--snapshot", str(tmp_path / "snap"), "--out", str(tmp_path / "out")],
        "state in another bucket": ["--state", f"s3://{s3_server.bucket}/{state_prefix}/"],
        "local state": ["--state", str(tmp_path / "state")],
        "state, dry run": ["--state", f"s3://{s3_server.bucket}/{state_prefix}/", "--dry-run"],
    }[mode]
    result = runner.invoke(
        app,
        [
            "sync",
            f"s3://{missing}/tickets",
            *where,
            "--url",
            redmine_server.url,
            "--project",
            project["identifier"],
            "--endpoint-url",
            s3_server.endpoint_url,
            "--chunks",
        ],
    )
    line = one_line_error(result, 2)
    assert line == f"error: S3 NoSuchBucket: the bucket does not exist (bucket {missing})"
    # Nothing was done: no bucket made, no state, no snapshot pulled, no output rendered.
    client = s3_server.client()
    assert missing not in {bucket["Name"] for bucket in client.list_buckets()["Buckets"]}
    assert "Contents" not in client.list_objects_v2(Bucket=s3_server.bucket, Prefix=state_prefix)
    assert sorted(path.name for path in tmp_path.iterdir() if not path.name.startswith("no-aws")) == []


def test_no_aws_credentials_in_state_mode_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in os.environ if name.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("REDMINE_API_KEY", "never-used")
    result = runner.invoke(
        app,
        [
            "sync",
            "s3://kb-docs/tickets",
            "--state",
            "s3://kb-docs/state",
            "--url",
            UNREACHABLE_REDMINE,
            "--endpoint-url",
            "http://127.0.0.1:9",
            "--region",
            "us-east-1",
        ],
    )
    assert "no AWS credentials found" in one_line_error(result, 2)


def test_folders_that_are_files_are_refused_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDMINE_API_KEY", "never-used")
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a folder\n")
    runs = {
        "--out": ["transform", "fixtures", "--out", str(a_file)],
        "--snapshot": ["pull", "--url", UNREACHABLE_REDMINE, "--snapshot", str(a_file)],
        "--state": ["sync", str(tmp_path / "docs"), "--url", UNREACHABLE_REDMINE, "--state", str(a_file)],
        "destination": ["upload", "fixtures", str(a_file)],
    }
    monkeypatch.chdir(Path(__file__).resolve().parent.parent)
    for option, argv in runs.items():
        line = one_line_error(runner.invoke(app, argv), 2)
        assert f"{option} {a_file} is a file, not a folder" in line
    assert a_file.read_text() == "not a folder\n"


def test_read_only_folders_are_refused_in_one_line(
    read_only_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REDMINE_API_KEY", "never-used")
    monkeypatch.chdir(Path(__file__).resolve().parent.parent)
    inside = read_only_folder / "anchorkit-output"
    runs = {
        "--out": ["transform", "fixtures", "--out", str(inside)],
        "--snapshot": ["pull", "--url", UNREACHABLE_REDMINE, "--snapshot", str(inside)],
        "--state": ["sync", str(tmp_path / "docs"), "--url", UNREACHABLE_REDMINE, "--state", str(inside)],
        "destination": ["upload", "fixtures", str(inside)],
    }
    for option, argv in runs.items():
        line = one_line_error(runner.invoke(app, argv), 2)
        assert f"{option} {inside} is not writable" in line
        assert not inside.exists()


# --------------------------------------------------------------------------------------------------
# 5. A dry run can be reviewed in full


def test_a_dry_run_lists_every_key_to_delete_and_json_every_key(tmp_path: Path) -> None:
    published = tmp_path / "published"
    for ticket_id in range(1, 55):
        write_ticket(published, ticket_id)
    write_ticket(tmp_path / "out", 1)
    argv = ["upload", str(tmp_path / "out"), str(published), "--delete", "--force", "--dry-run"]

    human = runner.invoke(app, argv)
    as_json = runner.invoke(app, [*argv, "--json"])

    assert human.exit_code == 0 and as_json.exit_code == 0
    deleted = [line.split()[1] for line in human.stdout.splitlines() if line.startswith("  delete ")]
    expected = sorted(key for key in tree(published) if not key.startswith("1.md"))
    assert len(expected) == 106 and deleted == expected
    report = json.loads(as_json.stdout)
    assert report["ok"] is True and report["planned_keys"]["delete"] == expected
    assert tree(published).keys() >= set(expected), "a dry run deletes nothing"


def test_a_dry_run_shows_the_first_uploads_and_all_of_them_with_list_keys(tmp_path: Path) -> None:
    for ticket_id in range(1, 31):
        write_ticket(tmp_path / "out", ticket_id)
    argv = ["upload", str(tmp_path / "out"), str(tmp_path / "published"), "--dry-run"]

    short = runner.invoke(app, argv)
    full = runner.invoke(app, [*argv, "--list-keys"])

    def uploads(result: Result) -> list[str]:
        return [line.split()[1] for line in result.stdout.splitlines() if line.startswith("  upload ")]

    assert len(uploads(short)) == 10 and "… and 50 more uploads (--list-keys prints them all)" in short.stdout
    assert uploads(full) == sorted(tree(tmp_path / "out"))
    assert not (tmp_path / "published").exists()


# --------------------------------------------------------------------------------------------------
# 6. A snapshot goes only where a snapshot belongs; a locked one is exit 3


def test_pull_refuses_a_folder_that_holds_other_files(tmp_path: Path) -> None:
    project_tests = tmp_path / "tests"
    project_tests.mkdir()
    (project_tests / "test_app.py").write_text("def test_ok(): pass\n")
    result = runner.invoke(
        app,
        ["pull", "--url", UNREACHABLE_REDMINE, "--snapshot", str(project_tests)],
        env={"REDMINE_API_KEY": "never-used"},
    )
    assert "is a folder with other files, not a snapshot" in one_line_error(result, 2)
    assert sorted(path.name for path in project_tests.iterdir()) == ["test_app.py"]


@pytest.mark.redmine
def test_pull_accepts_an_empty_folder_and_an_existing_snapshot(
    tmp_path: Path, redmine_server: RedmineServer, redmine_admin: RedmineAdmin
) -> None:
    project = redmine_admin.create_project()
    redmine_admin.create_issue(project["id"], "プリンタで印刷できない")
    empty = tmp_path / "snap"
    empty.mkdir()
    argv = ["pull", "--url", redmine_server.url, "--snapshot", str(empty), "--project", project["identifier"]]
    for _ in range(2):  # an empty folder, then the snapshot it became
        result = runner.invoke(app, argv, env={"REDMINE_API_KEY": redmine_server.admin_key})
        assert result.exit_code == 0, result.output
    assert snapshot.looks_like_snapshot(empty) and len(snapshot.stored_issue_ids(empty)) == 1


@pytest.mark.redmine
def test_a_snapshot_locked_by_another_pull_is_exit_3(tmp_path: Path, redmine_server: RedmineServer) -> None:
    snap = tmp_path / "snap"
    (snap / snapshot.ISSUES_DIR).mkdir(parents=True)
    with open(snap / preflight.LOCK_FILE, "w") as held:  # another pull's lock (a separate open file)
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        result = runner.invoke(
            app,
            ["pull", "--url", redmine_server.url, "--snapshot", str(snap)],
            env={"REDMINE_API_KEY": redmine_server.admin_key},
        )
    assert one_line_error(result, 3) == f"stopped: {snap}: another pull is running on this snapshot"
    assert not (snap / snapshot.STATE_FILE).exists()


# --------------------------------------------------------------------------------------------------
# 7. Messages that say what to do


def test_a_missing_destination_names_the_argument_that_gives_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in [name for name in os.environ if name.startswith(("ANCHORKIT_", "REDMINE_"))]:
        monkeypatch.delenv(name)
    result = runner.invoke(app, ["sync", "--url", UNREACHABLE_REDMINE, "--snapshot", "snap", "--out", "out"])
    line = one_line_error(result, 2)
    assert "dest (the DEST argument, ANCHORKIT_DEST" in line and "--dest" not in line


# --------------------------------------------------------------------------------------------------
# 8. A path typed wrong: one line naming it as it was given, exit 2, and nothing printed or written


WRITING_A_FILE = {
    "verify": ["verify", "-r", str(EVAL / "retrieval-chunks.json"), "-a", str(EVAL / "answer.txt"), "--html"],
    "eval": ["eval", str(EVAL / "cases.jsonl"), "--html"],
    "stats": ["stats", str(FIXTURES), "--tokenizer", "approx", "--lengths", "none", "--html"],
    "inject": ["inject", str(EVAL / "retrieval-bedrock.json"), "--out"],
}


@pytest.mark.parametrize("command", list(WRITING_A_FILE))
@pytest.mark.parametrize("where", ["read-only folder", "folder that is a file"])
def test_a_file_that_cannot_be_written_stops_the_command_before_any_work_or_output(
    command: str, where: str, read_only_folder: Path, tmp_path: Path
) -> None:
    """Exit 2 means nothing was done: verify used to print the filtered answer, then fail on --html."""
    (tmp_path / "notes.txt").write_text("not a folder\n")
    folder = read_only_folder if where == "read-only folder" else tmp_path / "notes.txt"
    written = folder / "report.html"
    result = runner.invoke(app, [*WRITING_A_FILE[command], str(written)])

    option = WRITING_A_FILE[command][-1]
    reason = "is not writable: " if where == "read-only folder" else "is a file, not a folder"
    assert one_line_error(result, 2).startswith(f"error: {option} {written}: its folder {folder} {reason}")
    assert result.stdout == ""


SOURCES = {
    "transform": ["transform", "{path}", "--out", "out"],
    "transform --check": ["transform", "{path}", "--out", "out", "--check"],
    "chunk --out": ["chunk", "{path}", "--out", "chunks"],
    "chunk --jsonl": ["chunk", "{path}", "--jsonl", "chunks.jsonl"],
    "upload": ["upload", "{path}", "published"],
}


@pytest.mark.parametrize("command", list(SOURCES))
def test_a_source_folder_that_is_not_there_is_named_as_given(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not `nosuch/issues: not a snapshot`, nor `neither a snapshot nor a folder of documents`."""
    monkeypatch.chdir(tmp_path)
    Path("notes.txt").write_text("not a folder\n")
    for path, said in (("nosuch", "no such folder"), ("notes.txt", "not a folder")):
        argv = [arg.format(path=path) for arg in SOURCES[command]]
        assert one_line_error(runner.invoke(app, argv), 2) == f"error: {path}: {said}"
    assert sorted(entry.name for entry in tmp_path.iterdir()) == ["notes.txt"], "nothing was created"


def test_a_file_a_command_reads_that_is_not_there_is_named_as_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    answer, retrieval = str(EVAL / "answer.txt"), str(EVAL / "retrieval-chunks.json")
    runs = {
        "stats": (["stats", "nosuch"], "nosuch: not a folder, nor a chunk or log file (no such path)"),
        "eval": (["eval", "nosuch.jsonl"], "nosuch.jsonl: No such file or directory"),
        "inject": (["inject", "nosuch.json"], "nosuch.json: No such file or directory"),
        "verify -r": (["verify", "-r", "nosuch.json", "-a", answer], "nosuch.json: No such file or directory"),
        "verify -a": (["verify", "-r", retrieval, "-a", "nosuch.txt"], "nosuch.txt: No such file or directory"),
        "verify --context": (
            ["verify", "-r", retrieval, "-a", answer, "--context", "nosuch.txt"],
            "nosuch.txt: No such file or directory",
        ),
    }
    for argv, said in runs.values():
        assert one_line_error(runner.invoke(app, argv), 2) == f"error: {said}"


def test_a_local_state_that_is_not_there_is_not_shown_as_an_empty_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("notes.txt").write_text("not a folder\n")
    for state, said in (("nosuch-state", "no such folder"), ("notes.txt", "a file, not a folder")):
        for argv in (["state", "show", state], ["state", "break-lease", state, "--holder", "h"]):
            assert one_line_error(runner.invoke(app, argv), 2) == f"error: no sync state at {state}: {said}"
    assert sorted(entry.name for entry in tmp_path.iterdir()) == ["notes.txt"], "nothing was created"

    Path("new-state").mkdir()  # where no run has committed yet: shown as such
    shown = runner.invoke(app, ["state", "show", "new-state"])
    assert shown.exit_code == 0 and shown.stdout.startswith("state new-state (empty: no run committed yet)\n")


@pytest.mark.s3
def test_an_s3_state_that_is_not_there_is_not_shown_as_an_empty_one(
    s3_server: S3Server, s3_prefix: str, aws_environment: None
) -> None:
    endpoint = ["--endpoint-url", s3_server.endpoint_url]
    for state, said in (
        (f"s3://{s3_server.bucket}/{s3_prefix}-state/", "no object under this prefix"),
        (f"s3://no-such-bucket-here/{s3_prefix}-state/", "the bucket no-such-bucket-here does not exist"),
    ):
        for argv in (["state", "show", state], ["state", "break-lease", state, "--holder", "h"]):
            result = runner.invoke(app, [*argv, *endpoint, "--json"])
            assert one_line_error(result, 2) == f"error: no sync state at {state}: {said}"
            assert json.loads(result.stdout)["error"] == f"no sync state at {state}: {said}"


# Digits other than ASCII: str.isdigit() takes "²" (which int() refuses) and "١٢" (which int() reads),
# and int() refuses more than 4,300 digits. Each is a number to no command.
NOT_NUMBERS = ["²", "١٢", "１２", "9" * 5000]


@pytest.mark.parametrize("text", NOT_NUMBERS)
def test_a_count_written_in_other_digits_is_a_usage_error_not_a_traceback(text: str) -> None:
    for arguments in (["--lengths", text], ["--chunking", f"fixed:max_tokens={text}"]):
        assert text[:20] in one_line_error(runner.invoke(app, ["stats", str(FIXTURES), *arguments]), 2)


@pytest.mark.parametrize("name", ["²³", "١٢", "vpn"])
def test_an_issue_file_not_named_by_its_number_fails_alone_and_names_itself(tmp_path: Path, name: str) -> None:
    snapshot_dir = tmp_path / "snap"
    shutil.copytree(FIXTURES, snapshot_dir)
    shutil.copy(snapshot_dir / "issues" / "12301.json", snapshot_dir / "issues" / f"{name}.json")
    (tmp_path / "chunks" / name).mkdir(parents=True)  # (a folder in chunk's --out that no ticket owns)
    for command in (["transform", str(snapshot_dir), "--out", str(tmp_path / "documents")],
                    ["chunk", str(snapshot_dir), "--out", str(tmp_path / "chunks")]):  # fmt: skip
        result = runner.invoke(app, command)
        assert result.exit_code == 1 and not isinstance(result.exception, ValueError), result.output
        assert f"{name}.json: not an issue file name: pull names each <id>.json (#12301: 12301.json)" in result.stderr
    assert (tmp_path / "documents" / "12301.md").is_file() and (tmp_path / "chunks" / name).is_dir()


@pytest.mark.parametrize("command", ["transform", "chunk", "stats"])
def test_a_runaway_jobs_count_is_a_usage_error_before_any_process_starts(command: str, tmp_path: Path) -> None:
    """`--jobs 100000` once forked a worker per job until memory ran out; 256 is the most any run takes."""
    out = ["--out", str(tmp_path / "out")] if command != "stats" else []
    result = runner.invoke(app, [command, str(FIXTURES), *out, "--jobs", "100000"])
    assert result.exit_code == 2, result.output
    assert "--jobs" in result.output and "256" in result.output
    assert not (tmp_path / "out").exists()


def test_an_output_inside_its_source_or_holding_it_is_a_usage_error_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`chunk snap --jsonl snap/issues/12301.json` once overwrote an issue, `transform snap --out snap/issues`
    wrote documents among the issues (and every later transform failed on them)."""
    shutil.copytree(FIXTURES / "issues", tmp_path / "snap" / "issues")
    shutil.copy(FIXTURES / "lookups.json", tmp_path / "snap")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REDMINE_API_KEY", "never-used")
    assert runner.invoke(app, ["transform", "snap", "--out", "documents"]).exit_code == 0  # chunk reads it too
    before = tree(tmp_path)
    runs = [  # (option, output, source, command line)
        ("--jsonl", "snap/issues/12301.json", "snap", ["chunk", "snap", "--jsonl", "snap/issues/12301.json"]),
        ("--out", "snap/issues", "snap", ["chunk", "snap", "--out", "snap/issues"]),
        ("--jsonl", "documents/all.jsonl", "documents", ["chunk", "documents", "--jsonl", "documents/all.jsonl"]),
        ("--out", "snap/issues", "snap", ["transform", "snap", "--out", "snap/issues", "--sidecars"]),
        ("--out", "snap", "snap", ["transform", "snap", "--out", "snap"]),
        ("--out", ".", "snap", ["transform", "snap", "--out", "."]),  # the snapshot inside the output
        (
            "--out",
            "snap/docs",
            "snap",
            ["sync", "dest", "--url", UNREACHABLE_REDMINE, "--snapshot", "snap", "--out", "snap/docs"],
        ),
    ]
    for option, output, source, argv in runs:
        line = one_line_error(runner.invoke(app, argv), 2)
        assert line.startswith(f"error: {option} {(tmp_path / output).resolve()} overlaps the "), line
        assert line.endswith(f" {(tmp_path / source).resolve()}"), line
    assert tree(tmp_path) == before, "nothing was written"
