"""The option tables of the docs, written from the code (``make docs``; ``--check`` in CI and in
tests/test_docs_options.py).

A table is marked by the line before it::

    <!-- options: transform -->          every option of `anchorkit transform`, in --help's order
    <!-- options: transform (some) -->   only the options the table lists (a page about a few of them)

and its first three columns are ``option | default | meaning``. The option cell (the names and the
metavar, as --help writes them) and the default cell (the settings catalogue's default, as --help shows
it without a config file) are written from the command line's declarations; the meaning is the page's
own words, kept, or for an option the table lacks, its --help. A row naming an option the command does
not have is an error, and so is a default cell that quotes a number where the command has no default.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

from anchorkit.cli import app
from anchorkit.cli.help import default_text, default_value, option_names

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
MARKER = re.compile(r"^<!-- options: (?P<command>[a-z -]+?)(?P<some> \(some\))? -->$")
CELL_SEPARATOR = re.compile(r"(?<!\\)\|")
NO_DEFAULT = "—"


class TableError(ValueError):
    """A marked table that the code contradicts (an option the command does not have, a made-up default)."""


def command_context(command: str) -> tuple[Any, typer.Context]:
    """The click command ``transform`` or ``state show`` and a context for it (no config file, no environment)."""
    root = typer.main.get_command(app)
    ctx = typer.Context(root, info_name="anchorkit")
    found: Any = root
    for name in command.split():
        found = found.commands[name]
        ctx = typer.Context(found, parent=ctx, info_name=name)
    return found, ctx


def key_of(param: Any) -> str:
    """A row's key: the option's first long name, or the argument's metavar."""
    if param.param_type_name == "argument":
        return str(param.metavar or param.name.upper())
    return next(name for name in param.opts if name.startswith("--"))


def row_key(option_cell: str) -> str:
    """The key of an option cell as a page wrote it: its first ``--name``, else its first word in capitals."""
    long_name = re.search(r"--[a-z][a-z-]*", option_cell)
    if long_name:
        return long_name[0]
    argument = re.search(r"\b[A-Z][A-Z_]*\b", option_cell)
    if argument is None:
        raise TableError(f"cannot tell which option {option_cell!r} is")
    return argument[0]


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in CELL_SEPARATOR.split(line.strip())[1:-1]]


def escaped(text: str) -> str:
    return text.replace("|", "\\|")


def as_cell(help_text: str) -> str:
    """An option's --help as a table's meaning (a cell, so without its full stop)."""
    return escaped(help_text.removesuffix("."))


def default_cell(param: Any, ctx: typer.Context, command: str, written: str | None) -> str:
    value = default_value(param, ctx, command)
    if param.required and value is None:
        return "required"
    if isinstance(value, bool):
        return "on" if value else "off"
    text = default_text(param, ctx, command)
    if text is not None:
        return f"`{escaped(text)}`"
    if written is None:
        return NO_DEFAULT
    if re.search(r"\d", written):
        raise TableError(f"{command} {key_of(param)}: no default, but the page quotes one: {written!r}")
    return written  # the page says what having none means ("from --lang", "stdout", "transform's" …)


def rewrite_table(command: str, some: bool, rows: list[str]) -> list[str]:
    """The table's rows as the code says (its header and separator are the caller's)."""
    found, ctx = command_context(command)
    params = {key_of(param): param for param in found.params}
    written = {row_key(cells(row)[0]): cells(row) for row in rows}
    unknown = sorted(set(written) - set(params))
    if unknown:
        raise TableError(f"`anchorkit {command}` has no {', '.join(unknown)}")
    keys = [key for key in params if key in written] if some else list(params)
    lines = []
    for key in keys:
        param, old = params[key], written.get(key)
        meaning = old[2] if old else as_cell(param.help or "")
        default = default_cell(param, ctx, command, old[1] if old else None)
        lines.append(f"| `{escaped(option_names(param))}` | {default} | {meaning} |")
    return lines


def rewrite(text: str) -> str:
    """A page with each marked table written from the code."""
    lines = text.split("\n")
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        out.append(line)
        index += 1
        marker = MARKER.match(line)
        if not marker:
            continue
        header, separator = lines[index], lines[index + 1]
        if [cell.lower() for cell in cells(header)[:3]] != ["option", "default", "meaning"]:
            raise TableError(f"the table after {line!r} must start with the columns option | default | meaning")
        end = index + 2
        while end < len(lines) and lines[end].startswith("|"):
            end += 1
        out += [header, separator, *rewrite_table(marker["command"], bool(marker["some"]), lines[index + 2 : end])]
        index = end
    return "\n".join(out)


def marked_commands(text: str) -> Iterator[tuple[str, bool]]:
    """(command, complete) for each marked table of a page."""
    for line in text.split("\n"):
        marker = MARKER.match(line)
        if marker:
            yield marker["command"], not marker["some"]


def check_pages(pages: list[Path], write: bool = False) -> list[Path]:
    """The pages whose tables are not what the code says (with ``write``: rewritten)."""
    stale = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        written = rewrite(text)
        if written != text:
            stale.append(page)
            if write:
                page.write_text(written, encoding="utf-8")
    return stale


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = check_pages(PAGES, write=not check)
    if check and stale:
        print(f"not what the code says (run `make docs`): {', '.join(map(str, stale))}", file=sys.stderr)
        return 1
    for page in stale:
        print(f"wrote {page.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
