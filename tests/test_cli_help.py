"""--help a person can read at 120 columns: the usage line and the options name their values as people
write them (SNAPSHOT, --out DIR, --layout flat|by-project), a flag shows no type, the description gets
most of the width, every command has an example, and nothing in the help is an internal word or points
to a page that is not there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from anchorkit import settings
from anchorkit.cli import app
from anchorkit.cli.app import command_names

REPO = Path(__file__).resolve().parent.parent
runner = CliRunner()
COMMANDS_BY_NAME = command_names(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
COMMANDS = list(COMMANDS_BY_NAME)
EVERY_HELP = [[], ["state"], *[command.split() for command in COMMANDS]]


def help_at(columns: int, *command: str) -> str:
    result = runner.invoke(app, [*command, "--help"], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return result.stdout


def flat(text: str) -> str:
    return " ".join(text.replace("│", " ").split())


def test_the_commands_in_these_tests_are_every_command() -> None:
    assert sorted(COMMANDS) == sorted(settings.COMMANDS)


@pytest.mark.parametrize("command", EVERY_HELP, ids=lambda c: " ".join(c) or "anchorkit")
def test_no_option_shows_a_python_type_and_no_flag_a_value(command: list[str]) -> None:
    shown = help_at(120, *command)
    usage = next(line for line in shown.splitlines() if "Usage:" in line)
    assert "{" not in usage and "<" not in usage
    for python_type in ("<bool>", "<str>", "<int", "<float", "<path>", "<list"):
        assert python_type not in shown
    assert re.search(r"--help\s+Show this message", shown)


def test_arguments_are_named_in_capitals_in_usage_lines_and_errors() -> None:
    usage = {command: flat(help_at(120, *command.split())).removeprefix("Usage: ") for command in COMMANDS}
    assert usage["transform"].startswith("anchorkit transform [OPTIONS] SNAPSHOT ")
    assert usage["upload"].startswith("anchorkit upload [OPTIONS] OUT DEST ")
    assert usage["sync"].startswith("anchorkit sync [OPTIONS] [DEST] ")
    assert usage["stats"].startswith("anchorkit stats [OPTIONS] PATH ")
    assert usage["eval"].startswith("anchorkit eval [OPTIONS] CASES ")
    assert usage["inject"].startswith("anchorkit inject [OPTIONS] RETRIEVAL ")
    assert usage["state show"].startswith("anchorkit state show [OPTIONS] STATE ")
    missing = runner.invoke(app, ["transform"])
    assert missing.exit_code == 2
    assert "Usage: anchorkit transform [OPTIONS] SNAPSHOT" in missing.stderr
    assert "Missing argument 'SNAPSHOT'" in missing.stderr


@pytest.mark.parametrize(
    ("command", "written"),
    [
        ("transform", ["-o, --out DIR", "--chunk-tokens N", "--timezone TZ", "--tiktoken-file FILE", "-j, --jobs N"]),
        ("transform", ["--link-issues URL", "--anchor-basic-info /", "--no-anchor-basic-info"]),
        ("pull", ["--url URL", "--snapshot DIR", "--api-key-file FILE", "--timeout SECONDS", "--project PROJECT"]),
        ("pull", ["--state LOCATION", "--endpoint-url URL"]),
        ("upload", ["OUT", "DEST", "--max-delete N|P%", "--start-ingestion", "KB_ID:DATA_SOURCE_ID", "--threads N"]),
        ("sync", ["--config FILE", "--out DIR", "--delete / --no-delete", "--sidecars / --no-sidecars"]),
        ("stats", ["--chunking SPEC", "--html FILE", "--fail-under-coverage PERCENT", "--lengths N,N,..."]),
        ("verify", ["-r, --retrieval FILE", "-a, --answer FILE", "--html FILE", "--uri-pattern REGEX"]),
        ("eval", ["CASES", "--min-grounding SCORE", "--max-phantom-rate RATE", "--on-empty pass|block"]),
        ("inject", ["RETRIEVAL", "-o, --out FILE", "--label TEXT"]),
    ],
)
def test_values_are_named_as_people_write_them(command: str, written: list[str]) -> None:
    shown = flat(help_at(200, *command.split()))
    for text in written:
        assert text in shown


def description_width(shown: str) -> int:
    """The width of the help column: where `--help`'s text starts to the panel's right edge."""
    line = next(line for line in shown.splitlines() if line.startswith("│ --help "))
    return line.rindex("│") - line.index("Show this message") - 1


@pytest.mark.parametrize("command", COMMANDS)
def test_the_description_gets_most_of_120_columns(command: str) -> None:
    """typer's layout left transform's help 37 columns at 120 (six columns per option)."""
    assert description_width(help_at(120, *command.split())) >= 80


def test_transform_help_fits_in_half_the_lines_it_took() -> None:
    """132 lines at 120 columns before: the long option help now lives in docs/reference.md."""
    assert len(help_at(120, "transform").splitlines()) <= 72


def test_the_environment_default_and_bounds_follow_each_option() -> None:
    shown = flat(help_at(200, "pull"))
    assert "Issues fetched at the same time. [env var: ANCHORKIT_CONCURRENCY] [default: 4] [1 to 64]" in shown
    # sync resolves its options itself; its help shows the catalogue's defaults all the same.
    synced = flat(help_at(200, "sync"))
    assert "Parallel requests. [env var: ANCHORKIT_THREADS] [default: 16] [1 to 256]" in synced
    assert "[env var: ANCHORKIT_DELETE] [default: --no-delete]" in synced


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_an_example(command: str) -> None:
    shown = flat(help_at(200, *command.split()))
    assert "Example:" in shown and f"anchorkit {command} " in shown.split("Example:")[1]


@pytest.mark.parametrize("command", COMMANDS)
def test_examples_are_printed_whole_in_80_columns(command: str) -> None:
    """Piped to a pager or read in an 80-column terminal, an example cut at the edge could not be run."""
    declared = COMMANDS_BY_NAME[command].help or ""
    examples = [line.strip() for line in declared.splitlines() if line.strip().startswith(f"anchorkit {command} ")]
    assert examples
    shown = [line.strip() for line in help_at(80, *command.split()).splitlines()]
    for example in examples:
        assert example in shown


@pytest.mark.parametrize("command", EVERY_HELP, ids=lambda c: " ".join(c) or "anchorkit")
def test_help_says_what_a_thing_is_and_points_to_pages_that_exist(command: list[str]) -> None:
    shown = flat(help_at(200, *command))
    assert not re.search(r"\bseed\b|the lead|README", shown, re.I)
    for page in re.findall(r"docs/[\w-]+\.md", shown):
        assert (REPO / page).is_file(), page
