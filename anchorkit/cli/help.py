"""``--help`` as a person reads it, for every command and group: real metavars (``--out DIR``,
``--layout flat|by-project``, ``SNAPSHOT``), no type on a flag, and two columns, the option and what it
does, so that the description gets the width of the terminal.

typer's own layout spends six columns on each option (long name, short name, their negative forms,
the type, the help); at 120 columns that left the help 37 characters. Here the names and the metavar
share one column, at most :data:`NAMES_WIDTH` wide (longer entries wrap at their spaces), and the
help takes the rest. The option's environment variables, default (the config file's value when it
sets one) and bounds follow its help on a line of their own. :func:`metavar_of` is also what the generated
reference tables use (``scripts/reference_tables.py``).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
from rich.console import Console, Group
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from typer._click.exceptions import UsageError as ClickUsageError  # typer vendors click and re-exports none of it

from anchorkit.cli.options import PER_INVOCATION
from anchorkit.cli.output import PipeConsole
from anchorkit.settings import SETTINGS_BY_NAME, Setting

# ctx.meta: what is wrong with the command line's first empty argument, if it has one (the group reads the
# whole line: cli/app.py's empty_argument); the command refuses it with its own usage line.
EMPTY_ARGUMENT = "anchorkit.empty_argument"
NAMES_WIDTH = 32  # the option column's widest; the help column gets everything else
# The metavar of an option that declares none, by the type of its value.
METAVARS_BY_TYPE: dict[Any, str] = {int: "N", float: "NUMBER", str: "TEXT", Path: "PATH"}
OPTION, METAVAR, DETAIL = "bold cyan", "yellow", "dim"


def setting_of(param: Any) -> Setting | None:
    """The catalogue's entry behind a parameter, if it is a setting (-v, --json … are not)."""
    return None if param.name in PER_INVOCATION else SETTINGS_BY_NAME.get(param.name or "")


def metavar_of(param: Any) -> str:
    """What stands for the value: the declared metavar, else the choices (``flat|by-project``), else the
    type's (``N``, ``TEXT`` …); "" for a flag."""
    if getattr(param, "is_flag", False):
        return ""
    if param.metavar:
        return str(param.metavar)
    setting = setting_of(param)
    descriptor = param.type_descriptor
    choices = descriptor.choices if descriptor.is_choice else setting.choices if setting else None
    if choices:
        return "|".join(str(choice) for choice in choices)
    return METAVARS_BY_TYPE.get(descriptor.annotation, "VALUE")


def option_names(param: Any) -> str:
    """``-o, --out DIR``, ``--anchor-basic-info / --no-anchor-basic-info``, ``SNAPSHOT``."""
    if param.param_type_name == "argument":
        return metavar_of(param)
    names = ", ".join(sorted(param.opts, key=lambda name: name.startswith("--")))
    names += "".join(f" / {name}" for name in param.secondary_opts)
    metavar = metavar_of(param)
    return f"{names} {metavar}" if metavar else names


def default_value(param: Any, ctx: Any, command: str) -> Any:
    """The value a parameter takes when not given: the config file's (click's default_map), else its
    default; where it has none (sync, whose settings are resolved later), the catalogue's."""
    resilient, ctx.resilient_parsing = ctx.resilient_parsing, True
    try:
        value = param.get_default(ctx, call=False)
    finally:
        ctx.resilient_parsing = resilient
    setting = setting_of(param)
    return setting.default_for(command) if value is None and setting is not None else value


def default_text(param: Any, ctx: Any, command: str) -> str | None:
    """The default as a person would type it; None when there is none to show."""
    value = default_value(param, ctx, command)
    if value is None or value == [] or value is ...:
        return None
    if isinstance(value, bool):
        if param.secondary_opts:
            return param.opts[0] if value else param.secondary_opts[0]
        return "on" if value else None
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value)


def bounds_text(param: Any) -> str | None:
    """``1 to 64``, ``at least 1``; a lower bound of 0 goes without saying for a count."""
    low, high = getattr(param, "min", None), getattr(param, "max", None)
    if low is not None and high is not None:
        return f"{low:g} to {high:g}"
    if high is not None:
        return f"at most {high:g}"
    if low is not None and low != 0:
        return f"at least {low:g}"
    return None


