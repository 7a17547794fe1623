"""Batches of orderings searched in order, in this process or in forked worker processes."""

from __future__ import annotations

import logging
import multiprocessing
import sys
from collections import deque
from collections.abc import Iterator

import numpy as np
import torch

from memcap.numerics.batched_search import search_device
from memcap.numerics.prefix import PrefixProblem
from memcap.numerics.search import SearchHint, search_batch

_logger = logging.getLogger(__name__)


def search_batches(
    problem: PrefixProblem, batches: Iterator[torch.Tensor], workers: int
) -> Iterator[tuple[torch.Tensor, np.ndarray]]:
    """(orderings, m) for each batch, in order.

    The first batch is searched here; its hint guides the others. The device search
    (:mod:`memcap.numerics.batched_search`) runs here, batch after batch. With several workers
    and the Gram route's host search on the CPU, later batches go to forked processes that
    share the problem (its Gram matrix included) copy-on-write, at most two batches per worker
    in flight. The m do not depend on ``workers``.
    """
    first = next(batches)
    search = (
        search_device if problem.route == "gram" and problem.search == "device" else search_batch
    )
    m, hint = search(problem, first, None)
    yield first, m
    host_gram = problem.route == "gram" and problem.search == "host"
    parallel = workers > 1 and host_gram and problem.x.device.type == "cpu"
    if parallel and not can_fork():
        _logger.warning("workers=%d ignored: no safe fork on %s", workers, sys.platform)
        parallel = False
    if not parallel:
        for order in batches:
            m, hint = search(problem, order, hint)
            yield order, m
        return
    context = multiprocessing.get_context("fork")
    with context.Pool(workers, initializer=_start_worker, initargs=(problem, hint)) as pool:
        pending: deque = deque()
        for order in batches:
            pending.append((order, pool.apply_async(_search_in_worker, (order.numpy(),))))
            if len(pending) >= 2 * workers:
                order, result = pending.popleft()
                yield order, result.get()
        while pending:
            order, result = pending.popleft()
            yield order, result.get()
        pool.close()
        pool.join()


def can_fork() -> bool:
    """Whether worker processes can be forked safely (not on macOS, where system frameworks
    do not survive a fork, nor where the platform has no fork)."""
    return sys.platform != "darwin" and "fork" in multiprocessing.get_all_start_methods()


# What a forked search worker keeps between batches: the problem and its latest hint.
_worker: dict = {}


def _start_worker(problem: PrefixProblem, hint: SearchHint | None) -> None:
    """Set up a forked worker (the problem is inherited, not pickled)."""
    torch.set_num_threads(1)
    _worker.update(problem=problem, hint=hint)


def _search_in_worker(order: np.ndarray) -> np.ndarray:
    m, _worker["hint"] = search_batch(_worker["problem"], torch.from_numpy(order), _worker["hint"])
    return m
