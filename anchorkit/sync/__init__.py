"""`sync`: pull → transform → upload in one command.

- :mod:`anchorkit.sync.options`: one set of options from flags, environment and anchorkit.toml.
- :mod:`anchorkit.sync.manifest`: the state's manifest as typed values (tickets, scope, cursor), read in one place.
- :mod:`anchorkit.sync.plan`: what a `sync --state` / `pull --state` run writes, decided without I/O.
- :mod:`anchorkit.sync.apply`: the writes of a plan, in the documented order (documents, raw issues, manifest).
- :mod:`anchorkit.sync.stateless`: `sync --state` and `pull --state`: read, pull, render, plan, apply.
- :mod:`anchorkit.sync.folders`: the ordinary `sync` over local snapshot and output folders.
"""

from anchorkit.sync.folders import FolderSyncReport, sync_folders  # noqa: F401
from anchorkit.sync.options import *  # noqa: F403
from anchorkit.sync.options import (  # noqa: F401
    SETTINGS_BY_NAME,
    SyncConfigError,
    resolve,
    resolve_from_environment,
)
from anchorkit.sync.stateless import *  # noqa: F403
