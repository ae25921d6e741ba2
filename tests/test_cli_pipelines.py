"""The command line in pipelines and scripts: the product alone on stdout (`verify … > filtered.txt`),
-q silent but for errors on every command, --json answering every error with {"ok": false, …} and
carrying "ok" otherwise, eval naming the gate that failed, and progress bars on a terminal only."""

from __future__ import annotations

import io
import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from support.folders import write_ticket
from support.redmine_server import RedmineAdmin, RedmineServer
from typer.testing import CliRunner

from anchorkit.cli import app, output

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
EVAL = FIXTURES / "eval"
runner = CliRunner()


pytestmark = pytest.mark.usefixtures("clean_cli_environment")


def invoke(*args: str | Path, env: dict[str, str] | None = None, stdin: str | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args], env=env, input=stdin)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


# --------------------------------------------------------------------------------------------------
# verify: the product on stdout, the rest on stderr


def test_verify_writes_the_filtered_answer_alone_to_stdout() -> None:
    code, out, err = invoke("verify", "-r", EVAL / "retrieval-bedrock.json", "-a", EVAL / "answer-claims.json")
    assert code == 0
    assert out.splitlines() == [
        "大阪支社の VPN 切断はルーターのファームウェア更新で解消しました。",
        "1. チケット #12345 の VPN 切断は、ルーターのファームウェア更新で解消しました。 [kb-12345-07]",
        "   > ルーターのファームウェア更新で解消しました。",
        "2. ファームウェアは Rev.15.02.31 に更新され、作業は #12352 で管理されました。 [kb-12352-02]",
        "   > Rev.15.02.31 へ更新した後、VPN 切断は再発していない。",
    ]
    assert err.splitlines()[-1] == "verify: grounding score 0.38, 2 critical, 1 warning, valid ids: #12345 #12352"
    assert "critical phantom_source_id (claim 4, citation 1)" in err and "dropped claim 4: " in err


def test_verify_json_is_the_only_thing_on_stdout_and_quiet_keeps_only_the_product() -> None:
    args = ("verify", "-r", EVAL / "retrieval-chunks.json", "-a", EVAL / "answer.txt")
    code, out, err = invoke(*args, "--json")
    assert code == 0 and json.loads(out)["ok"] is False and err == ""  # a phantom: a report, not an error
    code, out, err = invoke(*args, "-q")
    assert code == 0 and err == ""
    assert out.endswith("在宅勤務の切断は [unverified] と同じ原因です。\n")


# --------------------------------------------------------------------------------------------------
# -q: nothing but errors, on every command


def quiet_runs(tmp_path: Path) -> dict[str, tuple[str | Path, ...]]:
    write_ticket(tmp_path / "docs", 1)
    (tmp_path / "state").mkdir()  # a state no run has committed to yet
    return {
        "transform": ("transform", FIXTURES, "--out", tmp_path / "out"),
        "upload": ("upload", tmp_path / "docs", tmp_path / "published"),
        "stats": ("stats", FIXTURES, "--tokenizer", "approx", "--chunking", "fixed"),
        "eval": ("eval", EVAL / "cases.jsonl"),
        "inject": ("inject", EVAL / "retrieval-bedrock.json", "--out", tmp_path / "anchored.json"),
        "state show": ("state", "show", tmp_path / "state"),
    }


@pytest.mark.parametrize("command", ["transform", "upload", "stats", "eval", "inject", "state show"])
def test_quiet_prints_nothing_when_all_is_well(tmp_path: Path, command: str) -> None:
    args = quiet_runs(tmp_path)[command]
    loud = invoke(*args)
    assert loud[0] == 0 and loud[1] != ""  # the summary, without -q
    assert invoke(*args, "-q") == (0, "", "")


def test_quiet_still_says_why_eval_and_stats_fail(tmp_path: Path) -> None:
    code, out, err = invoke("eval", EVAL / "cases.jsonl", "--max-phantom-rate", "0.1", "-q")
    assert (code, out) == (1, "") and err == "gate failed: phantom rate 0.40 is over --max-phantom-rate 0.1\n"
    code, out, err = invoke("stats", tmp_path / "nothing-here", "-q")
    assert (code, out) == (2, "") and err.startswith("error: ")


def test_inject_quiet_writes_the_retrieval_and_no_summary() -> None:
    code, out, err = invoke("inject", EVAL / "retrieval-bedrock.json", "-q")
    assert code == 0 and err == ""
    assert "> チケット #12345: " in json.dumps(json.loads(out), ensure_ascii=False)
    code, _, err = invoke("inject", EVAL / "retrieval-bedrock.json")
    assert code == 0 and err.splitlines()[-1].startswith("inject: ")


