"""What a user of aws cli, rclone or sqlite-utils expects of every command: the same option sources
(flag > ANCHORKIT_* / REDMINE_URL > anchorkit.toml > default) shown in --help, choices that --help lists,
an example in every command's help, the exit-code table, -v and -q, no progress bars in logs, `ok` in
every --json object, and a CLI that imports without the heavy optional parts."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.faultproxy import Fault, FaultProxy, on_path
from support.folders import tree, write_ticket
from support.redmine_server import RedmineAdmin, RedmineServer
from support.s3_server import DUMMY_CREDENTIALS, S3Server
from typer.testing import CliRunner

from anchorkit.cli import app

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
COMMANDS = ["transform", "chunk", "upload", "pull", "sync", "stats", "verify", "eval"]
runner = CliRunner()


pytestmark = pytest.mark.usefixtures("clean_cli_environment")


def flat(text: str) -> str:
    """Help and click errors as one line of words (rich wraps them in boxes and columns)."""
    return " ".join(text.replace("│", " ").split())


def help_of(*command: str) -> str:
    result = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return flat(result.stdout)


# --------------------------------------------------------------------------------------------------
# Help


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_an_example_in_its_help(command: str) -> None:
    shown = help_of(command)
    assert "Example:" in shown and f"anchorkit {command} " in shown.split("Example:")[1]


def test_the_top_level_help_has_the_exit_code_table_and_shell_completion() -> None:
    shown = help_of()
    for text in ("0 done", "1 some work failed", "2 usage or setup error", "3 another run holds the lock"):
        assert text in shown
    assert "--install-completion" in shown and "--show-completion" in shown


def test_choices_are_listed_in_help_and_a_typo_is_refused_naming_them() -> None:
    shown = help_of("transform")
    for listed in ("--layout flat|by-project", "--lang ja|en", "--sidecar-schema simple|typed"):
        assert listed in shown
    assert "--sse AES256|aws:kms" in help_of("upload") and "--on-invalid drop|flag" in help_of("verify")
    assert "--retry-mode standard|adaptive" in help_of("upload")
    typo = runner.invoke(app, ["transform", str(FIXTURES), "--out", "out", "--lang", "de"])
    assert typo.exit_code == 2 and "Invalid value for '--lang': 'de' is not one of 'ja', 'en'" in flat(typo.stderr)


def test_help_names_the_environment_variable_of_each_option() -> None:
    assert "--layout" in help_of("transform") and "[env var: ANCHORKIT_LAYOUT]" in help_of("transform")
    assert "[env var: ANCHORKIT_URL, REDMINE_URL]" in help_of("pull")
    assert "[env var: ANCHORKIT_DEST]" in help_of("upload")
    assert "[env var: ANCHORKIT_THREADS]" in help_of("sync") and "[env var: ANCHORKIT_URL, REDMINE_URL]" in help_of(
        "sync"
    )


def test_sync_groups_its_options_into_panels() -> None:
    result = runner.invoke(app, ["sync", "--help"], env={"COLUMNS": "200"})
    panels = [line.strip("╭─ ").split(" ─")[0] for line in result.stdout.splitlines() if line.startswith("╭─")]
    assert panels == [
        "Arguments",
        "Options",
        "Redmine (pull)",
        "Documents (transform)",
        "Destination (upload)",
        "State (runs without a persistent disk)",
    ]


# --------------------------------------------------------------------------------------------------
# Option sources


def test_environment_variables_set_the_options_of_transform_and_upload(tmp_path: Path) -> None:
    env = {
        "ANCHORKIT_LAYOUT": "by-project",
        "ANCHORKIT_SIDECARS": "true",
        "ANCHORKIT_OUT": "out",
        "ANCHORKIT_DEST": "published",
    }
    assert runner.invoke(app, ["transform", str(FIXTURES)], env=env).exit_code == 0
    assert runner.invoke(app, ["upload"], env=env).exit_code == 0

    documents = tree(tmp_path / "out")
    assert any(key.startswith("helpdesk/") and key.endswith(".md.metadata.json") for key in documents)
    assert tree(tmp_path / "published") == documents


def test_the_config_file_sets_options_and_flags_and_variables_beat_it(tmp_path: Path) -> None:
    (tmp_path / "anchorkit.toml").write_text(
        'out = "from-config"\n[transform]\nlang = "en"\nlayout = "by-project"\n', encoding="utf-8"
    )
    configured = runner.invoke(app, ["transform", str(FIXTURES), "--json"])
    overridden = runner.invoke(
        app, ["transform", str(FIXTURES), "--out", "from-flag", "--json"], env={"ANCHORKIT_LAYOUT": "flat"}
    )

    assert configured.exit_code == 0 and json.loads(configured.stdout)["out"] == str(tmp_path / "from-config")
    english = next((tmp_path / "from-config" / "helpdesk").glob("*.md")).read_text(encoding="utf-8")
    assert english.startswith("# Ticket #")
    assert overridden.exit_code == 0 and not (tmp_path / "from-flag" / "helpdesk").exists()
    assert next((tmp_path / "from-flag").glob("*.md")).read_text(encoding="utf-8").startswith("# Ticket #")
    assert "[default: " + str(tmp_path / "from-config") + "]" in help_of("transform")


def test_a_broken_config_file_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "anchorkit.toml").write_text("layuot = 'flat'\n", encoding="utf-8")
    result = runner.invoke(app, ["transform", str(FIXTURES), "--out", "out"])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: {tmp_path / 'anchorkit.toml'}: unknown setting 'layuot'"


@pytest.mark.parametrize(
    ("command", "named"),
    [
        (["transform", str(FIXTURES), "--out", ""], "the value of --out"),
        (["transform", str(FIXTURES), "--out="], "the value of --out"),
        (["upload", "", "published"], "an argument"),
        (["state", "show", ""], "an argument"),
        (["chunk", str(FIXTURES), "--jsonl", "", "--json"], "the value of --jsonl"),
        (["transform", str(FIXTURES), "--out", "out", "--label", ""], "the value of --label"),
        (["upload", "out", "s3://kb-docs", "--endpoint-url="], "the value of --endpoint-url"),
    ],
)
def test_an_empty_argument_is_refused_not_read_as_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str], named: str
) -> None:
    # `--out "$OUT"` with OUT unset: Python reads "" as ".", where the run would write (or publish from).
    (tmp_path / "notes.md").write_text("mine", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, command)
    assert result.exit_code == 2 and f"{named} is empty (an unset variable?)" in flat(result.output)
    # The usage line is the command's, not the group's.
    name = " ".join(command[:2]) if command[0] == "state" else command[0]
    assert f"Usage: anchorkit {name} [OPTIONS]" in result.output
    # Said of the options that take a path only: `--label ''` is no folder.
    path = named.split()[-1] not in ("--label", "--endpoint-url")
    assert ("for the current folder, give ." in flat(result.output)) == path
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.md"]
    if "--json" in command:
        assert json.loads(result.stdout)["ok"] is False


def test_redmine_url_and_a_comma_separated_project_list_reach_pull(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["pull", "--snapshot", "snap", "--retries", "1", "--json"],
        env={"REDMINE_URL": "http://127.0.0.1:9", "REDMINE_API_KEY": "k", "ANCHORKIT_PROJECT": "helpdesk,infra"},
    )
    assert result.exit_code == 2 and "cannot reach Redmine at 127.0.0.1:9" in result.stderr


# --------------------------------------------------------------------------------------------------
# Output: -v, -q, --json, progress


@pytest.mark.redmine
def test_verbose_says_what_is_retried_and_why(
    tmp_path: Path, redmine_server: RedmineServer, redmine_admin: RedmineAdmin
) -> None:
    project = redmine_admin.create_project()
    issue = redmine_admin.create_issue(project["id"], "VPN接続が不安定になる")["id"]
    argv = ["pull", "--snapshot", "snap", "--project", project["identifier"], "--retries", "3"]
    outputs = {}
    with FaultProxy(redmine_server.url, decide=on_path(Fault.HTTP_503, f"/issues/{issue}.json", 1)) as proxy:
        for flag in ("-v", "--quiet"):
            outputs[flag] = runner.invoke(
                app, [*argv, "--url", proxy.url, "--full", flag], env={"REDMINE_API_KEY": redmine_server.admin_key}
            )
    assert all(result.exit_code == 0 for result in outputs.values())
    assert f"retry: Redmine GET /issues/{issue}.json: HTTP 503; attempt 2 of 3" in outputs["-v"].stderr
    assert outputs["--quiet"].stdout == "" and outputs["--quiet"].stderr == ""
    assert redmine_server.admin_key not in outputs["-v"].output


@pytest.mark.s3
def test_verbose_says_which_s3_request_failed_and_why(
    s3_server: S3Server, s3_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in DUMMY_CREDENTIALS.items():
        monkeypatch.setenv(name.upper(), value)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    write_ticket(tmp_path / "out", 1)

    def first_put_of_the_document_fails(method: str, path: str, seen: int) -> Fault:
        return Fault.HTTP_503 if method == "PUT" and path.endswith("/1.md") and seen == 0 else Fault.NONE

    with FaultProxy(s3_server.endpoint_url, decide=first_put_of_the_document_fails) as proxy:
        result = runner.invoke(
            app, ["upload", "out", f"s3://{s3_server.bucket}/{s3_prefix}", "--endpoint-url", proxy.url, "-v"]
        )
    assert result.exit_code == 0, result.output
    assert "retry: S3 PutObject: HTTP 503" in result.stderr and "(attempt 1)" in result.stderr


def test_quiet_prints_nothing_on_success_but_keeps_json_and_errors(tmp_path: Path) -> None:
    quiet = runner.invoke(app, ["transform", str(FIXTURES), "--out", "out", "-q"])
    as_json = runner.invoke(app, ["transform", str(FIXTURES), "--out", "out", "-q", "--json"])
    failing = runner.invoke(app, ["transform", str(tmp_path / "missing"), "--out", "out", "-q"])
    assert quiet.exit_code == 0 and quiet.stdout == "" and quiet.stderr == ""
    assert json.loads(as_json.stdout)["ok"] is True
    assert failing.exit_code == 2 and failing.stderr.startswith("error: ")


def test_every_json_report_carries_ok_and_no_progress_bar_reaches_a_log(tmp_path: Path) -> None:
    for ticket_id in range(1, 40):
        write_ticket(tmp_path / "docs", ticket_id)
    reports = {
        "transform": runner.invoke(app, ["transform", str(FIXTURES), "--out", "out", "--json"]),
        "transform --check": runner.invoke(app, ["transform", str(FIXTURES), "--out", "fresh", "--check", "--json"]),
        "upload": runner.invoke(app, ["upload", "docs", "published", "--json"]),
    }
    assert json.loads(reports["transform"].stdout)["ok"] is True
    assert json.loads(reports["transform --check"].stdout)["ok"] is False  # it differs: exit 1
    assert json.loads(reports["upload"].stdout)["ok"] is True
    plain = runner.invoke(app, ["upload", "docs", "again"])
    assert plain.exit_code == 0 and "━" not in plain.stderr and plain.stderr == ""


# --------------------------------------------------------------------------------------------------
# Imports


def test_an_input_that_fails_while_the_rest_is_done_is_failed_not_error(tmp_path: Path) -> None:
    """docs/operations.md: `error: …` ends a run with 2 and nothing done; one document or line that could
    not be read, the others done, is `failed: …` with exit code 1, as for transform and chunk."""
    documents = tmp_path / "documents"
    documents.mkdir()
    (documents / "1.md").write_text("# チケット #1: a\n\n## 説明\n\n> チケット #1: a\n\ntext\n", encoding="utf-8")
    (documents / "2.md").write_bytes(b"# \xff\n")
    good_case = (FIXTURES / "eval" / "cases.jsonl").read_text(encoding="utf-8").splitlines()[0]
    (tmp_path / "cases.jsonl").write_text(good_case + "\n{bad\n", encoding="utf-8")
    (tmp_path / "answers.jsonl").write_text('{"text": "#12345"}\n{bad\n', encoding="utf-8")
    retrieval = str(FIXTURES / "eval" / "retrieval-chunks.json")
    for command in (
        ["stats", str(documents), "--tokenizer", "approx", "--lengths", "none"],
        ["eval", str(tmp_path / "cases.jsonl")],
        ["verify", "-r", retrieval, "-a", str(tmp_path / "answers.jsonl")],
    ):
        result = runner.invoke(app, command)
        problems = [line for line in result.stderr.splitlines() if line.split(":")[0] in ("error", "failed")]
        assert result.exit_code == 1 and problems, (command, result.stderr)
        assert all(line.startswith("failed: ") for line in problems), (command, problems)


def test_stats_and_transform_load_no_redmine_client_and_the_source_names_are_the_modules_own() -> None:
    """Reading a snapshot needs a module of anchorkit.source, not the Redmine client and requests (the
    package's names are imported when first asked for)."""
    script = (
        "import sys\n"
        "import anchorkit.audit, anchorkit.render.transform\n"
        "client = ('requests', 'anchorkit.source.redmine', 'anchorkit.source.pull')\n"
        "print(sorted(m for m in client if m in sys.modules))\n"
        "import anchorkit.source as source\n"
        "from importlib import import_module\n"
        "print(all(getattr(source, name) is getattr(import_module(f'anchorkit.source.{module}'), name)"
        " for name, module in source._EXPORTS.items()) and sorted(source._EXPORTS) == sorted(source.__all__))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n") == ["[]", "True", ""]


def test_the_cli_imports_without_tiktoken_rapidfuzz_or_boto3_loaded(tmp_path: Path) -> None:
    """The heavy parts load with the commands that use them; a machine without them can still run the rest
    (transform counts with tiktoken unless asked for the approximation)."""
    script = (
        "import sys\n"
        "class Missing:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('tiktoken', 'rapidfuzz'):\n"
        "            raise ImportError(name + ' is not installed here')\n"
        "sys.meta_path.insert(0, Missing())\n"
        "from anchorkit.cli import app\n"
        "print(sorted(m for m in ('tiktoken', 'rapidfuzz', 'boto3') if m in sys.modules))\n"
        "sys.argv = ['anchorkit', 'transform', sys.argv[1], '--out', sys.argv[2], '--tokenizer', 'approx', '-q']\n"
        "app()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(FIXTURES), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert len(list((tmp_path / "out").glob("*.md"))) == 34


def test_no_module_imports_fcntl_at_the_top() -> None:
    """fcntl is POSIX only: the locks import it where they take it, so the CLI loads without it."""
    for path in sorted((REPO / "anchorkit").rglob("*.py")):
        top_level = ast.parse(path.read_text(encoding="utf-8")).body
        imported = {alias.name for node in top_level if isinstance(node, ast.Import) for alias in node.names}
        imported |= {node.module or "" for node in top_level if isinstance(node, ast.ImportFrom)}
        assert "fcntl" not in imported, path
