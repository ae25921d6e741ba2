"""Batches of work in worker processes, results in input order (used by transform, chunk and stats).

Each process builds its state once, ``setup(*args)`` (tokenizers, lookups...: what is costly to send
with every batch), then maps batches with ``work(state, batch)``. ``setup`` must not fail (validate
before): multiprocessing replaces a worker that dies in its initializer by a new one, without end. With
one job the same two functions run in this process, so the results cannot depend on the number of jobs.
Ctrl-C (SIGINT to the whole process group) is left to the process that started the workers: it stops
them, and the CLI ends quietly with 130, with no worker printing a traceback.
"""

from __future__ import annotations

import functools
import itertools
import multiprocessing
import os
import signal
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")
State = TypeVar("State")

DEFAULT_BATCH_SIZE = 256


def batched(items: Iterable[Item], size: int) -> Iterator[list[Item]]:
    iterator = iter(items)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


def resolve_jobs(jobs: int, batches: Iterator[list[Item]]) -> tuple[int, Iterator[list[Item]]]:
    """The processes to start: ``jobs``, or for 0 one per CPU core; never more than there are batches (a
    small input is not worth starting processes for, and a process with no batch only costs memory).
    Returns the job count and the batches, none of them consumed."""
    wanted = jobs or os.cpu_count() or 1
    head = list(itertools.islice(batches, wanted))
    return max(1, min(wanted, len(head))), itertools.chain(head, batches)


def map_batches(
    work: Callable[[State, list[Item]], list[Result]],
    items: Iterable[Item],
    jobs: int = 0,
    *,
    setup: Callable[..., State],
    args: tuple[Any, ...] = (),
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> Iterator[Result]:
    """``work(setup(*args), batch)`` over ``items`` in batches, in ``jobs`` processes (see :func:`resolve_jobs`
    for 0), each process setting up its state once."""
    jobs, batches = resolve_jobs(jobs, batched(items, batch_size))
    if jobs <= 1:
        state = setup(*args)
        for batch in batches:
            yield from work(state, batch)
        return
    # fork where available: workers start in milliseconds and share the parent's imported modules.
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    with context.Pool(jobs, initializer=_set_up, initargs=(setup, args)) as pool:
        for results in pool.imap(functools.partial(_in_worker, work), batches):
            yield from results


_worker_state: Any = None  # this worker process's setup(*args)
_in_a_worker = False


def in_worker() -> bool:
    """Whether this runs in one of map_batches' worker processes (its results then cross to the process
    that called map_batches), not in that process itself."""
    return _in_a_worker


def _set_up(setup: Callable[..., Any], args: tuple[Any, ...]) -> None:
    global _worker_state, _in_a_worker
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _worker_state, _in_a_worker = setup(*args), True


def _in_worker(work: Callable[[Any, list[Item]], list[Result]], batch: list[Item]) -> list[Result]:
    return work(_worker_state, batch)
