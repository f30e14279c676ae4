"""The faults an item injects at its point: Nova's periodic run whole, or split inside itself.

``periodic``: ``update_available_resource`` runs to completion at the point
(deferred to the release of its lock if the point holds it).
``split`` (depth two, :mod:`harness.explore.split`): it stops between its
instance and migration reads and finishes at the operation's next yield
point; ``split:N`` lets N calls of the operation run before it finishes (a
move that changes both lists in several calls, as 1896463's did, needs more
than one). Either finishes earlier if something asks for its lock, and
before the next checkpoint.
``restart`` (:mod:`harness.explore.restart`): the compute whose code runs
at the point dies there (its thread frozen, as a killed process's) and a
new ComputeManager starts on the same fake host; the item then checks the
recovery and deletes every server.
"""
from harness.errors import UsageError

FAULTS = ("periodic", "split", "split:N", "restart")
DEFAULT_FAULT = "periodic"
RESTART = "restart"


def is_restart(fault: str) -> bool:
    return fault == RESTART


def split_distance(fault: str) -> int | None:
    """How many of the operation's calls run while the periodic is stopped (None: not split)."""
    if fault in (DEFAULT_FAULT, RESTART):
        return None
    if fault == "split":
        return 1
    kind, _, n = fault.partition(":")
    if kind == "split" and n.isdigit() and int(n) >= 1:
        return int(n)
    raise UsageError(f"unknown fault {fault!r}; valid: periodic, split, split:N (N >= 1), restart")


def checked(fault: str) -> str:
    """``fault`` if it names one (for argparse and item ids), else UsageError."""
    split_distance(fault)
    return fault


def check_backend(fault: str, backend: str) -> None:
    """UsageError if ``fault`` cannot run on the loaded Nova's ``backend``."""
    if is_restart(fault) and backend != "threads":
        raise UsageError(f"fault restart needs the threads backend (Nova 34's default); "
                         f"this run's is {backend} (eventlet is deprecated)")
