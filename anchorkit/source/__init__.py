"""The source stage: Redmine → snapshot folder.

redmine: the client (timeouts, retries, paging, lookups); pull: the incremental pull and its settings; preflight:
what a pull checks before it writes (the URL, the API key, the snapshot folder); cursor:
where an incremental run starts listing; lookups: the id -> name tables and the projects a --project covers;
snapshot: reading the snapshot (strict, every error names its file) and, for pull, writing it.

The pull itself is ``anchorkit.source.pull.pull`` (the package keeps the name ``pull`` for the module).

The names below are imported from their module when first used (PEP 562): a command that only reads
a snapshot (transform, chunk, stats) imports a module of this package, and with static imports here
it would load the Redmine client and requests with it (0.07 s of ``anchorkit stats``' start-up).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for type checkers, and for the Lambda zip's static import scan (bedrock/package.py)
    from anchorkit.source.preflight import PullError, read_api_key
    from anchorkit.source.pull import PullReport, PullSettings, SnapshotLocked
    from anchorkit.source.redmine import RedmineClient, RedmineError, RetryPolicy
    from anchorkit.source.snapshot import SnapshotError, load_issue, load_lookups, load_state

_EXPORTS = {
    **dict.fromkeys(["PullError", "read_api_key"], "preflight"),
    **dict.fromkeys(["PullReport", "PullSettings", "SnapshotLocked"], "pull"),
    **dict.fromkeys(["RedmineClient", "RedmineError", "RetryPolicy"], "redmine"),
    **dict.fromkeys(["SnapshotError", "load_issue", "load_lookups", "load_state"], "snapshot"),
}

__all__ = [
    "PullError",
    "PullReport",
    "PullSettings",
    "RedmineClient",
    "RedmineError",
    "RetryPolicy",
    "SnapshotError",
    "SnapshotLocked",
    "load_issue",
    "load_lookups",
    "load_state",
    "read_api_key",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:  # a submodule not imported yet: the import system imports it then
        raise AttributeError(f"module 'anchorkit.source' has no attribute {name!r}")
    value = getattr(import_module(f"anchorkit.source.{_EXPORTS[name]}"), name)
    globals()[name] = value  # once imported, a plain attribute
    return value
