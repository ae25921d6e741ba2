"""Packaging that tells the truth: the Python floor the dependencies need, a licence, classifiers, py.typed.

The wheel is built offline from a copy of the sources (the venv's setuptools, no build isolation), so
these are the files and metadata `pip install anchorkit` would get.
"""

from __future__ import annotations

import email
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import PackageNotFoundError, metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

REPO = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
# Minor versions a floor could be; the floor is the lowest one every dependency accepts.
CANDIDATES = [Version(f"3.{minor}") for minor in range(8, 16)]


def floor(specifiers: SpecifierSet) -> Version:
    return next(version for version in CANDIDATES if version in specifiers)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "anchorkit", source / "anchorkit", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    [path] = out.glob("anchorkit-*.whl")
    return zipfile.ZipFile(path)


def wheel_metadata(wheel: zipfile.ZipFile) -> email.message.Message:
    [name] = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    return email.message_from_bytes(wheel.read(name))


def test_requires_python_is_the_floor_the_dependencies_need() -> None:
    ours = floor(SpecifierSet(PROJECT["requires-python"]))
    needed: dict[str, Version] = {}
    for line in PROJECT["dependencies"]:
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        try:
            needed[requirement.name] = floor(SpecifierSet(metadata(requirement.name)["Requires-Python"] or ""))
        except PackageNotFoundError:
            pytest.fail(f"{requirement.name} is a dependency but not installed")
    # Not lower than any dependency allows (pip would fail there), not higher than they need.
    assert ours == max(needed.values()), needed
    assert sys.version_info >= (ours.major, ours.minor)


def test_no_dependency_is_left_for_pythons_below_the_floor() -> None:
    """A requirement whose marker is false on the floor (``tomli; python_version < '3.11'``) is dead."""
    at_floor = {"python_version": str(floor(SpecifierSet(PROJECT["requires-python"])))}
    requirements = [Requirement(line) for line in PROJECT["dependencies"]]
    assert [str(r) for r in requirements if r.marker is not None and not r.marker.evaluate(at_floor)] == []


def test_the_wheel_says_python_version_licence_and_classifiers(wheel: zipfile.ZipFile) -> None:
    meta = wheel_metadata(wheel)
    assert meta["Requires-Python"] == ">=3.11"
    assert meta["License-Expression"] == "MIT" and meta.get_all("License-File") == ["LICENSE"]
    licence = next(n for n in wheel.namelist() if n.endswith(".dist-info/licenses/LICENSE"))
    assert wheel.read(licence).decode().startswith("MIT License")
    classifiers = meta.get_all("Classifier") or []
    versions = [
        Version(c.rsplit(" ", 1)[1])
        for c in classifiers
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    ]
    assert min(versions) == floor(SpecifierSet(meta["Requires-Python"]))
    assert "Typing :: Typed" in classifiers and not [c for c in classifiers if c.startswith("License ::")]
    assert not [r for r in meta.get_all("Requires-Dist") or [] if r.startswith("tomli")]


def test_the_wheel_carries_py_typed_and_the_licence_file_exists(wheel: zipfile.ZipFile) -> None:
    assert "anchorkit/py.typed" in wheel.namelist()
    assert "anchorkit/__init__.pyi" in wheel.namelist()  # the types of the lazily imported API
    assert (REPO / "anchorkit" / "py.typed").is_file()
    assert "Permission is hereby granted" in (REPO / "LICENSE").read_text(encoding="utf-8")
