"""One base for anchorkit's errors: each carries the exit code the CLI turns it into.

The exit codes are the same for every command (README, "Exit codes"):

- 0: done.
- 1: some work failed (a ticket, a file, an object); the rest was done and nothing written is corrupt.
- 2: usage or setup error (bad option or destination, missing bucket, wrong API key, unwritable folder):
  nothing was done.
- 3: another run holds the lock or changed the state first: this run stopped, nothing of it was written.
- 141: whoever read stdout stopped reading (``anchorkit chunk src --jsonl - | head``): the run stopped
  quietly, part of its output unwritten. 128 + SIGPIPE, what ``cat`` and ``yes`` end with, so that a
  pipeline under ``set -o pipefail`` fails as it would with them.
"""

from __future__ import annotations

from urllib.parse import urlsplit

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_LOCKED = 3
EXIT_CLOSED_PIPE = 141


class AnchorkitError(Exception):
    """An error the CLI reports as one line (never a traceback) and exits with `exit_code`."""

    exit_code: int = EXIT_USAGE


class UsageError(AnchorkitError):
    """A bad option, destination, key or folder: nothing was done."""

    exit_code = EXIT_USAGE


class WorkFailed(AnchorkitError):
    """Part of the work failed; what was done is intact."""

    exit_code = EXIT_FAILED


class LockHeld(AnchorkitError):
    """Another run holds the lock (or committed first)."""

    exit_code = EXIT_LOCKED


def url_host(url: str) -> str:
    """``host[:port]`` of a URL, for naming a server in a message: never its ``user:password@``."""
    parts = urlsplit(url)
    if not parts.hostname:
        return "?"
    return parts.hostname + (f":{parts.port}" if parts.port else "")
