"""Write one root cause as a recreate test in Nova's idiom (``export --recreate``).

A recreate test passes on the Nova it was written against, asserting the
broken state under a ``FIXME``; its fixed form (``fixed=True``) asserts the
ledger's values and passes once the cause is fixed. Both are written from
one harness run of the cause's item moved to the nearest RPC boundary
where the cause still bites (:func:`boundary`): the periodic runs in a
``stub_out`` of that ``rpcapi`` method, before the call -- the very
interleaving the harness injected, with no tracer and no call counting.

Values are literals: what the harness's run read from Nova at each
checkpoint (the broken state, in the ``FIXME`` lines) and what the ledger
says the hosts hold (the fixed form). A cause whose effect the test's
terms (per host: pinned pCPUs, hugepages, vCPUs and memory used,
placement usages; the log) cannot show is refused, not written blind.
"""
from __future__ import annotations

import collections
import dataclasses
import pprint
import re
import textwrap
import time

from harness.errors import UsageError
from harness.execute.item import Item, target_roles
from harness.upstream.export import _ident

LICENCE = """\
# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.
"""
#: where an RPC API's methods live: a boundary a Nova test may stub
RPC_MODULES = ("nova.compute.rpcapi.", "nova.conductor.rpcapi.", "nova.scheduler.rpcapi.")
ENDINGS = ("confirm", "revert")
#: how many candidate boundaries are run before giving up
TRIES = 6


@dataclasses.dataclass
class Recreate:
    cause: object      # causes.Cause
    item: Item         # the item at the boundary, where the cause bit
    record: object     # its campaign.Record
    stub: str          # dotted path of the rpcapi method stubbed
    steps: list        # (step, seen, expected): per host, in the test's terms
    hosts: dict        # role -> host name, in the item's run
    logs: list         # the exceptions the periodic logs (the cause's log expects)
    module_name: str
    text: str          # the recreate test
    fixed_text: str    # its fixed form


def rpc_path(point_id: str) -> str | None:
    """The ``rpcapi`` method a point calls, or None."""
    from harness.upstream import trigger
    label = point_id.split(">", 1)[1].rsplit("#", 1)[0]
    try:
        path, _ = trigger.callee_path(label)
    except UsageError:
        return None
    return path if path.startswith(RPC_MODULES) else None


def candidates(item: Item, trace: list) -> list:
    """Items at RPC boundaries of ``trace``, nearest to ``item``'s point first; a method
    called more than once in the trace is left out (a stub could not tell the calls apart)."""
    paths = [rpc_path(p) for p in trace]
    once = {p for p, n in collections.Counter(paths).items() if p and n == 1}
    at = trace.index(item.point) if item.point in trace else 0
    found = [(abs(i - at), i, p) for i, p in enumerate(trace) if paths[i] in once]
    return [dataclasses.replace(item, point=p) for _, _, p in sorted(found)]


def judged_run(scen, item: Item, traces: dict) -> tuple:
    """Run ``item`` keeping what every checkpoint read: ``(run, record)``."""
    from harness.execute import campaign, runner
    from harness.explore import injection
    inj = injection.Injection(item.point, item.target, item.fault, detail=True)
    run = runner.Run(scen, item.ending, converge_every=False)
    run.keep_evidence = True
    started = time.monotonic()
    run.execute(lambda r: injection.Injector(r, inj, item.window))
    return run, campaign.judge(item, run, inj, traces, None, started)


def boundary(cause, item: Item, scen, traces: dict, say=lambda line: None) -> tuple:
    """The nearest RPC boundary where ``cause`` bites: ``(item, run, record)``."""
    tried = []
    for cand in candidates(item, traces[item.ending])[:TRIES]:
        run, record = judged_run(scen, cand, traces)
        bit = cause.name in record.causes.get("bit", [])
        say(f"  {cand.point}: {'bites' if bit else 'does not bite'} ({record.verdict})")
        if bit:
            return cand, run, record
        tried.append(cand.point)
    raise UsageError(f"root cause {cause.name}: it bites at no RPC boundary of {item.scenario} "
                     f"near {item.point} (tried {len(tried)})")


