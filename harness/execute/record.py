"""A finished item: the one result type every strategy, worker, report and front
end passes around, wherever the item ran (it travels as one JSON line).

Why an item is not a pass is a list of typed :class:`Problem` s, so a reader
(the verdict, the report's grouping, ``rejudge``, the proposal of known
entries) asks for a kind, never parses a sentence.
"""
from __future__ import annotations

import dataclasses

from harness.execute.item import Item

#: what can be wrong with an item
#: error -- it stopped short of a planned checkpoint, or its process died: it proved nothing
#: diverged-trace -- it left the recorded trace before its point: it proved nothing
#: missed-injection -- the periodic did not fire at the point on every target
#: finding -- a check saw what no known-findings entry covers
#: stale-known -- an entry that applies to the item did not show what it expects
KINDS = ("error", "diverged-trace", "missed-injection", "finding", "stale-known")
#: kinds that leave nothing judged: the item is an error whatever its checkpoints say
PROVED_NOTHING = ("error", "diverged-trace")


@dataclasses.dataclass(frozen=True)
class Problem:
    kind: str
    text: str

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown problem kind {self.kind!r}")

    def __str__(self) -> str:
        return self.text

    def to_json(self) -> dict:
        return {"kind": self.kind, "text": self.text}

    @classmethod
    def from_json(cls, data) -> "Problem":
        if not isinstance(data, dict):
            raise TypeError("a problem without a kind (a report from an older nova-chaos)")
        return cls(data["kind"], data["text"])


@dataclasses.dataclass
class Record:
    """A judged item. ``checkpoints``, ``trace`` and ``changes`` are the
    in-process detail ``replay`` prints; they do not travel."""

    item: Item
    verdict: str                 # pass | known | fail | error
    problems: list               # Problem, in the order they were found
    known: list = dataclasses.field(default_factory=list)     # lines: known findings shown
    seconds: float = 0.0
    fired: list = dataclasses.field(default_factory=list)     # "host (now|deferred)"
    findings: list = dataclasses.field(default_factory=list)  # dicts, as in the JSON report
    log: list = dataclasses.field(default_factory=list)       # Nova's warnings (fail/error)
    checkpoints: list = dataclasses.field(default_factory=list, repr=False)
    trace: list = dataclasses.field(default_factory=list, repr=False)
    changes: dict = dataclasses.field(default_factory=dict, repr=False)
    memo: str | None = None      # the run whose continuation it inherited (harness.execute.memo)
    state: dict = dataclasses.field(default_factory=dict)  # role -> what its periodic met
    #: root causes (harness.oracles.causes): {"bit": names, "held": names whose condition held}
    causes: dict = dataclasses.field(default_factory=dict)

    def of_kind(self, *kinds) -> list:
        return [p for p in self.problems if p.kind in kinds]

    def to_json(self) -> dict:
        return {
            "id": self.item.id, "verdict": self.verdict, "seconds": round(self.seconds, 3),
            "fired": self.fired, "problems": [p.to_json() for p in self.problems],
            "known": self.known, "findings": self.findings,
            "replay": self.item.replay_command(),
            # evidence for a failure that may not replay: what Nova warned of, in order
            **({"log": self.log} if self.log else {}),
            **({"memo": self.memo} if self.memo else {}),
            # the state the injected periodic acted on, per role (harness.oracles.state)
            **({"state": self.state} if self.state else {}),
            **({"causes": self.causes} if self.causes else {}),
        }

    @classmethod
    def from_json(cls, data: dict) -> "Record":
        return cls(Item.parse(data["id"]), data["verdict"],
                   [Problem.from_json(p) for p in data["problems"]], data["known"],
                   data["seconds"], data.get("fired", []), data.get("findings", []),
                   data.get("log", []), memo=data.get("memo"), state=data.get("state", {}),
                   causes=data.get("causes", {}))

    @classmethod
    def error(cls, item: Item, why: str) -> "Record":
        """An item that produced no judged result (its process died, its point was missed)."""
        return cls(item, "error", [Problem("error", f"error: {why}")])
