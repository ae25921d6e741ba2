"""The `anchorkit` group: the commands, where their option values come from, and the one place where
errors become exit codes (:class:`AnchorkitGroup`).

Conventions shared by every command:
- exit code 0 = everything done, 1 = something failed (listed) or `--check` found differences,
  2 = usage or setup error, 3 = another run holds the lock, 141 = whoever read stdout stopped reading
  (anchorkit.errors); library errors carry their code and are turned into one line on stderr here;
- every option comes from the command line, else ``ANCHORKIT_<NAME>`` (REDMINE_URL for --url), else
  anchorkit.toml, else the settings catalogue's default (:mod:`anchorkit.settings`);
- `--json` prints one JSON object on stdout instead of the human summary;
- human output goes to stdout through rich, warnings and errors to stderr (:mod:`anchorkit.cli.output`);
- secrets (API keys, AWS credentials) are never printed.

A command's library modules are imported when it runs, so that ``anchorkit --help`` loads none of them.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import typer
from typer._click.exceptions import BadParameter as ClickBadParameter
from typer._click.exceptions import UsageError as ClickUsageError  # typer vendors click and re-exports none of it

from anchorkit import __version__
from anchorkit.cli import chunk, output, pull, state, stats, sync, transform, upload, verify
from anchorkit.cli.help import EMPTY_ARGUMENT, HelpCommand, HelpGroup
from anchorkit.cli.options import PER_INVOCATION
from anchorkit.errors import EXIT_CLOSED_PIPE, EXIT_FAILED, EXIT_LOCKED, EXIT_USAGE, AnchorkitError
from anchorkit.settings import CONFIG_LOCATIONS, SETTINGS_BY_NAME, SYNC, config_values

JSON_OUTPUT = "anchorkit.json_output"  # ctx.meta: the command line asks for --json
# How pydantic, which typer checks typed options with, begins the message of a validator's ValueError.
PYDANTIC_PREFIX = "Value error, "
# What a problem is called on stderr, by the exit code it ends the run with.
PROBLEM_KINDS = {EXIT_FAILED: "failed", EXIT_USAGE: "error", EXIT_LOCKED: "stopped"}
# The help panels of the commands with many options.
PANELLED_COMMANDS = ("sync", "pull")
PANELS = {
    "Redmine (pull)": (
        "url",
        "api_key_file",
        "snapshot",
        "project",
        "full",
        "include_private",
        "concurrency",
        "full_every",
        "refetch_every",
        "watch_moves",
        "overlap",
        "lookups_max_age",
        "timeout",
        "retries",
    ),
    "Documents (transform)": (
        "out",
        "text_format",
        "sidecars",
        "sidecar_schema",
        "layout",
        "lang",
        "label",
        "anchor_basic_info",
        "chunk_tokens",
        "chunks",
        "chunk_overlap",
        "anchor_subject_chars",
        "spacing_anchors",
        "timezone",
        "max_text_bytes",
        "link_issues",
        "tokenizer",
        "tiktoken_file",
    ),
    "Destination (upload)": (
        "delete",
        "max_delete",
        "force",
        "dry_run",
        "list_keys",
        "threads",
        "endpoint_url",
        "region",
        "profile",
        "retry_mode",
        "max_attempts",
        "sse",
        "sse_kms_key_id",
        "start_ingestion",
    ),
    "State (runs without a persistent disk)": ("state", "lease_seconds"),
}
PANEL_OF = {name: panel for panel, names in PANELS.items() for name in names}


def describe_os_error(error: OSError) -> str:
    """``PATH: reason`` (``PATH -> OTHER: reason`` for a rename), as the shell would say it."""
    where = " -> ".join(str(name) for name in (error.filename, error.filename2) if name is not None)
    reason = error.strerror or f"{type(error).__name__}: {error}"
    return f"{where}: {reason}" if where else reason


def s3_error(error: Exception) -> tuple[int, str] | None:
    """An S3 error of botocore's as (exit code, message); None when it is not one (botocore not loaded:
    no command that talks to S3 ran)."""
    if "botocore" not in sys.modules:
        return None
    from botocore.exceptions import BotoCoreError, ClientError

    from anchorkit.publish.aws import as_setup_error, describe_error

    if not isinstance(error, (BotoCoreError, ClientError)):
        return None
    return EXIT_USAGE, str(as_setup_error(error) or f"S3: {describe_error(error)}")


@contextlib.contextmanager
def stdout_settled() -> Iterator[None]:
    """What is still buffered for stdout is flushed here, where its failure can be caught, not by Python at
    exit (which prints "Exception ignored" and exits 120). When whoever reads stdout stopped reading
    (``anchorkit chunk src --jsonl - | head``), the run ends quietly with :data:`EXIT_CLOSED_PIPE` (141, as
    ``cat`` does); stdout that cannot take the rest (a full disk) is a setup error, in one line."""
    try:
        try:
            yield
        finally:
            sys.stdout.flush()
    except OSError as error:  # a BrokenPipeError from the command, or any error of the flush
        # Whatever is still buffered goes nowhere, so that Python's own flush at exit cannot fail.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        if isinstance(error, BrokenPipeError):
            raise typer.Exit(EXIT_CLOSED_PIPE) from None
        output.print_problem(PROBLEM_KINDS[EXIT_USAGE], f"stdout: {describe_os_error(error)}")
        raise typer.Exit(EXIT_USAGE) from None


class AnchorkitGroup(HelpGroup):
    """The one place where errors become exit codes: an :class:`AnchorkitError` ends the command with
    its ``exit_code`` and one line on stderr, never a traceback; so do the everyday errors of the layers
    below (S3 unreachable or misconfigured, a folder that cannot be written), as usage or setup errors;
    and a closed stdout (:func:`stdout_settled`), in a command or in the group's --help."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        apply_option_conventions(self.commands)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        # Read before click parses the command: a usage error (a bad option value) must answer in JSON too.
        ctx.meta[JSON_OUTPUT] = "--json" in args
        ctx.meta[EMPTY_ARGUMENT] = empty_argument(args)
        with stdout_settled():  # --help and --version print here
            return super().parse_args(ctx, args)

    def invoke(self, ctx: Any) -> Any:
        with stdout_settled():
            return self.invoke_reporting_errors(ctx)

    def invoke_reporting_errors(self, ctx: Any) -> Any:
        output.set_verbosity(verbose=False, quiet=False)  # per run: tests invoke many runs in one process
        json_output = ctx.meta.get(JSON_OUTPUT, False)
        try:
            return super().invoke(ctx)
        except ClickUsageError as error:  # click prints it on stderr, as for any command
            if isinstance(error, ClickBadParameter):  # a choice typer checked says "Value error, 'x' is not one of …"
                error.message = error.message.removeprefix(PYDANTIC_PREFIX)
            if json_output:
                output.print_json({"ok": False, "error": error.format_message(), "exit_code": error.exit_code})
            raise
        except AnchorkitError as error:
            code, message = error.exit_code, str(error)
        except BrokenPipeError:
            raise  # not a usage error: stdout_settled
        except OSError as error:
            code, message = EXIT_USAGE, describe_os_error(error)
        except Exception as error:
            described = s3_error(error)
            if described is None:
                raise
            code, message = described
        output.print_problem(PROBLEM_KINDS[code], message)
        if json_output:  # a script reading stdout gets an answer too
            output.print_json({"ok": False, "error": message, "exit_code": code})
        raise typer.Exit(code)


