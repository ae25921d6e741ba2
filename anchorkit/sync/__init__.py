"""`sync`: pull → transform → upload in one command.

- :mod:`anchorkit.sync.options`: one run's settings, resolved once into the objects each stage takes.
- :mod:`anchorkit.sync.manifest`: the state's manifest as typed values (tickets, scope, cursor), read in one place.
- :mod:`anchorkit.sync.plan`: what a `sync --state` / `pull --state` run writes, decided without I/O.
- :mod:`anchorkit.sync.apply`: the writes of a plan, in the documented order (documents, raw issues, manifest).
- :mod:`anchorkit.sync.stateless`: `sync --state` and `pull --state`: read, pull, render, plan, apply.
- :mod:`anchorkit.sync.folders`: the ordinary `sync` over local snapshot and output folders.
- :mod:`anchorkit.sync.chunking`: `sync --chunks` (both syncs) through the chunk library.
- :mod:`anchorkit.sync.runs`: the commands' runs: stores and destinations opened and checked, then the work.
"""

from anchorkit.sync.chunking import ChunkLayout
from anchorkit.sync.folders import FolderSyncReport, sync_folders
from anchorkit.sync.manifest import Manifest, Scope, ScopeMismatch
from anchorkit.sync.options import SyncSettings, resolve, resolve_from_environment
from anchorkit.sync.progress import SyncProgress
from anchorkit.sync.runs import (
    StateView,
    open_state,
    pull_into_state,
    sync_with_folders,
    sync_with_state,
    view_state,
)
from anchorkit.sync.stateless import StatelessSyncReport, StatePullReport, pull_with_state, run_pull, run_sync

__all__ = [
    "ChunkLayout",
    "FolderSyncReport",
    "Manifest",
    "Scope",
    "ScopeMismatch",
    "StatePullReport",
    "StateView",
    "StatelessSyncReport",
    "SyncProgress",
    "SyncSettings",
    "open_state",
    "pull_into_state",
    "pull_with_state",
    "resolve",
    "resolve_from_environment",
    "run_pull",
    "run_sync",
    "sync_folders",
    "sync_with_folders",
    "sync_with_state",
    "view_state",
]
