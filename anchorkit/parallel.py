"""Batches of work in worker processes, results in input order (used by transform and stats).

A worker is set up once by ``initializer(*initargs)`` (tokenizers, lookups...: state that is costly
to send with every batch) and then maps batches with ``work``. The initializer must not fail (validate
before): multiprocessing replaces a worker that dies in it by a new one, without end. With one job, the same two
functions run in this process, so the results cannot depend on the number of jobs.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

DEFAULT_BATCH_SIZE = 256


def batched(items: Iterable[Item], size: int) -> Iterator[list[Item]]:
    iterator = iter(items)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


def resolve_jobs(jobs: int, batches: Iterator[list[Item]]) -> tuple[int, Iterator[list[Item]]]:
    """``jobs`` = 0: one process per CPU core once there is more than one batch (a small input is not
    worth starting processes for). Returns the job count and the batches, none of them consumed."""
    if jobs != 0:
        return jobs, batches
    first = next(batches, None)
    second = next(batches, None)
    jobs = (os.cpu_count() or 1) if second is not None else 1
    return jobs, itertools.chain([b for b in (first, second) if b is not None], batches)


def map_batches(
    work: Callable[[list[Item]], list[Result]],
    items: Iterable[Item],
    jobs: int = 0,
    *,
    initializer: Callable[..., None],
    initargs: tuple[Any, ...] = (),
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> Iterator[Result]:
    """``work`` over ``items`` in batches, in ``jobs`` processes (see :func:`resolve_jobs` for 0)."""
    jobs, batches = resolve_jobs(jobs, batched(items, batch_size))
    if jobs <= 1:
        initializer(*initargs)
        for batch in batches:
            yield from work(batch)
        return
    # fork where available: workers start in milliseconds and share the parent's imported modules.
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    with context.Pool(jobs, initializer=initializer, initargs=initargs) as pool:
        for results in pool.imap(work, batches):
            yield from results