def empty_argument(args: list[str]) -> str | None:
    """What is wrong with the first empty argument, naming it (``--out "$OUT"`` with OUT unset); None if there is
    none. Refused rather than read: a path given as "" is the current folder to Python, where such a run would
    write, upload or delete; and an empty variable counts as unset, so that nothing can mean an empty value."""
    for index, arg in enumerate(args):
        option = args[index - 1] if arg == "" and index and args[index - 1].startswith("-") else None
        if arg.startswith("--") and arg.endswith("="):
            option = arg[:-1]
        elif arg != "":
            continue
        empty = "an argument" if option is None else f"the value of {option}"
        # Said of a path only (an argument is a folder or file: SNAPSHOT, OUT, DEST …): `--label ''` wants a label.
        hint = "; for the current folder, give ." if option is None or names_a_path(option) else ""
        return f"{empty} is empty (an unset variable?){hint}"
    return None


def names_a_path(option: str) -> bool:
    """Whether ``option`` (``--out``, ``-o``) takes a folder, a file or an s3:// URL: any but the settings known
    to hold other text (``--label``, ``--uri-pattern``)."""
    setting = SETTINGS_BY_NAME.get(option.lstrip("-").replace("-", "_"))
    return setting is None or setting.kind is Path or setting.name in CONFIG_LOCATIONS


