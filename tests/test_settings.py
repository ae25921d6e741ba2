"""The settings catalogue (anchorkit.settings) is the one source of every option: its default, environment
variable and config key. A new option that bypasses it fails here; ANCHORKIT_* variables and anchorkit.toml
reach every command, verify, eval and inject included."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import pytest
import typer
from typer.testing import CliRunner

from anchorkit import settings
from anchorkit.audit.chunkers import CHUNKERS
from anchorkit.audit.collect import SCHEMA_VERSION
from anchorkit.cli import app
from anchorkit.cli.app import command_names
from anchorkit.cli.options import PER_INVOCATION
from anchorkit.cli.stats import CHUNKER_NAMES
from anchorkit.publish.aws import AwsSettings
from anchorkit.publish.upload import PublishSettings
from anchorkit.render.document import LABELS, RenderOptions
from anchorkit.render.transform import TransformOptions
from anchorkit.source.pull import PullSettings
from anchorkit.source.redmine import RetryPolicy
from anchorkit.verify.citations import VerifyOptions

REPO = Path(__file__).resolve().parent.parent
EVAL = REPO / "fixtures" / "eval"
runner = CliRunner()
# Arguments that are the command's input, not a setting (nothing to default or configure).
INPUT_ARGUMENTS = {("stats", "path"), ("chunk", "source"), ("eval", "cases_file")}
COMMANDS = command_names(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


pytestmark = pytest.mark.usefixtures("clean_cli_environment")


def literal_choices(annotation: Any) -> tuple[Any, ...]:
    """The words of a ``Literal[...]`` annotation (also inside ``X | None``); () for any other."""
    if get_origin(annotation) is Literal:
        return get_args(annotation)
    return next((get_args(arg) for arg in get_args(annotation) if get_origin(arg) is Literal), ())


def expected_cli_default(setting: settings.Setting, command: str) -> Any:
    if command == settings.SYNC or setting.kind is list:
        return None  # sync: "not given", the environment or the config file decide; a list: none given
    return setting.default_for(command)


def test_the_catalogue_knows_every_command_of_the_cli() -> None:
    assert sorted(COMMANDS) == sorted(settings.COMMANDS)


@pytest.mark.parametrize("command", settings.COMMANDS)
def test_every_option_of_every_command_comes_from_the_catalogue(command: str) -> None:
    declared = set()
    for param in COMMANDS[command].params:
        if param.name in PER_INVOCATION or (command, param.name) in INPUT_ARGUMENTS:
            continue
        setting = settings.SETTINGS_BY_NAME.get(param.name)
        assert setting is not None, f"{command} {param.opts}: not in the settings catalogue"
        assert command in setting.commands, f"{command} {param.opts}: the catalogue does not list {command}"
        default = None if param.required else param.default
        assert default == expected_cli_default(setting, command), f"{command} {param.opts}"
        if command != settings.SYNC:
            assert param.envvar == list(setting.env_names), f"{command} {param.opts}"
        listed = literal_choices(param.type_descriptor.annotation)  # the choices --help lists and click enforces
        if listed:
            assert listed == setting.choices, f"{command} {param.opts}"
        else:  # a stage checks the value (its message names the choices)
            assert setting.choices is None or setting.name == "tokenizer", f"{command} {param.opts}"
        declared.add(param.name)
    assert declared == {setting.name for setting in settings.settings_of(command)}


def test_the_stages_defaults_are_the_catalogues() -> None:
    def defaults(instance: Any, names: dict[str, str]) -> dict[str, Any]:
        return {setting: getattr(instance, field) for field, setting in names.items()}

    expected = {name: settings.default(name) for name in settings.SETTINGS_BY_NAME}
    checked = {
        **defaults(RenderOptions(), {f: f for f in ("lang", "include_private", "anchor_basic_info", "timezone")}),
        **defaults(RenderOptions(), {"chunk_tokens": "chunk_tokens", "anchor_subject_chars": "anchor_subject_chars"}),
        **defaults(TransformOptions(), {f: f for f in ("sidecars", "sidecar_schema", "layout", "tokenizer")}),
        **defaults(TransformOptions(), {"max_text_bytes": "max_text_bytes", "text_format": "text_format"}),
        **defaults(PullSettings(), {"concurrency": "concurrency", "full_every": "full_every", "full": "full"}),
        **defaults(PullSettings(), {"overlap_s": "overlap", "lookups_max_age_s": "lookups_max_age"}),
        **defaults(RetryPolicy(), {"attempts": "retries", "read_timeout_s": "timeout"}),
        **defaults(PublishSettings(), {f: f for f in ("delete", "force", "dry_run", "threads", "max_attempts")}),
        **defaults(PublishSettings(), {"retry_mode": "retry_mode"}),
        **defaults(VerifyOptions(), {f: f for f in ("quote_threshold", "grounding_threshold", "on_invalid")}),
        **defaults(VerifyOptions(), {f: f for f in ("on_empty", "min_id_digits", "min_score", "uri_pattern")}),
    }
    assert checked == {name: expected[name] for name in checked}
    assert str(PublishSettings().max_delete) == settings.default("max_delete")
    assert dataclasses.asdict(AwsSettings()) == {
        name: settings.default(name) for name in dataclasses.asdict(AwsSettings())
    }


def test_the_choices_the_cli_lists_are_the_stages() -> None:
    assert tuple(LABELS) == settings.LANGS
    assert tuple(CHUNKERS) == CHUNKER_NAMES
    stats_help = " ".join(runner.invoke(app, ["stats", "--help"], env={"COLUMNS": "200"}).stdout.split())
    assert f"schema anchorkit-stats, version {SCHEMA_VERSION}" in stats_help


def test_a_bad_value_from_the_environment_or_the_file_names_its_source(tmp_path: Path) -> None:
    config = tmp_path / "anchorkit.toml"
    config.write_text("[upload]\nthreads = 1000\n", encoding="utf-8")
    required = {"url": "http://redmine.test", "snapshot": Path("s"), "out": Path("o"), "dest": "d"}
    with pytest.raises(settings.SettingError, match=f"config {config}: threads must be at most 256, not 1000"):
        settings.resolve(settings.SYNC, required, {}, settings.load_config(config), config)
    with pytest.raises(settings.SettingError, match="ANCHORKIT_LANG: lang must be one of ja, en, not 'de'"):
        settings.resolve(settings.SYNC, required, {"ANCHORKIT_LANG": "de"}, {})
    config.write_text('project = "helpdesk"\n', encoding="utf-8")
    with pytest.raises(settings.SettingError, match=r"project = 'helpdesk': expected a list of strings, e\.g\. \["):
        settings.resolve(settings.SYNC, required, {}, settings.load_config(config), config)


def test_folders_and_files_a_config_file_names_are_relative_to_the_file(tmp_path: Path) -> None:
    """docs/operations.md: relative paths are relative to the file, whatever folder the run starts in; a
    destination or state that is a folder is a path too, an s3:// URL (or a malformed one) is left as written."""
    config = tmp_path / "conf" / "anchorkit.toml"
    config.parent.mkdir()
    config.write_text('dest = "published"\nstate = "kb/state"\ncontext = ["turn1.txt", "-"]\n', encoding="utf-8")
    required = {"url": "http://redmine.test", "snapshot": Path("s"), "out": Path("o")}
    synced = settings.resolve(settings.SYNC, required, {}, settings.load_config(config), config).values
    assert (synced["dest"], synced["state"]) == (str(config.parent / "published"), str(config.parent / "kb/state"))
    checked = settings.resolve(settings.VERIFY, {}, {}, settings.load_config(config), config).values
    assert checked["context"] == [str(config.parent / "turn1.txt"), "-"]
    for url in ("s3://kb-docs/tickets", "s3:/kb-docs/tickets", "S3://kb-docs", "s3//kb-docs", "/srv/published"):
        config.write_text(f"dest = {url!r}\n", encoding="utf-8")
        assert settings.resolve(settings.SYNC, required, {}, settings.load_config(config), config).values["dest"] == url

    (tmp_path / "conf" / "out").mkdir()
    (tmp_path / "conf" / "out" / "12345.md").write_text("# チケット #12345: x\n", encoding="utf-8")
    config.write_text('out = "out"\ndest = "published"\n', encoding="utf-8")
    result = runner.invoke(app, ["upload"], env={"ANCHORKIT_CONFIG": str(config)})
    assert result.exit_code == 0, result.output
    assert (tmp_path / "conf" / "published" / "12345.md").is_file() and not (tmp_path / "published").exists()


