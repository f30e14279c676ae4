"""Write one item as a standalone Nova regression test (``nova-chaos export``).

The module uses Nova's own test fixtures only (its helpers are
:mod:`harness.upstream.prelude`, copied in as text): the scenario's hosts
and flavors, the periodic run by a stub at the item's point on its target
host(s), the ending, the deletes; after each step, what Nova accounts is
compared with what the flavors say each host holds (the harness's ledger,
never what Nova did), before any periodic, then once more after one on
every host. Expected values are literals in the module.
"""
from __future__ import annotations

import collections
import dataclasses
import hashlib
import inspect
import os
import pprint
import re
import textwrap

from harness.errors import UsageError
from harness.execute.item import Item, target_roles
from harness import faults
from harness.oracles import causes, known
from harness.upstream import trigger

ENDINGS = ("confirm", "revert")


@dataclasses.dataclass
class Exported:
    item: Item
    module_name: str   # file name without .py
    test_id: str       # module.Class.method
    text: str
    record: object     # the harness's own judgement of the item (campaign.Record)
    entry: object      # the reviewed known finding covering it, or None


def refuse_unsupported(scen, item: Item) -> None:
    if item.mutation:
        raise UsageError(f"{item.id}: export writes a test of Nova as it is; a mutation is "
                         "the harness's (apply it around the exported test instead)")
    refusal = faults.parse(item.fault).export_refusal()
    if refusal:
        raise UsageError(f"{item.id}: {refusal}")
    if scen.operation.name != "resize":
        raise UsageError(f"{item.id}: export supports resize and cold migration scenarios, "
                         f"not {scen.operation.name}")
    if item.ending not in ENDINGS:
        raise UsageError(f"{item.id}: export supports the endings {', '.join(ENDINGS)}, "
                         f"not {item.ending}")


def build(item: Item, scen, record, found: trigger.Found) -> Exported:
    """The module's text for ``item``; ``record``: the harness's run of it,
    ``found``: its trigger and the uninjected run it was counted in."""
    if found.nth is None or found.host is None:
        raise UsageError(f"{item.id}: the uninjected run never reached the point from the "
                         "move's request on: nothing to stub")
    run = found.run  # the item's own run: the hosts Nova chose, as the harness saw them
    targets = targets_of(item, found)
    entry = mechanism(item, record)
    digest = hashlib.sha1(item.id.encode()).hexdigest()[:8]
    module_name = f"test_chaos_{_ident(scen.name)}_{item.ending}_{digest}"
    cls = "Test" + "".join(w.capitalize() for w in re.split(r"[^a-zA-Z0-9]+", scen.name) if w)
    method = f"test_{item.ending}_periodic_on_{item.target}_at_{_ident(_callee(item.point))}"
    expected = {name: _expected(run, scen, name) for name in run.planned()}
    text = _render(item, scen, record, found, targets, entry, cls, method, expected)
    return Exported(item, module_name, f"{module_name}.{cls}.{method}", text, record, entry)


def targets_of(item: Item, found: trigger.Found) -> list:
    """The hosts the item's periodic runs on."""
    return [found.run.tracer.hosts[r] for r in target_roles(item.target)]


def seen_of(finding: dict) -> str:
    """A finding's seen value as a stable text: log lines carry times and request
    ids, so for them the exceptions they end in (the known-findings value)."""
    if finding["check"] == "logs" or finding["where"].startswith("log lines"):
        return finding["value"]
    return finding["seen"]


def mechanism(item: Item, record):
    """The reviewed mechanism behind ``item``: the first root cause that bit in its run
    (``record``), else a known-findings entry that applies to it, else None."""
    by_name = {c.name: c for c in causes.load()}
    bit = [by_name[n] for n in (record.causes.get("bit", []) if record else []) if n in by_name]
    if bit:
        return bit[0]
    return next((e for e in known.load() if e.applies(item)), None)


def item_of_cause(name: str) -> Item:
    """The item that shows root cause ``name`` for export: the first of its samples
    (``scenarios/cause-samples.toml``, each the clearest item where it bit) that is a
    whole periodic in a resize or cold migration with an ending export writes."""
    from harness import scenario as scenario_mod
    from harness.front import by_cause
    causes.named([name])
    samples = by_cause.load_samples(os.path.join(scenario_mod.SCENARIO_DIR, by_cause.SAMPLES_FILE))
    for item_id in samples.get(name, []):
        item = Item.parse(item_id)
        if (not faults.parse(item.fault).export_refusal() and not item.mutation and item.ending in ENDINGS
                and scenario_mod.load(item.scenario).operation.name == "resize"):
            return item
    raise UsageError(f"root cause {name}: no sample export can write (a whole periodic in a "
                     f"resize or cold migration ending in {', '.join(ENDINGS)})")


def _callee(point_id: str) -> str:
    return point_id.split(">", 1)[1].replace("#", "_")


def _ident(text: str) -> str:
    return re.sub(r"[^a-zA-Z0-9]+", "_", text).strip("_").lower()


def _expected(run, scen, name: str) -> dict | None:
    """What each host should hold at checkpoint ``name``, in :func:`prelude.usage`'s terms."""
    phase = run.ledger(name)
    if phase.holdings is None:
        return None
    out = {}
    for host in scen.hosts:
        want = phase.held(host.name)
        placement: dict = collections.Counter()
        for hosts in phase.allocations().values():
            placement.update(hosts.get(host.name, {}))
        out[f"{host.name} pinned pCPUs"] = want.pinned
        out[f"{host.name} hugepages used"] = dict(sorted(want.pages.items()))
        out[f"{host.name} small pages used"] = want.small_pages
        out[f"placement {host.name} usages"] = dict(sorted(placement.items()))
    return out


