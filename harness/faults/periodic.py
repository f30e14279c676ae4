"""``periodic``: Nova's ``update_available_resource`` runs whole at the point,
deferred to the release of its lock if the point holds it (the default fault)."""
from harness.faults.base import Fault


class Periodic(Fault):
    kind = glob = "periodic"
    implicit = True
    summary = "periodic: the periodic runs whole at each point (the default)"

    @classmethod
    def parse(cls, spec: str):
        return cls(spec) if spec == cls.kind else None
