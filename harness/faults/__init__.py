"""The faults an item injects at its point, one module each behind one small
protocol (:class:`harness.faults.base.Fault`): whatever asks about a fault
asks it, never which one it is.

A spec is the text ids, reports and ``--fault`` carry; :func:`parse` turns
it into its fault. Adding a fault: its module and a line in ``KINDS``.
"""
import functools

from harness.errors import UsageError
from harness.faults.base import Fault
from harness.faults.driver import Driver
from harness.faults.periodic import Periodic
from harness.faults.placement import Placement
from harness.faults.restart import Restart
from harness.faults.rpc import Rpc
from harness.faults.split import Split

#: every fault, in the order help texts list them
KINDS = (Periodic, Split, Restart, Driver, Placement, Rpc)
#: the fault an item injects when its id names none
DEFAULT = Periodic.kind
#: the specs ``--fault`` takes, as help texts list them
SPECS = ("periodic, split, split:N (N >= 1), restart, driver, placement:409, placement:503, "
         "rpc, rpc:reply")


@functools.lru_cache(maxsize=None)
def parse(spec: str) -> Fault:
    """The fault ``spec`` names; UsageError (one line, every valid spec) otherwise."""
    for kind in KINDS:
        fault = kind.parse(spec)
        if fault is not None:
            return fault
    raise UsageError(f"unknown fault {spec!r}; valid: {SPECS}")


def checked(spec: str) -> str:
    """``spec`` if it names a fault (for argparse and item ids), else UsageError."""
    parse(spec)
    return spec


def help_text() -> str:
    """Every fault's one line, for ``--fault``."""
    return "; ".join(k.summary for k in KINDS)


def periodic_globs() -> list:
    """The globs naming every fault that runs Nova's periodic (a root cause's default)."""
    return [k.glob for k in KINDS if k.periodic]