# --------------------------------------------------------------------------------------------------
# verify, eval and inject read the environment and anchorkit.toml like every other command


def verify_phantom(env: dict[str, str] | None = None) -> int:
    args = ["verify", "-r", str(EVAL / "retrieval-bedrock.json"), "-a", str(EVAL / "answer-results.json")]
    return runner.invoke(app, args, env=env).exit_code


def test_anchorkit_strict_makes_verify_exit_1_on_a_phantom() -> None:
    assert verify_phantom() == 0
    assert verify_phantom({"ANCHORKIT_STRICT": "true"}) == 1
    assert verify_phantom({"ANCHORKIT_STRICT": "false"}) == 0


def test_the_config_file_sets_verify_and_eval_options_and_the_flag_still_wins(tmp_path: Path) -> None:
    (tmp_path / "anchorkit.toml").write_text("[verify]\nstrict = true\n", encoding="utf-8")
    assert verify_phantom() == 1
    assert runner.invoke(app, ["eval", str(EVAL / "cases.jsonl")]).exit_code == 1  # strict is eval's too
    (tmp_path / "anchorkit.toml").write_text("[eval]\nmin_grounding = 0.71\n", encoding="utf-8")
    assert runner.invoke(app, ["eval", str(EVAL / "cases.jsonl")]).exit_code == 1
    assert runner.invoke(app, ["eval", str(EVAL / "cases.jsonl"), "--min-grounding", "0.7"]).exit_code == 0


def test_inject_takes_its_label_and_output_file_from_the_environment(tmp_path: Path) -> None:
    env = {"ANCHORKIT_LABEL": "Issue", "ANCHORKIT_INJECT_OUT": str(tmp_path / "anchored.json")}
    result = runner.invoke(app, ["inject", str(EVAL / "retrieval-bedrock.json")], env=env)
    assert result.exit_code == 0, result.output
    anchored = json.loads((tmp_path / "anchored.json").read_text(encoding="utf-8"))
    assert "> Issue #12345: " in json.dumps(anchored, ensure_ascii=False)
    assert "inject: " in result.stdout  # with an output file the summary goes to stdout


def test_a_broken_config_file_stops_verify_too(tmp_path: Path) -> None:
    (tmp_path / "anchorkit.toml").write_text("strict = 'yes'\n", encoding="utf-8")
    result = runner.invoke(app, ["verify", "-r", str(EVAL / "retrieval-bedrock.json")])
    assert result.exit_code == 2
    assert f"{tmp_path / 'anchorkit.toml'}: strict = 'yes': expected true or false" in result.stderr
