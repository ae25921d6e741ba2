"""Atomic file writes: a reader (or a crash) never sees a half-written file."""

from __future__ import annotations

import contextlib
import errno
import filecmp
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, Literal

from anchorkit.errors import UsageError

_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
# Read as it is, never through a symbolic link (even one swapped in after the folder was listed), and without
# waiting for a writer should it be a named pipe (refused once open: not a regular file).
_EXISTING_FILE = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
# The temporary file _create_temporary names first: ``.<name>.<pid>.tmp``.
_TEMPORARY = re.compile(r"^\..+\.(?P<pid>[0-9]+)\.tmp$")
# The mode of a file that may hold private content (a run with --include-private): its owner's alone. The writers
# below take a ``mode``: None, the umask's (as any file), or this one, which a folder they create for the file
# gets with its search bit (0700).
PRIVATE_FILE_MODE = 0o600


def file_mode(private: bool) -> int | None:
    """The ``mode`` of the files a run writes: ``PRIVATE_FILE_MODE`` when they may hold private content."""
    return PRIVATE_FILE_MODE if private else None


def owner_only(path: Path) -> bool:
    """Whether the regular file ``path`` is its owner's alone (no permission for its group or others), as a run
    with --include-private writes it; False for anything else (a symbolic link, a folder, a named pipe, a file
    removed meanwhile)."""
    try:
        status = os.lstat(path)
    except OSError:  # (gone meanwhile, or its folder unreadable: whoever reads it reports that)
        return False
    return stat.S_ISREG(status.st_mode) and not stat.S_IMODE(status.st_mode) & 0o077


def make_folder(path: Path, mode: int | None = None) -> None:
    """Create the folder ``path`` and its missing parents (``mkdir -p``). With a file ``mode``, each folder it
    creates is made for such files: their read bits with the search bits (0600: 0700), the umask applied; an
    existing folder is left as it is. (``Path.mkdir(mode=...)`` gives the parents it creates the umask's mode.)"""
    if mode is None:
        path.mkdir(parents=True, exist_ok=True)
        return
    missing = []
    while not path.is_dir() and path.parent != path:
        missing.append(path)
        path = path.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, _folder_mode(mode))
        except FileExistsError:
            if not folder.is_dir():
                raise


def _folder_mode(mode: int | None) -> int:
    """The mode of a folder made for files of ``mode``: its read bits with their search bits (0600: 0700)."""
    return 0o777 if mode is None else mode | (mode & 0o444) >> 2


def _create_temporary(path: Path, mode: int | None) -> tuple[int, str]:
    """A new temporary file beside ``path``, named ``.<name>.<...>.tmp`` (cleanup code knows that shape), with
    ``mode`` (None: the umask's); its folder is created if missing."""
    # A per-process name costs one system call; mkstemp's random names are for when that one is taken
    # (another thread writing the same file, or a leftover of a killed process that had our pid).
    tmp = os.path.join(path.parent, f".{path.name}.{os.getpid()}.tmp")
    try:
        return os.open(tmp, _NEW_FILE, 0o666 if mode is None else mode), tmp
    except FileNotFoundError:
        make_folder(path.parent, mode)
        return os.open(tmp, _NEW_FILE, 0o666 if mode is None else mode), tmp
    except FileExistsError:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)  # (0600)
        if mode is not None:
            os.fchmod(fd, mode)
        return fd, tmp


def _wider_than(path: Path, mode: int) -> bool:
    """Whether the file ``path`` has a permission ``mode`` lacks (or is a symbolic link, which a write replaces)."""
    status = os.lstat(path)
    return stat.S_ISLNK(status.st_mode) or bool(stat.S_IMODE(status.st_mode) & ~mode)


