"""Progress of a sync, stage by stage, for a caller that shows it (the CLI: on a terminal only)."""

from __future__ import annotations

from collections.abc import Callable

from anchorkit.source import pull

SyncProgress = Callable[[str, int, int], None]  # (stage: pulling, rendering or uploading; done; total)


def stage_counter(progress: SyncProgress | None, stage: str, total: int) -> Callable[[], None]:
    """A counter reporting ``stage`` (done of ``total``) to ``progress`` at each call, starting at 0."""
    done = 0
    if progress is not None:
        progress(stage, 0, total)

    def advance() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(stage, done, total)

    return advance


def stage_progress(progress: SyncProgress | None, stage: str) -> Callable[[int, int], None] | None:
    """A stage's own progress callback (done, total), reported as ``stage``."""
    if progress is None:
        return None
    return lambda done, total: progress(stage, done, total)


def pulling_stage(progress: SyncProgress | None) -> pull.ProgressCallback | None:
    """pull's own progress callback, reported as the ``pulling`` stage."""
    return stage_progress(progress, "pulling")