def command_names(commands: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Every command by its full name (``state show`` for a command of the ``state`` group)."""
    named: dict[str, Any] = {}
    for name, command in commands.items():
        if hasattr(command, "commands"):  # a group
            named |= command_names(command.commands, f"{prefix}{name} ")
        else:
            named[prefix + name] = command
    return named


def apply_option_conventions(commands: Mapping[str, Any]) -> None:
    """Every option (and every argument that is a setting: OUT, DEST, SNAPSHOT …) reads its environment
    variables (but sync's, which sync resolves itself; --help names them for every command: cli/help.py);
    an argument is called by its name in capitals (SNAPSHOT) in usage lines and errors; the options of
    sync and pull are grouped into panels. Done here once rather than on every declaration."""
    for command_name, command in command_names(commands).items():
        for param in command.params:
            is_option = param.param_type_name == "option"
            if not is_option and param.metavar is None:
                param.metavar = str(param.name).upper()
            if command_name in PANELLED_COMMANDS and is_option and param.name in PANEL_OF:
                param.rich_help_panel = PANEL_OF[param.name]
            setting = SETTINGS_BY_NAME.get(param.name or "")
            param.show_envvar = False  # the help names them (cli/help.py); click's errors would print a list
            if param.name not in PER_INVOCATION and setting is not None and command_name != SYNC:
                param.envvar = list(setting.env_names)


EXIT_CODES_HELP = (
    "Exit codes (every command): 0 done · 1 some work failed (listed; the rest was done, nothing written is "
    "corrupt) · 2 usage or setup error (bad option or destination, wrong API key, missing bucket, unwritable "
    "folder: nothing was done) · 3 another run holds the lock (nothing of this run was written) · 141 whoever read "
    "stdout stopped reading (`… | head`; as `cat` says it): the run stopped quietly."
)

app = typer.Typer(
    name="anchorkit",
    help="Anchor every chunk of your Redmine tickets to its ticket ID, publish them for RAG, and prove it.\n\n"
    "Every option comes from the command line, else an ANCHORKIT_<OPTION> variable (REDMINE_URL for --url), "
    "else anchorkit.toml ($ANCHORKIT_CONFIG, else ./anchorkit.toml); each command's --help names the variables.\n\n"
    'With --json every command prints one JSON object on stdout, with "ok"; an error is {"ok": false, "error", '
    '"exit_code"} (and the message on stderr). -q prints nothing but errors and what was asked for (--json, '
    "verify's filtered answer, inject's retrieval).",
    epilog=EXIT_CODES_HELP,
    cls=AnchorkitGroup,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def version_callback(value: bool) -> None:
    if value:
        output.console.print(f"anchorkit {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    ctx: typer.Context,
    version: bool = typer.Option(
        False, "--version", callback=version_callback, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """anchorkit: pull → transform → upload → stats → verify."""
    command = ctx.invoked_subcommand
    group = ctx.command
    if command is None or command == SYNC or not isinstance(group, AnchorkitGroup):
        return  # sync reads the config file itself (and reports where each value came from)
    # The config file's values as the commands' defaults (click: flag > envvar > default_map > default).
    chosen = group.commands[command]
    if hasattr(chosen, "commands"):  # the state group
        ctx.default_map = {command: {name: config_values(f"{command} {name}") for name in chosen.commands}}
    else:
        ctx.default_map = {command: config_values(command)}


app.command("transform", cls=HelpCommand)(transform.transform_command)
app.command("chunk", cls=HelpCommand)(chunk.chunk_command)
app.command("upload", cls=HelpCommand)(upload.upload_command)
app.command("pull", cls=HelpCommand)(pull.pull_command)
app.command("verify", cls=HelpCommand)(verify.verify_command)
app.command("eval", cls=HelpCommand)(verify.eval_command)
app.command("inject", cls=HelpCommand)(verify.inject_command)
app.command("stats", cls=HelpCommand)(stats.stats_command)
app.command("sync", cls=HelpCommand)(sync.sync_command)
app.add_typer(state.state_app, name="state")