def usage(evidence, host: str, reserved_mb: int) -> dict:
    """What Nova showed for ``host`` at a checkpoint, in the test's terms."""
    rt = evidence.snap["rt"][host]
    pages: collections.Counter = collections.Counter()
    for cell in rt["cells"].values():
        pages.update(cell["pages"])
    return {"pinned": sum(len(c["cpus"]) for c in rt["cells"].values()),
            "pages": {k: v for k, v in sorted(pages.items()) if v},
            "vcpus": rt["vcpus_used"], "memory_mb": rt["memory_mb_used"] - reserved_mb,
            "placement": dict(evidence.snap["placement"]["usages"].get(host, {}))}


def ledger(phase, host: str) -> dict:
    """What ``host`` should hold at ``phase``, in the test's terms."""
    held = phase.held(host)
    placement: collections.Counter = collections.Counter()
    for hosts in phase.allocations().values():
        placement.update(hosts.get(host, {}))
    return {"pinned": held.pinned, "pages": {k: v for k, v in sorted(held.pages.items()) if v},
            "vcpus": held.vcpus, "memory_mb": held.memory_mb,
            "placement": {k: v for k, v in sorted(placement.items()) if v}}


def steps(run, scen) -> list:
    """``(step, seen, expected)`` after the boot, the move, the ending and one
    periodic after it, per host (a step the ledger cannot state is left out)."""
    hosts = [h.name for h in scen.hosts]
    by_name = {cp.name: cp for cp in run.result.checkpoints}
    out = []
    for name, step in (("after-boot", "boot"), (scen.operation.mid, "move"),
                       (f"after-{run.ending}", run.ending)):
        cp = by_name.get(name)
        if cp is None or cp.evidence is None or cp.evidence.phase.holdings is None:
            continue
        ev = cp.evidence
        want = {h: ledger(ev.phase, h) for h in hosts}
        out.append((step, {h: usage(ev, h, ev.reserved_mb) for h in hosts}, want))
        if step == run.ending and ev.after is not None:
            after = dataclasses.replace(ev, snap=ev.after)
            out.append(("periodic", {h: usage(after, h, ev.reserved_mb) for h in hosts}, want))
    return out


def build(cause, item: Item, scen, run, record, stub: str) -> Recreate:
    refuse(scen)
    found = steps(run, scen)
    logs = _log_expects(cause, record)
    if all(seen == want for _, seen, want in found) and not logs:
        raise UsageError(f"root cause {cause.name}: its effect in {item.id} does not show in a "
                         "recreate test's terms (per-host counts, placement usages, the log)")
    name = "test_" + re.sub(r"[^a-z0-9]+", "_", cause.name.lower()).strip("_")
    texts = [_render(cause, item, scen, run, record, stub, found, logs, fixed)
             for fixed in (False, True)]
    roles = {r: h for r, h in run.tracer.hosts.items() if r in ("source", "dest")}
    return Recreate(cause, item, record, stub, found, roles, logs, name, *texts)


def refuse_item(item: Item) -> None:
    """Before Nova loads: one resize or cold migration, the whole periodic on Nova as it is,
    an ending a test can wait on."""
    from harness import scenario as scenario_mod
    from harness.explore import faults
    refuse(scenario_mod.load(item.scenario))
    if item.fault != faults.DEFAULT_FAULT:
        raise UsageError(f"fault {item.fault}: a recreate test covers the whole periodic so far")
    if item.mutation:
        raise UsageError("a mutation is the harness's: a recreate test is of Nova as it is")
    if item.ending not in ENDINGS:
        raise UsageError(f"ending {item.ending}: a recreate test ends in {' or '.join(ENDINGS)}")