def process_running(pid: int) -> bool:
    """Whether a process with this id runs on this host (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: it exists
    except (OverflowError, ValueError):
        return False  # no process can have this id
    return True


def interrupted_write(path: Path) -> bool:
    """Whether ``path`` is a temporary file ``write_atomic`` left behind: named with its writer's pid, and that
    process no longer runs (it was killed before the rename). A live writer's file is never one, nor is any
    other name (mkstemp's random one, taken only when the pid's name is, cannot be told from someone's file)."""
    found = _TEMPORARY.match(path.name)
    return found is not None and not process_running(int(found["pid"]))


def _write_all(fd: int, data: bytes) -> None:
    """Write ``data`` to the open file ``fd``, and close it."""
    try:
        remaining = memoryview(data)
        while remaining:
            remaining = remaining[os.write(fd, remaining) :]
    finally:
        os.close(fd)


class NotRegularFile(OSError):
    """A path that is a symbolic link, a named pipe or a device, not a file of its own to read."""


def read_regular_file(path: Path | str) -> bytes:
    """The bytes of the regular file ``path``; :class:`NotRegularFile` for a symbolic link (which is not
    followed: what it points to, /etc/passwd say, is no file of the folder) or any other kind of file."""
    with open_regular_file(path) as file:
        return file.read()


def open_regular_file(path: Path | str) -> BinaryIO:
    """The regular file ``path`` open for reading, refused as :func:`read_regular_file` refuses it (for a
    caller that looks at its size before reading it: ``os.fstat(file.fileno())``)."""
    try:
        fd = os.open(path, _EXISTING_FILE)
    except OSError as error:
        if error.errno == errno.ELOOP:  # O_NOFOLLOW's answer for a symbolic link
            raise NotRegularFile("a symbolic link (not followed)") from None
        raise
    try:  # (the check before fdopen, which refuses a folder with an error of its own and leaves fd open)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFile("not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def shown(path: Path | str) -> str:
    """``path`` as a message can print it: a name that is not UTF-8 with its bytes escaped (``bad\\xff.md``),
    where Python's own string would hold lone surrogates no UTF-8 output can write."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def write_atomic(path: Path, data: bytes, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same directory and a rename; the file gets ``mode``
    (None: the umask's), also when it replaces one of another mode."""
    fd, tmp = _create_temporary(path, mode)
    try:
        _write_all(fd, data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_new_folder(path: Path, files: Sequence[tuple[str, bytes]], mode: int | None = None) -> bool:
    """Create the folder ``path`` holding ``files`` (name, bytes) all at once: they are written into a
    temporary folder beside it (``.<name>.<pid>.tmp``), which is renamed to ``path`` once complete, so a
    reader sees all of them or none, for one system call a file fewer than writing each atomically.
    The files get ``mode`` and the folders made for them its folder mode (:func:`make_folder`).
    False, and nothing written, if ``path`` exists by then."""
    tmp = os.path.join(path.parent, f".{path.name}.{os.getpid()}.tmp")
    try:
        os.mkdir(tmp, _folder_mode(mode))
    except FileNotFoundError:
        make_folder(path.parent, mode)
        os.mkdir(tmp, _folder_mode(mode))
    except FileExistsError:  # the leftover of a killed process that had our pid
        shutil.rmtree(tmp)
        os.mkdir(tmp, _folder_mode(mode))
    try:
        _write_files(tmp, files, 0o666 if mode is None else mode)
        os.rename(tmp, path)
    except BaseException as error:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(error, OSError) and error.errno in (errno.EEXIST, errno.ENOTEMPTY) and path.exists():
            return False
        raise
    return True


def _write_files(folder: str, files: Sequence[tuple[str, bytes]], mode: int) -> None:
    """Create each of ``files`` (name, bytes) in the new ``folder``, with ``mode``: opened relative to the folder where
    the system allows it (the path is not looked up again for each file: about 13% of a small file's
    cost on tmpfs, 1% on ext4, where the file system's own work dominates)."""
    if os.open not in os.supports_dir_fd:
        for name, data in files:
            _write_all(os.open(os.path.join(folder, name), _NEW_FILE, mode), data)
        return
    folder_fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        for name, data in files:
            _write_all(os.open(name, _NEW_FILE, mode, dir_fd=folder_fd), data)
    finally:
        os.close(folder_fd)


def sync_file(
    path: Path, data: bytes, *, check: bool = False, mode: int | None = None
) -> Literal["created", "changed", "unchanged"]:
    """Atomically write ``data`` unless ``path`` already holds exactly these bytes; with a ``mode``, also when
    it does but may be read by more than that mode lets (the same bytes written again, with ``mode``).

    Says what the file needed: "created", "changed" or "unchanged" (its bytes). With ``check`` nothing is
    written, only compared (for a dry run).
    """
    try:
        kind: int | None = path.stat().st_mode
    except FileNotFoundError:
        kind = None
    # A named pipe, device or folder in the file's place is replaced, never read (a pipe would wait for a writer).
    current = path.read_bytes() if kind is not None and stat.S_ISREG(kind) else None
    if current == data:
        if mode is not None and not check and _wider_than(path, mode):
            write_atomic(path, data, mode)
        return "unchanged"
    if not check:
        write_atomic(path, data, mode)
    return "created" if kind is None else "changed"


class AtomicStream:
    """A file written piece by piece (too large to hold in memory) that replaces ``path`` atomically
    on ``commit()``, unless it holds exactly the bytes ``path`` has (then ``path`` is left untouched, but
    for one that ``mode`` finds too readable, replaced all the same). It gets ``mode`` (None: the umask's).
    Leaving the ``with`` block without a commit (an error) removes it: ``path`` keeps its old content."""

    def __init__(self, path: Path, mode: int | None = None) -> None:
        self.path = path
        self.mode = mode
        fd, self.tmp = _create_temporary(path, mode)
        self.file: BinaryIO = os.fdopen(fd, "wb")

    def write(self, data: bytes) -> None:
        self.file.write(data)

    def commit(self) -> Literal["created", "changed", "unchanged"]:
        self.file.close()
        if not self.path.exists():
            status: Literal["created", "changed", "unchanged"] = "created"
        elif filecmp.cmp(self.tmp, self.path, shallow=False):
            if self.mode is None or not _wider_than(self.path, self.mode):
                os.unlink(self.tmp)
            else:
                os.replace(self.tmp, self.path)
            return "unchanged"
        else:
            status = "changed"
        os.replace(self.tmp, self.path)
        return status

    def __enter__(self) -> AtomicStream:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.file.close()
        with contextlib.suppress(FileNotFoundError):  # committed
            os.unlink(self.tmp)


class ComparingStream:
    """What ``sync_file(path, data, check=True)`` says, for ``data`` written piece by piece (too large to hold in
    memory): each piece is compared with the next bytes of ``path`` as it comes, and none is kept. A named pipe,
    device or folder in the file's place is never read (it is "changed"), as ``sync_file`` does."""

    def __init__(self, path: Path) -> None:
        try:
            kind: int | None = path.stat().st_mode
        except FileNotFoundError:
            kind = None
        self.differs: Literal["created", "changed"] = "created" if kind is None else "changed"
        self.current: BinaryIO | None = path.open("rb") if kind is not None and stat.S_ISREG(kind) else None
        self.same = self.current is not None

    def write(self, data: bytes) -> int:
        if self.same:
            assert self.current is not None
            self.same = self.current.read(len(data)) == data
        return len(data)

    def status(self) -> Literal["created", "changed", "unchanged"]:
        """Whether ``path`` holds exactly what was written: "unchanged"; else what writing it would do."""
        if self.same and self.current is not None and not self.current.read(1):
            return "unchanged"
        return self.differs

    def __enter__(self) -> ComparingStream:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self.current is not None:
            self.current.close()


def write_if_changed(path: Path, data: bytes, mode: int | None = None) -> bool:
    """``sync_file`` for callers that only need to know whether the file's bytes were (re)written."""
    return sync_file(path, data, mode=mode) != "unchanged"


def check_existing_folder(path: Path) -> None:
    """A usage error (one line, exit 2) unless ``path`` is a folder, for a folder a command reads (its
    source): ``nosuch: no such folder``, ``notes.txt: not a folder``, the path as the user gave it."""
    if not path.is_dir():
        raise UsageError(f"{path}: {'not a folder' if path.exists() else 'no such folder'}")


def check_writable_folder(path: Path, what: str) -> None:
    """A usage error (one line, exit 2) unless ``path`` is, or can be created as, a folder we may write in.

    Checked by trying (a temporary file in the folder, or in the nearest folder that exists), not by
    permission bits: those say nothing about read-only mounts and everything is allowed to root.
    Nothing is left behind and no folder is created.
    """
    existing = path
    while not existing.exists():
        if existing.is_symlink():
            raise UsageError(f"{what} {path}: {existing} is a broken symbolic link")
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        where = "is a file" if existing == path else f"cannot be created: {existing} is a file"
        raise UsageError(f"{what} {path} {where}, not a folder")
    try:
        with tempfile.TemporaryFile(dir=existing, prefix=".anchorkit-probe."):
            pass
    except OSError as error:
        inside = "" if existing == path else f" (cannot create it in {existing})"
        raise UsageError(f"{what} {path} is not writable{inside}: {error.strerror or error}") from None


def check_writable_file(path: Path, what: str) -> None:
    """A usage error (one line, exit 2) unless ``path`` can be written as a file: it is no folder, and its
    folder is, or can be created as, one we may write in (checked as :func:`check_writable_folder` does,
    by trying). For a file a command writes (a page besides its output, or its output file): checked
    before any work or output, so that exit 2 still means nothing was done."""
    if path.is_dir():
        raise UsageError(f"{what} {path} is a folder, not a file")
    check_writable_folder(path.parent, f"{what} {path}: its folder")


def check_apart(output: Path, source: Path, output_name: str, source_name: str) -> None:
    """A usage error (exit 2, before anything is written) when an output is the folder a command reads, lies
    inside it or holds it: it would overwrite the source's files, be read back as source, or delete itself."""
    output_path, source_path = output.resolve(), source.resolve()
    if output_path.is_relative_to(source_path) or source_path.is_relative_to(output_path):
        raise UsageError(f"{output_name} {output_path} overlaps the {source_name} {source_path}")
