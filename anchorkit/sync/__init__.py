"""`sync`: pull → transform → upload in one command.

- :mod:`anchorkit.sync.options`: one set of options from flags, environment and anchorkit.toml.
- :mod:`anchorkit.sync.stateless`: `sync --state` and `pull --state`, the state kept beside the destination.
"""

from anchorkit.sync.options import *  # noqa: F401,F403
from anchorkit.sync.options import SETTINGS_BY_NAME, SyncConfigError, resolve, resolve_from_environment  # noqa: F401
from anchorkit.sync.stateless import *  # noqa: F401,F403