def index(rows: list, skipped: list) -> str:
    """The README of the recreate tests written by ``recreate --all-hard``."""
    import nova.version
    lines = ["# Recreate tests, one per hard root cause",
             "",
             f"Written by `nova-chaos recreate --all-hard --out docs/upstream` against Nova "
             f"{nova.version.version_string()}. Each `recreate/` module passes on that Nova, "
             "asserting the broken state under a `FIXME`; the module of the same name in "
             "`fixed/` asserts what the flavors say each host holds, fails on it, and passes "
             "once the cause is fixed. Run one as Nova runs its tests (or copy it into "
             "`nova/tests/functional/regressions/`):",
             "",
             "```sh",
             "python -m harness.upstream.nova_tests docs/upstream/recreate/MODULE.py",
             "```",
             "",
             "| root cause | module | from item | boundary stubbed | recreate | fixed |",
             "|---|---|---|---|---|---|"]
    for out, outcome in rows:
        lines.append(f"| {out.cause.name} | `{out.module_name}` | `{out.item.id}` | "
                     f"`{out.stub.rsplit('.', 2)[-2]}.{out.stub.rsplit('.', 1)[-1]}` | "
                     f"{outcome['recreate']} | {outcome['fixed']} |")
    if skipped:
        lines += ["", "Not written (the operation or fault is not one a recreate test covers "
                  "yet, or the effect does not show in its terms):", ""]
        lines += [f"- {name}: {why.split(': ', 1)[-1]}" for name, why in skipped]
    return "\n".join(lines) + "\n"


def refuse(scen) -> None:
    if scen.operation.name != "resize" or len(scen.moves) != 1:
        raise UsageError(f"{scen.operation.name} of {len(scen.moves)} servers: a recreate test "
                         "covers one resize or cold migration so far")
    if any(h.sockets != 1 for h in scen.hosts):
        raise UsageError(f"{scen.name}: Nova's fake host numbers CPUs by socket first")


def _log_expects(cause, record) -> list:
    """The exceptions the cause's log expects name, where they showed in this run."""
    names = set()
    for expect in cause.expects:
        if expect.check == "logs":
            names.update(re.findall(r"[A-Z][A-Za-z]+(?:Invalid|Unknown|Error)", str(expect.seen)))
    shown = " ".join(str(f.get("value", "")) for f in record.findings)
    return sorted(n for n in names if n in shown)


