"""The same input and options give the same bytes on every machine.

cl100k_base's vocabulary ships inside anchorkit, so a fresh machine without network, without
tiktoken's cache and without any vocabulary file writes what a developer's machine writes, and
`transform --check` in CI agrees with the files a developer committed.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import subprocess
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

import pytest
from support.long_tickets import write_long_snapshot

from anchorkit.tokens import CL100K_SHA256, VOCABULARY_FILE_ENV

REPO = Path(__file__).resolve().parent.parent
SHIPPED_VOCABULARY = REPO / "anchorkit" / "data" / "cl100k_base.tiktoken.gz"
# Where tiktoken caches cl100k_base: the sha1 of the URL it downloads it from.
TIKTOKEN_CACHE_NAME = hashlib.sha1(
    b"https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
).hexdigest()


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The fixtures (short tidy tickets) and long, messy tickets."""
    long = tmp_path_factory.mktemp("long")
    write_long_snapshot(long, 6, seed=11)
    return [REPO / "fixtures", long]


def clean_environment(home: Path) -> dict[str, str]:
    """A new user's machine: a fresh HOME, an empty tiktoken cache, no vocabulary, no way out to the network."""
    (home / "cache").mkdir(parents=True)
    environment = {
        key: value for key, value in os.environ.items() if key not in (VOCABULARY_FILE_ENV, "DATA_GYM_CACHE_DIR")
    }
    unreachable = "http://127.0.0.1:9"  # the discard port: any download attempt fails at once
    return environment | {
        "HOME": str(home),
        "TIKTOKEN_CACHE_DIR": str(home / "cache"),
        "HTTP_PROXY": unreachable,
        "HTTPS_PROXY": unreachable,
        "NO_PROXY": "",
    }


def developer_environment(home: Path) -> dict[str, str]:
    """A developer's machine: the vocabulary in tiktoken's cache and named by $ANCHORKIT_TIKTOKEN_FILE."""
    vocabulary = gzip.decompress(SHIPPED_VOCABULARY.read_bytes())
    (home / "cache").mkdir(parents=True)
    (home / "cache" / TIKTOKEN_CACHE_NAME).write_bytes(vocabulary)
    (home / "cl100k_base.tiktoken").write_bytes(vocabulary)
    return os.environ | {
        "HOME": str(home),
        "TIKTOKEN_CACHE_DIR": str(home / "cache"),
        VOCABULARY_FILE_ENV: str(home / "cl100k_base.tiktoken"),
    }


def anchorkit(environment: dict[str, str], *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "anchorkit", *arguments], env=environment, capture_output=True, text=True, check=False
    )


def tree(folder: Path) -> dict[str, bytes]:
    return {
        path.relative_to(folder).as_posix(): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()
    }


def test_a_fresh_machine_writes_the_bytes_a_developers_machine_writes(snapshots: list[Path], tmp_path: Path) -> None:
    fresh, developer = clean_environment(tmp_path / "fresh"), developer_environment(tmp_path / "developer")
    for index, snapshot in enumerate(snapshots):
        fresh_out, developer_out = tmp_path / f"fresh-{index}", tmp_path / f"developer-{index}"
        for environment, out in ((fresh, fresh_out), (developer, developer_out)):
            result = anchorkit(environment, "transform", str(snapshot), "--out", str(out), "--sidecars")
            assert result.returncode == 0, result.stderr
        written = tree(fresh_out)
        assert written and written == tree(developer_out), snapshot
        # CI without a vocabulary agrees with what the developer committed, and the other way round.
        for environment, out in ((fresh, developer_out), (developer, fresh_out)):
            check = anchorkit(environment, "transform", str(snapshot), "--out", str(out), "--sidecars", "--check")
            assert check.returncode == 0, check.stdout
    assert not any((tmp_path / "fresh" / "cache").iterdir())  # nothing was downloaded or cached
    # The spacing anchors were counted exactly, not estimated: a run asking for approx differs.
    approx_out = tmp_path / "approx"
    assert (
        anchorkit(
            fresh, "transform", str(snapshots[1]), "--out", str(approx_out), "--sidecars", "--tokenizer", "approx"
        ).returncode
        == 0
    )
    assert tree(approx_out) != tree(tmp_path / "fresh-1")


def test_a_corrupt_vocabulary_file_is_exit_2_naming_the_file(snapshots: list[Path], tmp_path: Path) -> None:
    corrupt = tmp_path / "cl100k_base.tiktoken"
    corrupt.write_bytes(gzip.decompress(SHIPPED_VOCABULARY.read_bytes())[:1000])  # the first 1,000 bytes
    environment = clean_environment(tmp_path / "home")
    out = tmp_path / "out"
    given = anchorkit(environment, "transform", str(snapshots[0]), "--out", str(out), "--tiktoken-file", str(corrupt))
    named = anchorkit(
        environment | {VOCABULARY_FILE_ENV: str(corrupt)}, "transform", str(snapshots[0]), "--out", str(out)
    )
    for result in (given, named):
        assert result.returncode == 2
        [line] = result.stderr.splitlines()
        assert (
            line.startswith(f"error: cl100k_base vocabulary file {corrupt}: sha256 ") and "is not cl100k_base's" in line
        )
    assert not out.exists()  # nothing written with counts that could differ


def test_the_vocabulary_and_its_notice_are_package_data() -> None:
    """What a wheel carries: the files pyproject.toml lists as package data exist, and the vocabulary
    in them is cl100k_base's (the sha256 tiktoken expects of the uncompressed file)."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    listed = config["tool"]["setuptools"]["package-data"]["anchorkit"]
    assert {"data/NOTICE.md", "data/cl100k_base.tiktoken.gz"} <= set(listed)
    assert all((REPO / "anchorkit" / name).is_file() for name in listed)
    vocabulary = gzip.decompress(SHIPPED_VOCABULARY.read_bytes())
    assert hashlib.sha256(vocabulary).hexdigest() == CL100K_SHA256
    notice = (REPO / "anchorkit" / "data" / "NOTICE.md").read_text(encoding="utf-8")
    assert CL100K_SHA256 in notice and hashlib.sha256(SHIPPED_VOCABULARY.read_bytes()).hexdigest() in notice
    assert "MIT License" in notice
