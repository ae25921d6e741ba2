"""The docs say what the code does: the option tables are written from the command line's declarations
and the settings catalogue (`make docs`), every command has one, every option a command line in the docs
uses exists on that command, and every default the prose quotes is the real one. sync takes every option
of pull, transform and upload but the two the reference names, and they do there what they do there."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest
import typer
from support.redmine_server import RedmineAdmin, RedmineServer
from typer.testing import CliRunner

from anchorkit import settings
from anchorkit.cli import app
from anchorkit.cli.app import command_names
from anchorkit.verify.model import DEFAULT_URI_PATTERN

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
COMMANDS = command_names(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
runner = CliRunner()


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("reference_tables", REPO / "scripts" / "reference_tables.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tables = load_generator()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_option_tables_are_what_the_code_writes(page: Path) -> None:
    """If this fails after an option changed: `make docs`, and read the diff."""
    text = page.read_text(encoding="utf-8")
    assert tables.rewrite(text) == text


def test_every_command_has_a_complete_table_of_its_options() -> None:
    complete = {
        command for page in PAGES for command, whole in tables.marked_commands(page.read_text("utf-8")) if whole
    }
    assert complete == set(settings.COMMANDS)


def test_a_table_that_names_an_option_the_command_lacks_or_makes_up_a_default_is_refused() -> None:
    header = "<!-- options: inject -->\n| option | default | meaning |\n|---|---|---|\n"
    with pytest.raises(tables.TableError, match="`anchorkit inject` has no --lang"):
        tables.rewrite(header + "| `--lang ja|en` | `ja` | labels |\n")
    with pytest.raises(tables.TableError, match="inject --label: no default, but the page quotes one"):
        tables.rewrite(header + "| `--label TEXT` | 40 characters | label |\n")
    rewritten = tables.rewrite(header + "| `--uri-pattern` | `/wrong/` | my words |\n")
    assert f"| `--uri-pattern REGEX` | `{DEFAULT_URI_PATTERN}` | my words |" in rewritten  # the default is the code's


# --------------------------------------------------------------------------------------------------
# Command lines and defaults in prose

COMMAND_WORDS = "|".join(sorted(map(re.escape, COMMANDS), key=len, reverse=True))
COMMAND_LINE = re.compile(rf"(?:^|anchorkit )({COMMAND_WORDS})((?: +[^\s`|#;]+)*)")
FENCE = re.compile(r"^(```|````)[^\n]*\n(.*?)^\1\s*$", re.M | re.S)


def code_of(text: str) -> list[str]:
    """The lines of fenced blocks, and the inline code spans outside them."""
    fenced = [line for match in FENCE.finditer(text) for line in match[2].splitlines()]
    prose = FENCE.sub("", text)
    return fenced + re.findall(r"`([^`\n]+)`", prose)


def option_names(command: str) -> set[str]:
    names = {"--help"}
    for param in COMMANDS[command].params:
        names |= set(param.opts) | set(param.secondary_opts)
    return names


def options_used(page: Path) -> list[tuple[str, str]]:
    """(command, option) for every option given to an anchorkit command in a page's code."""
    used = []
    for code in code_of(page.read_text(encoding="utf-8")):
        for match in COMMAND_LINE.finditer(code):
            if not (code.startswith(match[1]) or "anchorkit " in code):
                continue
            for word in match[2].split():
                if word in (">", "<", "&&", "2>&1"):
                    break
                if re.fullmatch(r"--?[a-z][a-z-]*(=.*)?", word):
                    used.append((match[1], word.split("=")[0]))
    return used


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_option_a_command_line_in_the_docs_gives_exists_on_that_command(page: Path) -> None:
    used = options_used(page)
    assert [f"{command} {option}" for command, option in used if option not in option_names(command)] == []


def test_the_scan_finds_command_lines_and_catches_a_made_up_option() -> None:
    reference = options_used(REPO / "docs" / "reference.md")
    assert ("pull", "--snapshot") in reference and ("upload", "--start-ingestion") in reference
    assert ("sync", "--state") in reference and ("state show", "--json") in options_used(REPO / "docs" / "sync.md")
    assert "--max-gap" not in option_names("transform")