@pytest.mark.redmine
def test_sync_quiet_prints_nothing(tmp_path: Path, redmine_server: RedmineServer, redmine_admin: RedmineAdmin) -> None:
    project = redmine_admin.create_project()
    redmine_admin.create_issue(project["id"], "VPN接続が不安定になる")
    args = ["sync", tmp_path / "published", "--url", redmine_server.url, "--project", project["identifier"]]
    args += ["--snapshot", tmp_path / "snap", "--out", tmp_path / "out"]
    code, out, err = invoke(*args, "-q", env={"REDMINE_API_KEY": redmine_server.admin_key})
    assert (code, out, err) == (0, "", "")
    assert len(list((tmp_path / "published").glob("*.md"))) == 1


# --------------------------------------------------------------------------------------------------
# --json: "ok" everywhere, errors answered in JSON by every command


def failing_runs(tmp_path: Path) -> dict[str, tuple[str | Path, ...]]:
    missing = tmp_path / "missing"
    unreachable = ("--url", "http://127.0.0.1:9", "--retries", "1", "--snapshot", tmp_path / "snap")
    (tmp_path / "a-file").write_text("not a folder", encoding="utf-8")
    return {
        "transform": ("transform", missing, "--out", tmp_path / "out"),
        "upload": ("upload", missing, tmp_path / "published"),
        "pull": ("pull", *unreachable),
        "sync": ("sync", tmp_path / "published", *unreachable, "--out", tmp_path / "out"),
        "stats": ("stats", missing),
        "verify": ("verify", "-r", missing, "-a", EVAL / "answer.txt"),
        "eval": ("eval", missing),
        "inject": ("inject", missing),
        "state show": ("state", "show", tmp_path / "a-file"),
        "state break-lease": ("state", "break-lease", tmp_path / "state", "--holder", "h"),
    }


@pytest.mark.parametrize("command", list(failing_runs(Path("/"))))
def test_with_json_every_command_answers_an_error_in_json(tmp_path: Path, command: str) -> None:
    code, out, err = invoke(*failing_runs(tmp_path)[command], "--json", env={"REDMINE_API_KEY": "k"})
    answer = json.loads(out)
    assert code == 2 and answer == {"ok": False, "error": answer["error"], "exit_code": 2}
    assert err.startswith("error: ") and answer["error"] in err


@pytest.mark.parametrize("order", ["json first", "json last"])
def test_a_bad_option_value_is_answered_in_json_too(order: str) -> None:
    args = ["--json", "--lang", "de"] if order == "json first" else ["--lang", "de", "--json"]
    code, out, err = invoke("transform", FIXTURES, "--out", "out", *args)
    assert code == 2 and "'de' is not one of 'ja', 'en'" in err
    answer = json.loads(out)
    assert answer["ok"] is False and answer["exit_code"] == 2 and "--lang" in answer["error"]


def test_inject_and_state_show_json_carry_ok(tmp_path: Path) -> None:
    code, out, _ = invoke("inject", EVAL / "retrieval-bedrock.json", "--out", tmp_path / "a.json", "--json")
    assert code == 0 and json.loads(out)["ok"] is True
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps([{"id": "x", "text": "本文", "uri": "https://wiki/page"}]), encoding="utf-8")
    code, out, _ = invoke("inject", unknown, "--out", tmp_path / "b.json", "--json", "--strict")
    assert code == 1 and json.loads(out)["ok"] is False  # a chunk got no anchor: the exit code and "ok" agree
    (tmp_path / "state").mkdir()  # no run has committed to it yet
    code, out, _ = invoke("state", "show", tmp_path / "state", "--json")
    assert code == 0 and json.loads(out)["ok"] is True and json.loads(out)["exists"] is False


# --------------------------------------------------------------------------------------------------
# eval names the gate that failed


def test_eval_says_which_gate_failed_on_stderr_and_in_the_json() -> None:
    gates = ("--min-grounding", "0.9", "--max-phantom-rate", "0.5", "--strict")
    code, out, err = invoke("eval", EVAL / "cases.jsonl", *gates)
    assert code == 1 and out.splitlines()[-1].startswith("eval: 5 cases")
    assert err.splitlines() == [
        "gate failed: mean grounding score 0.70 is under --min-grounding 0.9",
        "gate failed: --strict: 2 of 5 cases have a critical finding",
    ]
    code, out, _ = invoke("eval", EVAL / "cases.jsonl", *gates, "--json")
    report = json.loads(out)
    assert code == 1 and report["ok"] is False
    assert report["gates"] == {
        "min_grounding": 0.9,
        "max_phantom_rate": 0.5,  # met: 0.40
        "strict": True,
        "failures": [
            "mean grounding score 0.70 is under --min-grounding 0.9",
            "--strict: 2 of 5 cases have a critical finding",
        ],
    }
    passing = json.loads(invoke("eval", EVAL / "cases.jsonl", "--json")[1])
    assert passing["ok"] is True and passing["gates"]["failures"] == []


# --------------------------------------------------------------------------------------------------
# Progress: a bar with counts and an ETA on a terminal, nothing in a log


