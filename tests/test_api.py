"""The library a program calls: the entry points exported from `anchorkit` (lazily: importing the package
loads no stage), and docs/api.md, whose examples run as a doctest."""

from __future__ import annotations

import ast
import doctest
import importlib
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from support.folders import tree

import anchorkit
from anchorkit.errors import UsageError

REPO = Path(__file__).resolve().parent.parent


def test_docs_api_md_runs_as_it_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "fixtures").symlink_to(REPO / "fixtures")
    monkeypatch.chdir(tmp_path)
    result = doctest.testfile(str(REPO / "docs" / "api.md"), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted >= 15
    assert len(list((tmp_path / "out").glob("*.md"))) == 34  # the page's transform wrote its documents


def test_every_exported_name_is_its_stages_own_object() -> None:
    api = anchorkit._API
    assert sorted(anchorkit.__all__) == sorted(["__version__", *api])
    for name, module in api.items():
        assert getattr(anchorkit, name) is getattr(importlib.import_module(module), name), name
    assert set(api) <= set(dir(anchorkit))
    with pytest.raises(AttributeError, match="no attribute 'transform'"):
        anchorkit.transform  # noqa: B018 - the attribute access is the test


def test_what_type_checkers_see_is_what_the_package_exports() -> None:
    stub = ast.parse((REPO / "anchorkit" / "__init__.pyi").read_text(encoding="utf-8"))
    seen = {alias.asname: node.module for node in stub.body if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert seen == anchorkit._API


def test_importing_the_package_loads_no_stage() -> None:
    script = "import sys, anchorkit; print(sorted(m for m in sys.modules if m.startswith('anchorkit.')))"
    loaded = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
    script = "import sys, anchorkit; anchorkit.verify_citations; print('anchorkit.verify.citations' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout == "True\n"


def transform(snapshot: Path, out: Path) -> object:
    return anchorkit.transform_snapshot(snapshot, out, anchorkit.TransformOptions())


@pytest.mark.parametrize(
    ("call", "output", "refusal"),
    [
        (transform, "snap/out", "--out {output} overlaps the snapshot {source}"),
        (transform, ".", "--out {output} overlaps the snapshot {source}"),  # the snapshot inside the output
        (
            lambda snap, out: anchorkit.chunk_source(snap, out=out),
            "snap/issues",
            "--out {output} overlaps the source folder {source}",
        ),
        (
            lambda snap, out: anchorkit.chunk_source(snap, jsonl=out),
            "snap/issues/12301.json",
            "--jsonl {output} overlaps the source folder {source}",
        ),
    ],
)
def test_a_program_giving_an_output_inside_the_source_or_holding_it_gets_the_error_and_nothing_is_written(
    tmp_path: Path, call: Callable[[Path, Path], object], output: str, refusal: str
) -> None:
    """The commands refuse it; so must the library they call, for any other program calling it (docs/api.md)."""
    shutil.copytree(REPO / "fixtures", tmp_path / "snap")
    before = tree(tmp_path)
    with pytest.raises(UsageError) as refused:
        call(tmp_path / "snap", tmp_path / output)
    assert str(refused.value) == refusal.format(
        output=(tmp_path / output).resolve(), source=(tmp_path / "snap").resolve()
    )
    assert tree(tmp_path) == before
