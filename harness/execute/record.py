"""A finished item as whoever ran it reports it: the one result type every strategy,
worker, report and front end passes around (it travels as one JSON line)."""
from __future__ import annotations

import dataclasses

from harness.execute.campaign import Item


@dataclasses.dataclass
class Record:
    """A finished item as the parent sees it (from JSON, wherever it ran)."""

    item: Item
    verdict: str
    problems: list
    known: list
    seconds: float
    data: dict

    @classmethod
    def from_json(cls, data: dict) -> "Record":
        return cls(Item.parse(data["id"]), data["verdict"], data["problems"], data["known"],
                   data["seconds"], data)

    def to_json(self) -> dict:
        return self.data

    @classmethod
    def error(cls, item: Item, why: str) -> "Record":
        """An item that produced no judged result (its process died, its point was missed)."""
        return cls(item, "error", [f"error: {why}"], [], 0.0,
                   {"id": item.id, "verdict": "error", "problems": [f"error: {why}"],
                    "known": [], "seconds": 0.0})

    @property
    def fired(self) -> list:
        return self.data.get("fired", [])