# `--opt N` … (default 300 …) or `--opt` (default 300): a number the prose gives as an option's default.
PROSE_DEFAULT = re.compile(r"`(--[a-z][a-z-]*)[^`]*`[^`.;|\n]{0,40}?\(?default:? `?(\d[\d,.]*)")


def quoted_defaults() -> list[tuple[str, str, str]]:
    return [
        (page.name, match[1], match[2].rstrip(".,"))
        for page in PAGES
        for match in PROSE_DEFAULT.finditer(" ".join(page.read_text(encoding="utf-8").split()))
    ]


def test_every_default_the_prose_quotes_is_the_real_one() -> None:
    checked = []
    for page, option, quoted in quoted_defaults():
        setting = settings.SETTINGS_BY_NAME.get(option.removeprefix("--").replace("-", "_"))
        if setting is None:  # not an anchorkit option (python -m anchorkit.bedrock.package …)
            continue
        assert float(quoted.replace(",", "")) == float(setting.default), f"{page}: {option} (default {quoted})"
        checked.append(option)
    assert {"--lease-seconds", "--min-id-digits", "--chunk-tokens"} <= set(checked)


# --------------------------------------------------------------------------------------------------
# sync takes the options of pull, transform and upload


def test_sync_has_every_option_of_pull_transform_and_upload_but_the_two_the_reference_names() -> None:
    stages = option_names("pull") | option_names("transform") | option_names("upload")
    missing = {name for name in stages - option_names("sync") if name.startswith("--")}
    assert missing == {"--check", "--jobs"}
    sync_section = (REPO / "docs" / "reference.md").read_text(encoding="utf-8").split("## `anchorkit sync")[1]
    assert "two exceptions: transform's `--check`" in sync_section and "and `--jobs`" in sync_section


@pytest.mark.redmine
@pytest.mark.timeout(300)
def test_sync_renders_with_the_tokenizer_and_links_transform_renders_with(
    tmp_path: Path,
    redmine_server: RedmineServer,
    redmine_admin: RedmineAdmin,
    monkeypatch: pytest.MonkeyPatch,
    clean_cli_environment: None,
) -> None:
    """`sync --state` counted spacing anchors with the approximation whatever --tokenizer said."""
    monkeypatch.setenv("REDMINE_API_KEY", redmine_server.admin_key)
    project = redmine_admin.create_project()
    paragraphs = [f"手順 {n}: ルーター設定を確認し、ログ #{n} を取得して担当者に共有した。" * 3 for n in range(40)]
    redmine_admin.create_issue(project["id"], "VPN接続が不安定になる", description="\n\n".join(paragraphs))
    scope = ["--url", redmine_server.url, "--project", project["identifier"]]
    links = ["--link-issues", "https://redmine.example.com"]
    exact = ["--tokenizer", "cl100k_base", *links]
    assert runner.invoke(app, ["pull", "--snapshot", "snap", *scope]).exit_code == 0

    def transformed(out: str, *options: str) -> dict[str, bytes]:
        assert runner.invoke(app, ["transform", "snap", "--out", out, *options]).exit_code == 0
        return {path.name: path.read_bytes() for path in (tmp_path / out).glob("*.md")}

    folders = runner.invoke(app, ["sync", "published", *scope, "--snapshot", "snap", "--out", "out", *exact])
    stateless = runner.invoke(app, ["sync", "stateless", *scope, "--state", "state", *exact])
    assert folders.exit_code == 0, folders.output
    assert stateless.exit_code == 0, stateless.output
    expected = transformed("expected", *exact)
    assert transformed("approx", "--tokenizer", "approx", *links) != expected  # the tokenizer matters here
    assert "](https://redmine.example.com/issues/" in next(iter(expected.values())).decode("utf-8")
    for published in ("published", "stateless"):
        assert {path.name: path.read_bytes() for path in (tmp_path / published).glob("*.md")} == expected


def test_make_docs_check_passes_on_the_committed_pages_and_fails_on_a_stale_one(tmp_path: Path) -> None:
    assert tables.main(["--check"]) == 0
    stale = tmp_path / "stale.md"
    stale.write_text("<!-- options: eval -->\n| option | default | meaning |\n|---|---|---|\n", encoding="utf-8")
    assert tables.check_pages([stale]) == [stale]