def _hosts(scen) -> dict:
    """Each host's layout, exactly as the harness's fake host reports it to Nova."""
    from fake_driver.host import capabilities_topology
    out = {}
    for topo in scen.hosts:
        cells = []
        for cell in capabilities_topology(topo).cells:
            cpus = [(c.id, c.socket_id, c.core_id, sorted(c.siblings)) for c in cell.cpus]
            pools = [(p.size, p.total) for p in cell.mempages]
            cells.append((cell.id, cell.memory, cpus, pools))
        out[topo.name] = {"cells": cells, "sockets": topo.sockets, "cores": topo.cores,
                          "threads": topo.threads}
    return out


def _flavors(scen) -> dict:
    return {name: {"vcpu": f.vcpus, "memory_mb": f.memory_mb, "disk": f.disk_gb,
                   "extra_spec": dict(f.extra_specs)} for name, f in sorted(scen.flavors.items())}


def _cpu_set(cpus) -> str | None:
    return ",".join(str(c) for c in sorted(cpus)) or None


def _prelude() -> str:
    """The helpers' source without their module docstring."""
    from harness.upstream import prelude  # imports Nova: only once the backend is chosen
    source = inspect.getsource(prelude)
    return source.split('"""', 2)[2].lstrip("\n")


def _docstring(item, scen, record, entry, found, targets) -> str:
    lines = textwrap.wrap(f"{scen.description} ({scen.name}): {item.ending}, with the "
                          f"resource tracker's periodic run on {', '.join(targets)} at one "
                          "call of the move.", 79) + [""]
    if entry is not None:
        lines += ["Mechanism (reviewed, nova-chaos root causes):", f"    {entry.reason}", ""]
        if entry.bug:
            lines += [f"Bug: {entry.bug}", ""]
    lines += [f"The point: {item.point}",
              f"  = call {found.nth} of {found.callee}"
              + (f" ({found.detail})" if found.detail else "")
              + f" made by compute {found.host}, counted from the move's request on.",
              "",
              f"What the harness saw ({record.verdict}):"]
    findings = [f"    {f['checkpoint']}: [{f['check']}] {f['where']}: expected {f['expected']}, "
                f"seen {seen_of(f)}" for f in record.findings] or ["    nothing wrong"]
    lines += findings[:12] + ([f"    ... and {len(findings) - 12} more"] if len(findings) > 12 else [])
    lines += ["", "Each check compares Nova's accounting (the compute nodes as saved, placement)",
              "with what the flavors say each host holds, before any periodic.",
              "", f"Replay in the harness: {item.replay_command()}",
              f"Written by: nova-chaos export '{item.id}'"]
    return "\n".join(lines)


def _render(item, scen, record, found, targets, entry, cls, method, expected) -> str:
    fmt = lambda value: pprint.pformat(value, width=96, sort_dicts=False)  # noqa: E731
    body = [f"        self.start_hosts(HOSTS, {_cpu_set(scen.cpu_sets.dedicated)!r}, "
            f"{_cpu_set(scen.cpu_sets.shared)!r}, same_host={scen.allow_same_host!r})",
            "        self.create_flavors(FLAVORS)"]
    for boot in scen.boots:
        body.append(f"        self.boot({boot.server!r}, {boot.flavor!r}, {boot.host!r})")
    body += _check_lines("after-boot", expected)
    body += ["        # the point: run the periodic there, as production's could",
             "        trigger = self.useFixture(Trigger(",
             f"            CALLEE, DETAIL, {found.host!r}, nth={found.nth},",
             f"            action=lambda: self.periodic_at_point({targets!r})))",
             "        trigger.arm()"]
    for move in scen.moves:
        if move.op == "resize":
            body.append(f"        self.resize({move.server!r}, {move.flavor!r})")
        else:
            body.append(f"        self.migrate({move.server!r}, {move.host!r})")
    body += _check_lines(scen.operation.mid, expected)
    for move in scen.moves:
        body.append(f"        self.{item.ending}({move.server!r})")
    body += ["        if not trigger.fired:",
             "            self.problems.append(\"the point was never reached: nothing was tested\")"]
    body += _check_lines(f"after-{item.ending}", expected, converge=True)
    body.append("        self.delete_all()")
    body += _check_lines("after-delete", expected, converge=True)
    body.append("        self.assertNoProblems()")
    return "\n".join([
        '"""' + _docstring(item, scen, record, entry, found, targets).replace("\\", "\\\\")
        + '\n"""',
        _prelude().rstrip("\n"), "", "",
        f"HOSTS = {fmt(_hosts(scen))}",
        f"FLAVORS = {fmt(_flavors(scen))}",
        f"CALLEE = {found.callee!r}",
        f"DETAIL = {found.detail!r}",
        f"EXPECTED = {fmt(expected)}",
        "#: what nova-chaos reported for this item: (checkpoint, check, where, expected, seen)",
        f"HARNESS_SAW = {fmt([(f['checkpoint'], f['check'], f['where'], f['expected'], seen_of(f)) for f in record.findings])}",
        "", "",
        f"class {cls}(MoveTestBase):",
        "",
        f"    def {method}(self):",
        *body, ""])


def _check_lines(name: str, expected: dict, converge: bool = False) -> list:
    if expected.get(name) is None:
        return []
    out = [f"        self.check({name!r}, EXPECTED[{name!r}])"]
    if converge:
        out.append(f"        self.check_converged({name!r})")
    return out
