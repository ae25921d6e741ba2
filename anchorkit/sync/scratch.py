"""The work folder of a `sync --state` run without ``--snapshot``: raw tickets, readable by us alone, and
gone when the run ends, also after a run that was killed (the next run removes what that one left).

Each folder holds a lock file its run keeps locked (flock) while it lives: the OS drops the lock when
the process dies, kill -9 included, so a folder whose lock can be taken is a leftover. Folders made
before there was a lock file are leftovers once they are a day old (no sync takes that long).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

PREFIX = "anchorkit-sync-"
LOCK_NAME = ".in-use"
UNLOCKED_MAX_AGE_S = 24 * 3600


@contextlib.contextmanager
def scratch_folder(parent: Path | None = None) -> Iterator[Path]:
    """A new folder (mode 0700) under ``parent`` (the system's temporary folder by default), locked
    while in use and removed afterwards; leftovers of dead runs there are removed first."""
    import fcntl  # POSIX only; imported here so that the CLI loads where it is missing

    where = Path(parent or tempfile.gettempdir())
    remove_leftovers(where)
    # Made under another name and renamed once locked: no other run ever sees it unlocked.
    starting = Path(tempfile.mkdtemp(prefix=f".{PREFIX}", dir=where))  # mkdtemp: mode 0700
    folder = where / starting.name.removeprefix(".")
    try:
        with open(starting / LOCK_NAME, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            starting.rename(folder)
            yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(starting, ignore_errors=True)


def remove_leftovers(where: Path) -> list[Path]:
    """Remove the work folders of dead runs under ``where`` (ours only: a folder of another user, or of
    a live run, is left alone); returns what was removed."""
    import fcntl

    removed = []
    for folder in where.glob(f"{PREFIX}*"):
        try:
            if not folder.is_dir() or folder.is_symlink() or folder.stat().st_uid != os.getuid():
                continue
            lock_path = folder / LOCK_NAME
            if lock_path.exists():
                with open(lock_path) as lock:
                    try:
                        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        continue  # its run is alive
            elif time.time() - folder.stat().st_mtime < UNLOCKED_MAX_AGE_S:
                continue  # without a lock file: maybe a run of an older anchorkit, still going
        except OSError:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed
