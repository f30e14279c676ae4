"""Run campaign items with one of the strategies: ``fork`` (prefix reuse) or ``fresh``.

Each strategy is a module with one call, ``sweep(items, traces, jobs,
backend, on_result, timeout, parents)``, returning a
:class:`~harness.execute.record.Record` per item in item order and calling
``on_result`` as each arrives.
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


MODES = ("fork", "fresh")


def default_mode() -> str:
    from harness.execute import branching
    return "fork" if branching.fork_supported() else "fresh"


def strategy(mode: str):
    """The module that runs items in ``mode`` (imported on demand: fork loads eventlet's patcher)."""
    if mode == "fork":
        from harness.execute import fork
        return fork
    from harness.execute import fresh
    return fresh


def run_items(items, traces, jobs, backend, on_result, mode=None, timeout=ITEM_TIMEOUT,
              parents=None, memo=True) -> list:
    """Run ``items`` in ``mode`` (default: fork where the platform can).

    ``traces``: ``{trace_key: {ending: [point ids]}}`` from discovery;
    ``parents`` (a list) collects the fork strategy's prefix health lines;
    ``memo``: fork mode inherits continuations (:mod:`harness.execute.memo`).
    """
    return strategy(mode or default_mode()).sweep(items, traces, jobs, backend, on_result,
                                                  timeout, parents, memo)
