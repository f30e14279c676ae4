"""``split`` / ``split:N`` (depth two): the periodic stops between its instance
and migration reads and finishes after N of the operation's calls (default
one), or earlier if something asks for its lock, and before the next
checkpoint (the machinery: :mod:`harness.explore.split`)."""
from harness.faults.base import Fault


class Split(Fault):
    kind, glob = "split", "split*"
    summary = ("split: it stops between its instance and migration reads and finishes at "
               "the next yield point; split:N after N of the operation's calls (depth two)")

    def __init__(self, spec: str, calls: int):
        super().__init__(spec)
        self.pause_calls = calls

    @classmethod
    def parse(cls, spec: str):
        kind, colon, n = spec.partition(":")
        if kind != cls.kind:
            return None
        if not colon:
            return cls(spec, 1)
        return cls(spec, int(n)) if n.isdigit() and int(n) >= 1 else None

    def missed(self, fired_at, hosts, reached):
        """Depth two or nothing proved: it must have stopped between its reads."""
        return super().missed(fired_at, hosts, reached) + [
            f"the split periodic never stopped between its reads: {fired}"
            for fired in fired_at if "split: resumed at " not in fired]

    def export_refusal(self):
        return f"export supports the whole periodic only, not fault {self.spec!r}"

    def recreate_refusal(self, scen, ending, endings):
        return (f"fault {self.spec}: a recreate test covers the whole periodic and the "
                "restart so far")
