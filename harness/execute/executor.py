"""Run campaign items with one of the strategies: ``fork`` (prefix reuse) or ``fresh``.

A strategy is a :class:`Strategy` (one per ``--mode``, as pytest-xdist has
one scheduler per distribution mode): front ends ask it, never which mode
they hold. Its machinery lives in its module (:mod:`harness.execute.fork`,
:mod:`harness.execute.fresh`), imported on demand (fork loads eventlet's
patcher).
"""
from __future__ import annotations

import os

#: seconds one item may take before it is a reported failure (``run --timeout``)
ITEM_TIMEOUT = 120.0


def cores() -> int:
    """The cores this process may run on (its affinity, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def jobs_value(text: str) -> int:
    if text == "auto":
        return cores()
    n = int(text)
    if n < 1:
        raise ValueError(text)
    return n


class Strategy:
    """How items run: :meth:`sweep` returns a :class:`~harness.execute.record.Record` per
    item in item order, calling ``on_result`` as each arrives."""

    name = ""
    #: its uninjected parents' health lines (``parents``) belong in the run's report
    has_parents = False

    def sweep(self, items, traces, jobs, backend, on_result, timeout, parents=None,
              memo=True) -> list:
        raise NotImplementedError

    def in_worker(self, items, traces, jobs, backend, emit, timeout) -> None:
        """A worker subprocess's share (:mod:`harness.front.worker`)."""
        self.sweep(items, traces, jobs, backend, emit, timeout)


class Fork(Strategy):
    """Each prefix run once, its items forked from it (:mod:`harness.execute.fork`)."""

    name, has_parents = "fork", True

    def sweep(self, items, traces, jobs, backend, on_result, timeout, parents=None, memo=True):
        from harness.execute import fork
        return fork.sweep(items, traces, jobs, backend, on_result, timeout, parents, memo)


class Fresh(Strategy):
    """A new cloud per item, in worker subprocesses (:mod:`harness.execute.fresh`)."""

    name = "fresh"

    def sweep(self, items, traces, jobs, backend, on_result, timeout, parents=None, memo=True):
        from harness.execute import fresh
        return fresh.sweep(items, traces, jobs, backend, on_result, timeout, parents, memo)

    def in_worker(self, items, traces, jobs, backend, emit, timeout):
        from harness.execute import fresh
        fresh.run_here(items, traces, emit, timeout)  # one at a time in this process


STRATEGIES = {s.name: s for s in (Fork(), Fresh())}
MODES = tuple(STRATEGIES)


def default_mode() -> str:
    from harness.execute import branching
    return "fork" if branching.fork_supported() else "fresh"


def strategy(mode: str) -> Strategy:
    """The strategy that runs items in ``mode``."""
    return STRATEGIES[mode]


def run_items(items, traces, jobs, backend, on_result, mode=None, timeout=ITEM_TIMEOUT,
              parents=None, memo=True) -> list:
    """Run ``items`` in ``mode`` (default: fork where the platform can).

    ``traces``: ``{trace_key: {ending: [point ids]}}`` from discovery;
    ``parents`` (a list) collects the fork strategy's prefix health lines;
    ``memo``: fork mode inherits continuations (:mod:`harness.execute.memo`).
    """
    return strategy(mode or default_mode()).sweep(items, traces, jobs, backend, on_result,
                                                  timeout, parents, memo)