def run_with_stderr_on_a_terminal(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """The command in a subprocess whose stderr is a pseudo-terminal; (exit code, stdout, terminal output)."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "anchorkit", *args], stdout=subprocess.PIPE, stderr=terminal, env=env, text=True
    )
    os.close(terminal)
    shown = b""
    while True:
        ready, _, _ = select.select([controller], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the terminal closed: the process is done
            break
        if not chunk:
            break
        shown += chunk
    stdout = process.stdout.read() if process.stdout else ""
    os.close(controller)
    return process.wait(timeout=60), stdout, shown.decode("utf-8", "replace")


def test_transform_shows_a_bar_on_a_terminal_and_nothing_in_ci_or_a_pipe(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key not in ("CI", "FORCE_COLOR", "TTY_COMPATIBLE")}
    env |= {"TERM": "xterm", "COLUMNS": "120", "NO_COLOR": "1"}
    args = ["transform", str(FIXTURES), "--tokenizer", "approx", "--out", str(tmp_path / "out")]
    code, stdout, terminal = run_with_stderr_on_a_terminal(args, env)
    assert code == 0 and stdout.startswith("transform: 34 tickets")
    # 35 issue files (one of them private, left out): the bar counts what was read.
    assert "rendering" in terminal and "35/35 tickets" in terminal and "━" in terminal and "ETA" in terminal
    in_ci = run_with_stderr_on_a_terminal([*args[:-1], str(tmp_path / "ci")], env | {"CI": "true"})
    assert in_ci[0] == 0 and in_ci[2] == ""
    piped = subprocess.run([sys.executable, "-m", "anchorkit", *args], capture_output=True, text=True, env=env)
    assert piped.returncode == 0 and piped.stderr == ""


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    """stderr as rich sees a terminal, through the console every bar is drawn on (output.err_console)."""
    monkeypatch.delenv("CI", raising=False)
    shown = io.StringIO()
    monkeypatch.setattr(output, "err_console", Console(file=shown, force_terminal=True, color_system=None, width=120))
    return shown


@pytest.mark.parametrize(
    ("args", "counted"),
    [
        (("stats", FIXTURES, "--tokenizer", "approx", "--chunking", "fixed"), "34/34 documents"),
        (("eval", EVAL / "cases.jsonl"), "5/5 cases"),
        (("transform", FIXTURES, "--out", "out"), "35/35 tickets"),
    ],
)
def test_long_work_counts_on_a_terminal_and_not_with_json_or_quiet(
    terminal: io.StringIO, args: tuple[str | Path, ...], counted: str
) -> None:
    assert invoke(*args)[0] == 0
    assert counted in terminal.getvalue() and "━" in terminal.getvalue()
    terminal.truncate(0)
    assert invoke(*args, "--json")[0] == 0 and invoke(*args, "-q")[0] == 0
    assert terminal.getvalue().strip("\x00") == ""


# --------------------------------------------------------------------------------------------------
# A reader that goes away: `anchorkit … | head` under `set -o pipefail`


def test_a_reader_that_stops_early_fails_the_pipeline_with_141_and_nothing_else() -> None:
    """Most of the chunks were never written: the run must not say 0, but what `cat` says (128 + SIGPIPE),
    with no traceback and no "Exception ignored" on stderr."""
    command = [sys.executable, "-m", "anchorkit", "chunk", str(FIXTURES), "--jsonl", "-", "--jobs", "2"]
    piped = subprocess.run(
        ["bash", "-c", 'set -o pipefail; "$@" | head -c 100', "bash", *command], capture_output=True, timeout=120
    )
    assert (piped.returncode, len(piped.stdout), piped.stderr) == (141, 100, b"")
    whole = subprocess.run(command, capture_output=True, timeout=120)
    assert whole.returncode == 0 and len(whole.stdout) > 65536  # more than a pipe holds: it could not all go


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["transform", "--help"],
        ["transform", str(FIXTURES), "--out", "out", "--check", "--tokenizer", "approx"],  # would exit 1
        ["stats", str(FIXTURES), "--json", "--tokenizer", "approx"],
        ["verify", "-r", str(EVAL / "retrieval-bedrock.json"), "-a", str(EVAL / "answer.txt")],
        ["inject", str(EVAL / "retrieval-bedrock.json")],
        ["eval", str(EVAL / "cases.jsonl"), "--json"],
    ],
)
def test_every_command_writing_to_a_closed_pipe_stops_quietly_with_141(args: list[str]) -> None:
    reader, writer = os.pipe()
    os.close(reader)  # gone before the first byte: whatever the command writes first fails
    try:
        done = subprocess.run(
            [sys.executable, "-m", "anchorkit", *args], stdout=writer, stderr=subprocess.PIPE, timeout=120
        )
    finally:
        os.close(writer)
    assert (done.returncode, done.stderr) == (141, b"")


def test_a_full_stdout_is_one_error_not_a_traceback() -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "anchorkit", "eval", str(EVAL / "cases.jsonl"), "--json"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert all(line.startswith("error: ") for line in done.stderr.splitlines()), done.stderr
    assert "error: stdout: No space left on device" in done.stderr
