"""The `anchorkit` command line: a package that only parses options and prints reports.

- :mod:`anchorkit.cli.app`: the group, where option values come from, errors → exit codes in one place.
- :mod:`anchorkit.cli.options`: the options and the groups several commands share, declared once.
- :mod:`anchorkit.cli.output`: what the commands print (JSON, the human summaries, problems, progress).
- one module per command family: transform, upload, pull, sync, stats, verify (verify, eval, inject), state.
"""

from anchorkit.cli.app import app

__all__ = ["app"]
