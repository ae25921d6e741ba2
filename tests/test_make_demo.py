"""`make demo` on a fresh machine: every next step it suggests works there, the S3 one aside (it needs AWS)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ANCHORKIT = Path(sys.executable).parent / "anchorkit"


def demo_lines() -> list[str]:
    """What `make demo` would run and print, without running it (make -n)."""
    printed = subprocess.run(["make", "-n", "demo"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    return printed.splitlines()


def hinted_commands() -> list[list[str]]:
    """The `anchorkit …` commands of the "Next:" lines, without their comments."""
    commands = []
    for line in demo_lines():
        found = re.fullmatch(r'echo "\s+(\S*anchorkit .*?)\s+#.*"', line)
        if found:
            commands.append(shlex.split(found[1]))
    return commands


def run(arguments: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ANCHORKIT), *arguments], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_every_next_step_of_make_demo_works_without_aws(tmp_path: Path) -> None:
    transform = next(line for line in demo_lines() if "anchorkit transform fixtures" in line)
    arguments = shlex.split(transform)[1:]
    arguments[arguments.index("fixtures")] = str(REPO / "fixtures")
    assert run(arguments, tmp_path).returncode == 0 and (tmp_path / "out").is_dir()
    commands = hinted_commands()
    local = [c for c in commands if not any(a.startswith("s3://") for a in c)]
    s3 = [c for c in commands if any(a.startswith("s3://") for a in c)]
    upload = next(c for c in local if c[1] == "upload")
    # The local folder is suggested first, the S3 form after it.
    assert s3 and commands.index(upload) < commands.index(s3[0]) and s3[0][1] == "upload"
    for command in local:
        result = run(command[1:], tmp_path)
        assert result.returncode == 0, (command, result.stderr)
    dry_run = run(upload[1:], tmp_path)
    assert re.search(r"plan for \S*published: upload 68 ", dry_run.stdout)
    assert not (tmp_path / "published").exists()  # a dry run writes nothing
