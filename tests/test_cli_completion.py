"""Shell completion: an option that takes one of a few words completes them, --tokenizer too (a plain
string the stage checks, not a choice typer knows), as bash asks anchorkit for them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from anchorkit.tokens import TOKENIZER_CHOICES

ROOT = Path(__file__).resolve().parent.parent


def completions(line: str) -> list[str]:
    """What bash's completion of ``line`` (the cursor at its end) gets from anchorkit."""
    words = line.split(" ")
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "_ANCHORKIT_COMPLETE": "complete_bash",
        "COMP_WORDS": line,
        "COMP_CWORD": str(len(words) - 1),
    }
    run = subprocess.run(
        [sys.executable, "-m", "anchorkit"], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    return run.stdout.split()


@pytest.mark.parametrize("command", ["transform snap", "chunk snap", "stats out", "sync docs"])
def test_tokenizer_completes_the_tokenizers_it_accepts(command: str) -> None:
    assert completions(f"anchorkit {command} --tokenizer ") == list(TOKENIZER_CHOICES) == ["cl100k_base", "approx"]
    assert completions(f"anchorkit {command} --tokenizer ap") == ["approx"]
    assert completions(f"anchorkit {command} --tokenizer o200k") == []


def test_tokenizer_completes_as_the_options_declared_with_their_choices_do() -> None:
    assert completions("anchorkit transform snap --lang e") == ["en"]