def _hosts(scen) -> dict:
    out = {}
    for topo in scen.hosts:
        cells = []
        for cell in topo.cells:
            huge = sum(size * n for size, n in cell.hugepages.items())
            cells.append([(4, (cell.memory_mb * 1024 - huge) // 4)]
                         + sorted(cell.hugepages.items()))
        out[topo.name] = (len(topo.cells), topo.cores, topo.threads,
                          sum(c.memory_mb for c in topo.cells) * 1024, cells)
    return out


def _hosts_lines(hosts: dict) -> list:
    out = ["HOSTS = {"]
    for name, (cells, cores, threads, mem, pages) in hosts.items():
        out.append(f"    {name!r}: ({cells}, {cores}, {threads}, {mem}, [")
        out += [f"        {cell!r}," for cell in pages]
        out.append("    ]),")
    return out + ["}"]


def _cpu_set(cpus) -> str:
    return ",".join(str(c) for c in sorted(cpus))


def _fmt(value, indent: int) -> str:
    text = pprint.pformat(value, width=79 - indent, sort_dicts=False)
    return text.replace("\n", "\n" + " " * indent)


def _bug(cause) -> str:
    number = re.match(r"https://bugs\.launchpad\.net/nova/\+bug/(\d+)", cause.bug or "")
    its_own = number and not re.search(r"related|sibling|face|fix does not", cause.bug)
    return f"bug {number.group(1)}" if its_own else "bug"


def _docstring(cause, item, scen, run, stub, caller) -> list:
    method = stub.rsplit(".", 2)
    paras = [cause.title[0].upper() + cause.title[1:] + ".",
             re.sub(r"\s+", " ", cause.why.strip()),
             f"The periodic runs on {_role_host(item, run)} in a stub of "
             f"{method[-2]}.{method[-1]}, before {caller} makes that call, "
             "which is when the state above holds."]
    lines = []
    for para in paras:
        lines += textwrap.wrap(para, 72) + [""]
    return lines[:-1]


def _role_host(item, run) -> str:
    return " and ".join(f"{run.tracer.hosts[r]} (the {r})" for r in target_roles(item.target))


def _render(cause, item, scen, run, record, stub, found, logs, fixed) -> str:
    hosts = {r: run.tracer.hosts[r] for r in target_roles(item.target)}
    caller = run.tracer.hosts.get(item.point.split(":", 1)[0], "the caller")
    module, cls_name, method = stub.rsplit(".", 2)
    alias = module.rsplit(".", 2)[-2] + "_rpcapi"
    cls = "Test" + "".join(w.capitalize() for w in re.split(r"[^a-zA-Z0-9]+", cause.name) if w)
    same_host = ["        self.flags(allow_resize_to_same_host=True)"] if scen.allow_same_host else []
    doc = _docstring(cause, item, scen, run, stub, caller)
    body = [LICENCE, "import collections", "from unittest import mock", "",
            f"from {module.rsplit('.', 1)[0]} import rpcapi as {alias}",
            "from nova import context as nova_context",
            "from nova import objects",
            "from nova.tests.fixtures import libvirt as fakelibvirt",
            "from nova.tests.functional.libvirt import base", "", "",
            "# name: (cells, cores per cell, threads, memory KiB, per cell pages)",
            *_hosts_lines(_hosts(scen)), "", "",
            f"class {cls}(base.ServersTestBase):",
            '    """' + doc[0], *[("    " + line) if line else "" for line in doc[1:]],
            '    """', "",
            "    microversion = 'latest'", "    ADMIN_API = True", "",
            "    def setUp(self):", "        super().setUp()",
            f"        self.flags(cpu_dedicated_set='{_cpu_set(scen.cpu_sets.dedicated)}',",
            f"                   cpu_shared_set='{_cpu_set(scen.cpu_sets.shared)}',",
            "                   group='compute')",
            "        self.flags(reserved_host_memory_mb=0)", *same_host,
            "        self.ctxt = nova_context.get_admin_context()",
            "        for name, (cells, cores, threads, mem, pages) in HOSTS.items():",
            "            info = fakelibvirt.HostInfo(",
            "                cpu_nodes=cells, cpu_cores=cores, cpu_threads=threads,",
            "                kB_mem=mem, mempages={",
            "                    i: fakelibvirt.create_mempages(p)",
            "                    for i, p in enumerate(pages)})",
            "            self.start_compute(hostname=name, host_info=info)", "",
            "    def _usages(self):",
            '        """Per host: (pinned pCPUs, hugepages used by size, vCPUs used,',
            '        memory used (MiB), placement usages), as its tracker saved them."""',
            "        usages = {}",
            "        for name in HOSTS:",
            "            node = objects.ComputeNode.get_by_nodename(self.ctxt, name)",
            "            cells = objects.NUMATopology.obj_from_db_obj(",
            "                node.numa_topology).cells",
            "            pages = collections.Counter()",
            "            for page in (p for cell in cells for p in cell.mempages):",
            "                pages[page.size_kb] += page.used if page.size_kb != 4 else 0",
            "            placement = self._get_provider_usages(self.compute_rp_uuids[name])",
            "            usages[name] = (",
            "                sum(len(cell.pinned_cpus) for cell in cells), dict(+pages),",
            "                node.vcpus_used, node.memory_mb_used,",
            "                {k: v for k, v in placement.items() if v})",
            "        return usages", "",
            f"    def test_{method}_with_periodic_before_it(self):"]
    for name, f in sorted(scen.flavors.items()):
        body += [f"        {_ident(name)} = self._create_flavor(",
                 f"            vcpu={f.vcpus}, memory_mb={f.memory_mb}, disk={f.disk_gb}, "
                 "ephemeral=0,",
                 f"            extra_spec={_fmt(dict(f.extra_specs), 23)})"]
    for boot in scen.boots:
        host = f", host={boot.host!r}" if boot.host else ""
        body += [f"        {_ident(boot.server)} = self._create_server(",
                 f"            flavor_id={_ident(boot.flavor)}{host}, networks='none')"]
    move = scen.moves[0]
    server = _ident(move.server)
    action = (f"{{'resize': {{'flavorRef': {_ident(move.flavor)}}}}}" if move.op == "resize"
              else f"{{'migrate': {{'host': {move.host!r}}}}}" if move.host else "{'migrate': None}")
    checks = {step: (seen, want) for step, seen, want in found}
    body += _check("boot", checks, fixed, cause)
    body += ["",
             f"        call = {alias}.{cls_name}.{method}", "",
             "        def periodic_then_call(*args, **kwargs):"]
    body += [f"            self.computes[{h!r}].manager.update_available_resource(\n"
             "                self.ctxt)" for h in hosts.values()]
    body += ["            return call(*args, **kwargs)", "",
             f"        self.stub_out(\n            '{stub}',\n"
             "            periodic_then_call)",
             "        with mock.patch(",
             "            'nova.virt.libvirt.driver.LibvirtDriver'",
             "            '.migrate_disk_and_power_off', return_value='{}',",
             "        ):",
             f"            self.api.post_server_action(\n                {server}['id'], {action})",
             f"            {server} = self._wait_for_state_change({server}, 'VERIFY_RESIZE')"]
    body += _check("move", checks, fixed, cause)
    ending = {"confirm": "confirmResize", "revert": "revertResize"}[item.ending]
    status = _status(record, move.server)
    event = {"confirm": "compute_confirm_resize", "revert": "compute_finish_revert_resize"}
    body += [f"        self.api.post_server_action({server}['id'], {{'{ending}': None}})",
             f"        {server} = self._wait_for_state_change({server}, '{status}')",
             f"        self._wait_for_instance_action_event(",
             f"            {server}, '{ending}', '{event[item.ending]}',",
             f"            '{'error' if status == 'ERROR' else 'success'}')"]
    for name in logs:
        body += ([f"        self.assertNotIn('{name}', self.stdlog.logger.output)"] if fixed else
                 [f"        # FIXME({_bug(cause)}): the periodic fails with {name}",
                  f"        self.assertIn('{name}', self.stdlog.logger.output)"])
    body += _check(item.ending, checks, fixed, cause)
    if "periodic" in checks:
        body += ["", "        self._run_periodics()"] + _check("periodic", checks, fixed, cause)
    return "\n".join(body) + "\n"


def _check(step: str, checks: dict, fixed: bool, cause) -> list:
    if step not in checks:
        return []
    seen, want = checks[step]
    out = []
    if not fixed and seen != want:
        out.append(f"        # FIXME({_bug(cause)}): this should be")
        for host in want:
            if seen[host] != want[host]:
                out += [f"        # {line}" for line in _host_lines(host, want[host], 0)]
    shown = want if fixed else seen
    out.append("        self.assertEqual({")
    for host in shown:
        out += _host_lines(host, shown[host], 12)
    return out + ["        }, self._usages())"]


def _host_lines(host: str, usage: dict, indent: int) -> list:
    """One host's usage as the test's tuple, wrapped at 79 columns."""
    head = (f"{' ' * indent}{host!r}: ({usage['pinned']}, {usage['pages']!r}, "
            f"{usage['vcpus']}, {usage['memory_mb']},")
    tail = f"{usage['placement']!r}),"
    if len(head) + 1 + len(tail) <= 79:
        return [f"{head} {tail}"]
    return [head, " " * (indent + len(repr(host)) + 3) + tail]


def _status(record, server: str) -> str:
    for f in record.findings:
        if f["check"] == "liveness" and f["where"] == f"server {server} status":
            return str(f["seen"]).strip("'")
    return "ACTIVE"
