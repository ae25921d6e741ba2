"""sync = pull → transform → upload: its settings (flags > environment > anchorkit.toml > defaults),
and one end-to-end run against the real Redmine and the real S3 server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.redmine_server import RedmineAdmin, RedmineServer
from support.s3_server import DUMMY_CREDENTIALS, S3Server
from test_cli_help import flat, help_at
from typer.testing import CliRunner

from anchorkit import sync as syncing
from anchorkit.cli import app
from anchorkit.settings import SettingError, find_config_file, load_config

runner = CliRunner()
REQUIRED_FLAGS = {"url": "http://redmine.test", "snapshot": Path("snap"), "out": Path("out"), "dest": "s3://kb-docs/t"}


def write_config(folder: Path, text: str) -> Path:
    path = folder / "anchorkit.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_flags_beat_the_environment_which_beats_the_config_file_which_beats_defaults(tmp_path: Path) -> None:
    config_path = write_config(tmp_path, "threads = 4\nmax_delete = 25\nlayout = 'by-project'\nsidecars = true\n")
    settings = syncing.resolve(
        {**REQUIRED_FLAGS, "threads": 8},
        {"ANCHORKIT_THREADS": "6", "ANCHORKIT_MAX_DELETE": "5%"},
        load_config(config_path),
        config_path,
    )
    assert settings["threads"] == 8 and settings.sources["threads"] == "flag"
    assert settings["max_delete"] == "5%" and settings.sources["max_delete"] == "env ANCHORKIT_MAX_DELETE"
    assert settings["layout"] == "by-project" and settings.sources["layout"] == f"config {config_path}"
    assert settings["sidecars"] is True
    assert settings["lang"] == "ja" and settings.sources["lang"] == "default"


def test_a_flag_given_as_false_overrides_a_true_in_the_config_file(tmp_path: Path) -> None:
    config_path = write_config(tmp_path, "[upload]\ndelete = true\n")
    settings = syncing.resolve({**REQUIRED_FLAGS, "delete": False}, {}, load_config(config_path), config_path)
    assert settings["delete"] is False


def test_environment_values_are_parsed_to_the_settings_types() -> None:
    environ = {
        "REDMINE_URL": "https://redmine.example.com",
        "ANCHORKIT_SNAPSHOT": "/var/snap",
        "ANCHORKIT_OUT": "/var/out",
        "ANCHORKIT_DEST": "s3://kb-docs/tickets",
        "ANCHORKIT_DELETE": "yes",
        "ANCHORKIT_PROJECT": "helpdesk, infra",
        "ANCHORKIT_OVERLAP": "30.5",
    }
    settings = syncing.resolve({}, environ, {})
    assert settings["url"] == "https://redmine.example.com"
    assert settings["snapshot"] == Path("/var/snap")
    assert settings["delete"] is True
    assert settings["project"] == ["helpdesk", "infra"]
    assert settings["overlap"] == 30.5


def test_relative_paths_in_the_config_file_are_relative_to_the_file(tmp_path: Path) -> None:
    config_path = write_config(tmp_path, "snapshot = 'state/snapshot'\n[transform]\nout = 'out'\n")
    settings = syncing.resolve(
        {"url": "https://redmine.example.com", "dest": "d"}, {}, load_config(config_path), config_path
    )
    assert settings["snapshot"] == tmp_path / "state" / "snapshot"
    assert settings["out"] == tmp_path / "out"


@pytest.mark.parametrize(
    ("config_text", "message"),
    [
        ("thread = 4\n", "unknown setting 'thread'"),
        ("threads = 'many'\n", "threads = 'many': expected an integer"),
        ("[upload]\nthreads = 4\n[pull]\nthreads = 2\n", "given twice"),
        ("threads = \n", "cannot read the config file"),
        ("api_key = 'secret'\n", "unknown setting 'api_key'"),
    ],
)
def test_bad_config_files_name_the_file_and_the_key(tmp_path: Path, config_text: str, message: str) -> None:
    config_path = write_config(tmp_path, config_text)
    with pytest.raises(SettingError, match=message) as error:
        syncing.resolve(REQUIRED_FLAGS, {}, load_config(config_path), config_path)
    assert str(config_path) in str(error.value)


def test_bad_environment_values_and_missing_settings_are_explained() -> None:
    with pytest.raises(SettingError, match="ANCHORKIT_DELETE='maybe': expected true or false"):
        syncing.resolve(REQUIRED_FLAGS, {"ANCHORKIT_DELETE": "maybe"}, {})
    with pytest.raises(SettingError, match=r"missing: url \(--url, ANCHORKIT_URL or REDMINE_URL"):
        syncing.resolve({**REQUIRED_FLAGS, "url": None}, {}, {})


def test_the_config_file_is_found_by_flag_then_environment_then_working_folder(tmp_path: Path) -> None:
    here = write_config(tmp_path, "")
    elsewhere = tmp_path / "other.toml"
    elsewhere.write_text("")
    assert find_config_file(None, {}, tmp_path) == here
    assert find_config_file(None, {"ANCHORKIT_CONFIG": str(elsewhere)}, tmp_path) == elsewhere
    assert find_config_file(elsewhere, {"ANCHORKIT_CONFIG": str(here)}, tmp_path) == elsewhere
    assert find_config_file(None, {}, tmp_path / "empty-folder") is None
    with pytest.raises(SettingError, match="does not exist"):
        find_config_file(tmp_path / "missing.toml", {}, tmp_path)


def test_the_help_of_sync_says_what_delete_removes_with_a_state_and_when_the_destination_is_checked() -> None:
    shown = flat(help_at(200, "sync"))
    # With --state the prefix is never listed: what --delete removes is what the state published.
    assert "with --state, the objects the state published for tickets gone from Redmine" in shown
    assert "(the prefix is not listed)" in shown
    assert "checked before anything is pulled: exit 2 means nothing was done" in shown
    # upload has no state: its --delete says what it always said.
    assert "Delete objects under the prefix that have no local counterpart. " in flat(help_at(200, "upload"))


def test_sync_with_a_bad_setting_is_a_usage_error_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write_config(tmp_path, "threads = 0.5\n")
    result = runner.invoke(
        app, ["sync", "s3://kb-docs/t", "--url", "http://127.0.0.1:9", "--snapshot", "s", "--out", "o"]
    )
    assert result.exit_code == 2
    assert "threads = 0.5: expected an integer" in result.stderr
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["s3://kb-docs/t", "--start-ingestion", "KB_ONLY"], "expected KB_ID:DATA_SOURCE_ID"),
        (["s", "--start-ingestion", "KB:DS"], "overlaps"),  # the destination folder holds --out
    ],
)
def test_sync_with_a_bad_destination_stops_before_pulling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, arguments: list[str], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REDMINE_API_KEY", "not used")
    result = runner.invoke(
        app, ["sync", *arguments, "--url", "http://127.0.0.1:9", "--snapshot", "snap", "--out", "s/out"]
    )
    assert result.exit_code == 2 and message in result.stderr
    assert not (tmp_path / "snap").exists()  # nothing was pulled


@pytest.mark.redmine
@pytest.mark.s3
@pytest.mark.timeout(300)
def test_sync_pulls_transforms_and_uploads_then_a_rerun_uploads_nothing(
    redmine_server: RedmineServer,
    redmine_admin: RedmineAdmin,
    s3_server: S3Server,
    s3_prefix: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    project = redmine_admin.create_project(name="社内ITサービスデスク")
    vpn = redmine_admin.create_issue(project["id"], "VPN接続が不安定になる", description="再接続が頻発する")
    printer = redmine_admin.create_issue(project["id"], "プリンタが印刷しない")
    monkeypatch.chdir(tmp_path)
    write_config(tmp_path, "snapshot = 'snapshot'\nout = 'out'\nsidecars = true\n[upload]\nmax_delete = '50%'\n")
    for name, value in {
        "REDMINE_URL": redmine_server.url,
        "REDMINE_API_KEY": redmine_server.admin_key,
        "ANCHORKIT_ENDPOINT_URL": s3_server.endpoint_url,
        "AWS_ACCESS_KEY_ID": DUMMY_CREDENTIALS["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": DUMMY_CREDENTIALS["aws_secret_access_key"],
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(tmp_path / "no-aws-config"),
    }.items():
        monkeypatch.setenv(name, value)
    command = ["sync", f"s3://{s3_server.bucket}/{s3_prefix}", "--project", project["identifier"], "--json"]

    first = runner.invoke(app, command)
    assert first.exit_code == 0, first.output
    report = json.loads(first.stdout)
    assert report["upload"]["uploaded"] == 4  # two documents, two sidecars
    document = s3_server.client().get_object(Bucket=s3_server.bucket, Key=f"{s3_prefix}/{vpn['id']}.md")
    assert f"> チケット #{vpn['id']}: VPN接続が不安定になる" in document["Body"].read().decode()
    assert redmine_server.admin_key not in first.output

    second = json.loads(runner.invoke(app, command).stdout)
    assert "PutObject" not in second["upload"]["requests"]

    redmine_admin.delete_issue(printer["id"])
    third = runner.invoke(app, [*command, "--full", "--delete"])
    assert third.exit_code == 0, third.output
    assert json.loads(third.stdout)["upload"]["deleted"] == 2
    keys = [
        item["Key"]
        for item in s3_server.client().list_objects_v2(Bucket=s3_server.bucket, Prefix=f"{s3_prefix}/")["Contents"]
    ]
    assert sorted(keys) == [f"{s3_prefix}/{vpn['id']}.md", f"{s3_prefix}/{vpn['id']}.md.metadata.json"]
