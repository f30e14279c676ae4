"""An item of a campaign: (scenario, point id, target, ending[, window][, fault][, mutation]).

Its id is plain text, the same everywhere, and is all ``nova-chaos replay``
needs.
"""
from __future__ import annotations

import dataclasses

from harness.errors import UsageError
from harness import faults
from harness.faults.base import target_roles  # noqa: F401 (its home before harness.faults)
from harness.explore.tracer import DEFAULT_WINDOW

SEP = "/"
#: the point of an *uninjected* item: the scenario run with no fault at all, the
#: path every item of its ending starts from (its target is :data:`NOWHERE`)
UNINJECTED, NOWHERE = "uninjected", "none"


@dataclasses.dataclass(frozen=True)
class Item:
    scenario: str
    point: str
    target: str
    ending: str
    mutation: str | None = None
    window: str = DEFAULT_WINDOW
    fault: str = faults.DEFAULT  # its spec (harness.faults)

    @property
    def id(self) -> str:
        base = SEP.join((self.scenario, self.point, self.target, self.ending))
        if self.window != DEFAULT_WINDOW:
            base += f"{SEP}window={self.window}"
        if not faults.parse(self.fault).implicit:
            base += f"{SEP}fault={self.fault}"
        return base + (f"{SEP}mutate={self.mutation}" if self.mutation else "")

    @classmethod
    def parse(cls, text: str) -> "Item":
        parts = text.split(SEP)
        options = {}
        while parts and parts[-1].split("=", 1)[0] in ("mutate", "window", "fault") and "=" in parts[-1]:
            key, value = parts.pop().split("=", 1)
            options[key] = value
        if len(parts) != 4:
            raise UsageError(f"bad item id {text!r}; expected "
                             "SCENARIO/POINT/TARGET/ENDING[/window=NAME][/fault=NAME][/mutate=NAME]")
        fault = faults.checked(options.get("fault", faults.DEFAULT))
        return cls(*parts, mutation=options.get("mutate"),
                   window=options.get("window", DEFAULT_WINDOW), fault=fault)

    @classmethod
    def uninjected(cls, scenario: str, ending: str, mutation: str | None = None) -> "Item":
        """The uninjected run of ``scenario`` with ``ending`` (whatever the window or fault)."""
        return cls(scenario, UNINJECTED, NOWHERE, ending, mutation)

    @property
    def is_uninjected(self) -> bool:
        return self.point == UNINJECTED

    def replay_command(self) -> str:
        if self.is_uninjected:  # the same run, on its own, with every check printed
            return (f"nova-chaos baseline {self.scenario} --ending {self.ending}"
                    + (f" --mutate {self.mutation}" if self.mutation else ""))
        return f"nova-chaos replay '{self.id}'"
