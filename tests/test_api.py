"""The library a program calls: the entry points exported from `anchorkit` (lazily: importing the package
loads no stage), and docs/api.md, whose examples run as a doctest."""

from __future__ import annotations

import ast
import doctest
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import anchorkit

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