def details(param: Any, ctx: Any, command: str) -> list[str]:
    """What follows the help: environment variables, default, bounds, required (unless the config file
    gives it a default)."""
    shown: list[str] = []
    setting = setting_of(param)
    if setting is not None:
        shown.append(f"[env var: {', '.join(setting.env_names)}]")
    default = default_text(param, ctx, command)
    if default is not None:
        shown.append(f"[default: {default}]")
    bounds = bounds_text(param)
    if bounds:
        shown.append(f"[{bounds}]")
    if param.required and default is None:
        shown.append("[required]")
    return shown


def paragraphs(text: str) -> Iterator[Text]:
    """A docstring's paragraphs: prose joined into one line for rich to wrap to the terminal, indented
    blocks (the examples) kept line for line."""
    for block in inspect.cleandoc(text).split("\n\n"):
        lines = block.splitlines()
        if all(line.startswith(" ") for line in lines):
            yield Text("\n".join(lines), no_wrap=True)
        else:
            yield Text(" ".join(line.strip() for line in lines))


def command_name(ctx: Any) -> str:
    """``transform``, ``state show``: the command path without the program's name."""
    return " ".join(ctx.command_path.split()[1:])


def options_panel(title: str, params: list[Any], ctx: Any) -> Panel:
    table = Table.grid(padding=(0, 2), expand=True)
    table.add_column(max_width=NAMES_WIDTH, overflow="fold")
    table.add_column(ratio=1, overflow="fold")
    command = command_name(ctx)
    for param in params:
        names = Text(option_names(param), style=OPTION)
        metavar = metavar_of(param)
        if metavar and param.param_type_name == "option":
            names.stylize(METAVAR, len(names) - len(metavar))
        described = Text(param.help or "")
        shown = details(param, ctx, command)
        if shown:
            described.append(("\n" if param.help else "") + " ".join(shown), style=DETAIL)
        table.add_row(names, described)
    return Panel(table, title=title, title_align="left", border_style="dim")


def commands_panel(group: Any, ctx: Any) -> Panel:
    table = Table.grid(padding=(0, 2), expand=True)
    table.add_column(style=OPTION, no_wrap=True)
    table.add_column(ratio=1)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is not None and not command.hidden:
            table.add_row(name, next(paragraphs(command.help or ""), Text("")))
    return Panel(table, title="Commands", title_align="left", border_style="dim")


def print_paragraph(console: Console, paragraph: Text) -> None:
    """A paragraph of a command's text: prose wraps to the terminal's width; an example (a ``no_wrap``
    block) is printed whole, as long as it is, for the terminal to wrap: cut at 80 columns it could not
    be copied and run."""
    if not paragraph.no_wrap:
        console.print(Padding(paragraph, (0, 1, 1, 1)))
        return
    for line in paragraph.split():
        console.print(Text(" ") + line, soft_wrap=True)
    console.print()


def print_help(command: Any, ctx: Any) -> None:
    """Usage, the command's text, its arguments and options by panel, its commands (a group), the epilog."""
    console = PipeConsole(highlight=False)
    console.print(Padding(Text.assemble(("Usage: ", "bold"), command.get_usage(ctx).removeprefix("Usage: ")), 1))
    for paragraph in paragraphs(command.help or ""):
        print_paragraph(console, paragraph)
    parts: list[Any] = []
    panels: dict[str, list[Any]] = {"Arguments": [], "Options": []}
    for param in command.get_params(ctx):
        if not getattr(param, "hidden", False):
            default_panel = "Arguments" if param.param_type_name == "argument" else "Options"
            panels.setdefault(getattr(param, "rich_help_panel", None) or default_panel, []).append(param)
    parts += [options_panel(title, params, ctx) for title, params in panels.items() if params]
    if isinstance(command, typer.core.TyperGroup):
        parts.append(commands_panel(command, ctx))
    if command.epilog:
        parts += [Padding(paragraph, 1) for paragraph in paragraphs(command.epilog)]
    console.print(Group(*parts))


class HelpCommand(typer.core.TyperCommand):
    """A command whose --help and usage line are the ones above, and whose usage errors show that line."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if (empty := ctx.meta.get(EMPTY_ARGUMENT)) is not None:
            raise ClickUsageError(empty, ctx)
        return super().parse_args(ctx, args)

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        """``[OPTIONS] SNAPSHOT`` (typer writes ``{snapshot}``); an optional argument in brackets."""
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                name = metavar_of(param) + ("..." if param.nargs != 1 else "")
                pieces.append(name if param.required else f"[{name}]")
        return pieces

    def format_help(self, ctx: Any, formatter: Any) -> None:
        print_help(self, ctx)


class HelpGroup(typer.core.TyperGroup):
    """A group whose --help is the one above."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        print_help(self, ctx)
