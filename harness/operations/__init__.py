"""The operations a scenario's subject move can be, each owning what is particular to it.

The engine (tracer, injection, fork, judging) is generic over them: an
operation names the scenario steps it accepts and their endings, the Nova
calls that drive it (:meth:`Operation.steps`), where its window opens and
closes and what its core is (:class:`Bounds`), and the ledger of every
phase (:meth:`Operation.phase`), derived from flavors and the hosts Nova
chose.
"""
from __future__ import annotations

from harness.operations.base import Bounds, Operation
from harness.operations.evacuate import EVACUATE
from harness.operations.live import LIVE_MIGRATION
from harness.operations.resize import RESIZE
from harness.operations.unshelve import UNSHELVE

#: operation name -> the operation
OPERATIONS = {op.name: op for op in (RESIZE, LIVE_MIGRATION, UNSHELVE, EVACUATE)}
#: scenario step op -> the operation a move of that kind is
BY_STEP = {step: op for op in OPERATIONS.values() for step in op.ops}

__all__ = ["BY_STEP", "Bounds", "EVACUATE", "LIVE_MIGRATION", "OPERATIONS", "Operation", "RESIZE", "UNSHELVE"]
