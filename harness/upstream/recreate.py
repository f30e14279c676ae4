"""Write one root cause as a recreate test in Nova's idiom (``nova-chaos recreate``).

A recreate test passes on the Nova it was written against, asserting the
broken state under a ``FIXME``; its fixed form asserts the ledger's values
and passes once the cause is fixed. Both are written from one harness run
of the cause's item moved to the nearest named boundary where the cause
still bites (:func:`bites`): an ``rpcapi`` method called once in the
trace, or, for a restart, also a libvirt driver method the dying host
calls once -- the very interleaving the harness injected, with no tracer
and no call counting. The text is :mod:`harness.upstream.recreate_render`'s.

Values are literals: what the harness's run read from Nova at each
checkpoint (the broken state, in the ``FIXME`` lines) and what the ledger
says the hosts hold (the fixed form). A cause whose effect the test's
terms (per host: pinned pCPUs, hugepages, vCPUs and memory used,
placement usages; the log; what a restart's recovery left of the move)
cannot show is refused, not written blind.
"""
from __future__ import annotations

import collections
import dataclasses
import re
import time

from harness.errors import UsageError
from harness.execute.item import Item, target_roles
from harness.explore import point_ids
from harness.explore.recovery import after_words as recovery_words

#: where an RPC API's methods live: a boundary a Nova test may stub
RPC_MODULES = ("nova.compute.rpcapi.", "nova.conductor.rpcapi.", "nova.scheduler.rpcapi.")
DRIVER = "nova.virt.libvirt.driver.LibvirtDriver."
#: object saves a dying host may be stopped at: the fields whose new values tell the
#: save apart (the ones changed at that call, as the test's stub checks them)
SAVES = {"Instance.save": ("task_state", "vm_state", "host", "node", "power_state"),
         "Migration.save": ("status", "dest_compute", "source_compute")}
#: the endings a test asks for, per operation (the restart also auto-confirm)
ENDINGS = {"resize": ("confirm", "revert"), "live-migration": ("success", "rollback"),
           "evacuate": ("source-restart",)}
#: how many candidate boundaries are run before giving up
TRIES = 6
#: a failure test's phases, by the checkpoint a cause acts at to own them: what the
#: failure's handling leaves, and what the delete after it leaves
PHASES = {"failure": "after-failure", "delete": "after-delete"}


def phase_of(step: str) -> str:
    """The phase of a test's step: ``failure periodic`` is the failure's."""
    return step.split(" ", 1)[0]


@dataclasses.dataclass(frozen=True)
class Boundary:
    """The named call a recreate test stubs: ``kind`` rpc (class-wide) or driver (the
    calling host's driver only); ``kill``: the caller dies there (the restart fault)."""

    path: str
    kind: str
    kill: bool = False
    when: tuple = ()  # a save: ((field, value), ...) changed at that call
    after: bool = False  # the fault strikes as the call returns, not before it
    fails: str = ""  # the stub fails the call (a failure fault's Fault.fails_call)
    settled: tuple = ()  # fails: ((server, where it rests, as _settled), ...) at after-failure

    @property
    def object(self) -> str:
        return self.owner

    @property
    def method(self) -> str:
        return self.path.rsplit(".", 1)[1]

    @property
    def owner(self) -> str:
        return self.path.rsplit(".", 2)[1]

    @property
    def short(self) -> str:
        return f"{self.owner}.{self.method}" if self.path else ""

    @property
    def module_path(self) -> str:  # nova.compute (of nova.compute.rpcapi)
        return self.path.rsplit(".", 3)[0]

    @property
    def alias(self) -> str:  # compute_rpcapi
        return self.module_path.rsplit(".", 1)[-1] + "_rpcapi"


@dataclasses.dataclass
class Recreate:
    cause: object      # causes.Cause
    item: Item         # the item at the boundary, where the cause bit
    record: object     # its campaign.Record
    boundary: Boundary
    steps: list        # (step, seen, expected): per host, in the test's terms
    hosts: dict        # role -> host name, in the item's run
    logs: list         # the exceptions the periodic logs (the cause's log expects)
    recovery: tuple | None  # a restart: (task_state, context set, in progress) left, if any
    in_ending: bool    # the fault strikes in the ending (after VERIFY_RESIZE)
    status: str        # the server's status after the ending (a failure's: where it rests)
    task_state: str | None = None  # a failure's: the task state the server rests in
    event: tuple | None = None  # a failure's: the last action event to finish (_settled)
    errored: bool = False  # a failure's: the server is in ERROR, its guest untouched
    fault: bool = False  # a failure's: the API shows the server's fault
    guests: dict = dataclasses.field(default_factory=dict)  # host -> domains left
    undeletable: tuple = ()  # servers whose delete failed on their compute
    #                                                 after the deletes (a restart's)
    #: a failure's phases ("failure", "delete") the cause does not act at: another
    #: cause's face (the failure's own, or what the delete leaves), which neither form
    #: asserts where it differs from the ledger
    foreign: tuple = ()
    module_name: str = ""
    text: str = ""        # the recreate test
    fixed_text: str = ""  # its fixed form

    @property
    def stub(self) -> str:
        return self.boundary.path

    @property
    def caller(self) -> str:
        return self.hosts.get(self.item.point.split(":", 1)[0], "the caller")

    @property
    def dying(self) -> str:
        return self.caller

    @property
    def struck(self) -> list:
        return [self.hosts[r] for r in target_roles(self.item.target)]

    def struck_roles(self, run) -> list:
        return [f"{run.tracer.hosts[r]} (the {r})" for r in target_roles(self.item.target)]

    @property
    def how(self) -> str:
        """Where the fault strikes, in a sentence: the index's column."""
        b = self.boundary
        if b.kind == "none":
            return f"nothing injected: the servers deleted right after the {self.item.ending}"
        if b.fails:
            from harness.upstream import recreate_failure
            return recreate_failure.how(self)
        when = "after" if b.after else "before"
        call = b.short + (" setting " + ", ".join(f"{f} {v}" for f, v in b.when)
                          if b.when else "")
        if b.kill:
            return f"{self.dying} dies just {when} it calls {call}"
        if b.after:
            return (f"update_available_resource runs on {', '.join(self.struck)} just after "
                    f"{self.caller}'s call of {call}")
        return (f"update_available_resource runs on {', '.join(self.struck)} just before "
                f"{self.caller} calls {call}")

    @property
    def test_method(self) -> str:
        b, role = self.boundary, self.item.point.split(":", 1)[0]
        if b.kind == "none":
            return f"test_delete_right_after_{self.item.ending.replace('-', '_')}"
        if b.fails:
            from harness.upstream import recreate_failure
            return recreate_failure.test_method(self)
        when = "after" if b.after else "before"
        if b.kill and b.kind == "save":
            return f"test_{role}_dies_{'after_' if b.after else ''}saving_{b.object.lower()}"
        if b.kill:
            return f"test_{role}_dies_before_{b.method}"
        if b.kind == "save":
            return f"test_periodic_{when}_{role}_saves_{b.object.lower()}"
        return f"test_{b.method}_with_periodic_{when}_it"


def boundary_of(point_id: str, kill: bool = False) -> Boundary | None:
    """The named boundary a point calls, or None: an ``rpcapi`` method; with ``kill``
    also a libvirt driver method (stubbed on the dying host's driver)."""
    from harness.upstream import trigger
    label = point_ids.callee(point_id)
    try:
        path, _ = trigger.callee_path(label)
    except UsageError:
        return None
    if path.startswith(RPC_MODULES):
        return Boundary(path, "rpc", kill)
    if kill and path.startswith(DRIVER):
        return Boundary(path, "driver", kill)
    if label in SAVES:
        return Boundary(path, "save", kill)
    return None


def rpc_path(point_id: str) -> str | None:
    """The ``rpcapi`` method a point calls, or None."""
    found = boundary_of(point_id)
    return found.path if found and found.kind == "rpc" else None


def candidates(item: Item, trace: list) -> list:
    """``(item, boundary point, after)`` at named boundaries of ``trace``, nearest to
    ``item``'s point first; a method called more than once in the trace is left out (a
    stub could not tell the calls apart), except a save (its stub tells them apart by
    the fields it changes). Then the same boundaries struck as they return: the item
    is at the caller's next call (``after``; not for a restart at a named call: its
    stub could not call the real method and die, as a save's can); a save that is
    its caller's last call is struck before its host's next call."""
    from harness import faults
    fault = faults.parse(item.fault)
    if fault.fails_call:
        return failing(item, trace, fault)
    kill = fault.kills
    found = [boundary_of(p, kill) for p in trace]
    paths = [b.path if b else None for b in found]
    once = {p for p, n in collections.Counter(paths).items() if p and n == 1}
    once |= {b.path for b in found if b and b.kind == "save"}
    at = trace.index(item.point) if item.point in trace else 0
    # the periodic tries the named calls first (a save's stub reads less plainly)
    later = {b.path for b in found if b and b.kind == "save" and not kill}
    near = [(paths[i] in later, abs(i - at), i, p) for i, p in enumerate(trace)
            if paths[i] in once]
    before = [(dataclasses.replace(item, point=p), p, False) for *_, p in sorted(near)]
    after = []
    for *_, i, p in sorted(near):
        if kill and found[i].kind != "save":
            continue
        caller, host = p.split(">", 1)[0], p.split(":", 1)[0]
        nxt = next((q for q in trace[i + 1:] if q.split(">", 1)[0] == caller), None)
        if nxt is None and found[i].kind == "save":  # the caller's last call: a save's
            nxt = next((q for q in trace[i + 1:]    # stub dies as it returns, before
                        if q.split(":", 1)[0] == host), None)  # its host's next call
        if nxt is not None:
            after.append((dataclasses.replace(item, point=nxt), p, True))
    return before[:TRIES] + after[:TRIES]


def _settled(server: dict) -> tuple:
    """Where a failed move rests: the server's (status, task state) as the API shows
    them, the last instance action event to finish, as ``(action, event, result)``
    -- the compute's step that met the failure (or sent the lost message) is over
    once it has finished -- and whether the API shows a fault (an ERROR without
    one is waited for as such)."""
    from nova import context, objects
    ctx = context.get_admin_context()
    last = None
    for action in objects.InstanceActionList.get_by_instance_uuid(ctx, server["id"]):
        done = [e for e in objects.InstanceActionEventList.get_by_action(ctx, action.id)
                if e.result is not None]
        if done:
            event = max(done, key=lambda e: (e.finish_time, e.id))
            last = (action.action, event.event, event.result.lower())
            break  # the newest action with a finished event
    return server["status"], server["OS-EXT-STS:task_state"], last, "fault" in server


def failing(item: Item, trace: list, fault) -> list:
    """A failure fault's one candidate: the call at its point, failed by a stub that
    can tell that call apart -- a driver method its host calls once in the trace
    (the stub is that host's driver's), an ``rpcapi`` method called once."""
    found = boundary_of(item.point, kill=True)
    if found is None or found.kind not in ("driver", "rpc"):
        raise UsageError(f"{item.point}: a recreate test fails a driver or rpcapi call")
    host, label = item.point.split(":", 1)[0], point_ids.callee(item.point)
    same = [p for p in trace if point_ids.callee(p) == label
            and (found.kind == "rpc" or p.split(":", 1)[0] == host)]
    if len(same) != 1:
        raise UsageError(f"{item.point}: a stub of {found.short} cannot tell its call apart "
                         f"(called {len(same)} times in the move)")
    if fault.fails_at(item.point) is None:
        raise UsageError(f"{item.point}: {found.short} casts or calls as its caller "
                         "chooses; a stub would not know which")
    return [(item, item.point, False)]


def judged_run(scen, item: Item, traces: dict, at: str | None = None,
               after: bool = False) -> tuple:
    """Run ``item`` keeping what every checkpoint read: ``(run, record, the boundary
    at point ``at`` (default: the item's) as its call met it)`` -- a save's with the
    fields that call changes."""
    from harness.execute import campaign, runner
    from harness import faults
    from harness.explore import injection
    at = at or item.point
    fault = faults.parse(item.fault)
    inj = injection.Injection(item.point, item.target, item.fault, detail=True)
    run = runner.Run(scen, item.ending, converge_every=False,
                     one_thread=fault.one_thread)  # as campaign.run_item
    run.keep_evidence = True
    found = boundary_of(at, fault.kills or bool(fault.fails_call))
    seen = {}

    class Seeing(injection.Injector):
        def before_check(self, run, name):
            if fault.fails_call and name == "after-failure":  # what a test's wait for the
                seen["status"] = {s: _settled(run.cloud.server(s))  # server to settle sees
                                  for s in run.cloud.servers}
            super().before_check(run, name)

        def _on_point(self, point):
            if point.id == at and found and found.kind == "save" and not seen:
                obj = self.tracer.call_args[0][0]
                fields = SAVES[point.callee]
                seen["when"] = tuple((f, getattr(obj, f)) for f in fields
                                     if f in obj.obj_what_changed())
            super()._on_point(point)

    started = time.monotonic()
    run.execute(lambda r: Seeing(r, inj, item.window))
    record = campaign.judge(item, run, inj, traces, None, started)
    if found is not None:
        found = dataclasses.replace(found, when=seen.get("when", ()), after=after,
                                    kill=fault.kills, fails=fault.fails_at(at) or "",
                                    settled=tuple(sorted(seen.get("status", {}).items())))
    return run, record, found


#: the boundary of a cause of Nova's own path: nothing is stubbed
UNINJECTED = Boundary("", "none")


def uninjected(item: Item, scen):
    """An uninjected sample as :func:`bites` gives a boundary: ``(item, run, record,
    UNINJECTED)``, the run keeping what every checkpoint read."""
    from harness.execute import campaign, discovery
    run = discovery.uninjected_run(scen, item.ending, keep_evidence=True)
    yield item, run, campaign.judge_uninjected(scen.name, item.ending, None, run), UNINJECTED


def bites(cause, item: Item, scen, traces: dict, say=lambda line: None):
    """The named boundaries where ``cause`` bites, nearest first: ``(item, run, record,
    boundary)``; a save that changes none of the fields a stub could tell it by is not."""
    tried, bit = candidates(item, traces[item.ending]), 0
    for cand, at, after in tried:
        run, record, found = judged_run(scen, cand, traces, at, after)
        bites_here = (cause.name in record.causes.get("bit", [])
                      and (found.kind != "save" or bool(found.when)))
        where = f"after {at}" if after else cand.point
        say(f"  {where}: {'bites' if bites_here else 'does not bite'} ({record.verdict})")
        if bites_here:
            bit += 1
            yield cand, run, record, found
    raise UsageError(f"root cause {cause.name}: in {item.scenario} it bites at {bit} of the "
                     f"{len(tried)} named boundaries a test may stub nearest {item.point}"
                     + (" (none makes a test that passes)" if bit else ""))


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
    """``(step, seen, expected)`` per host, at each checkpoint the run passed (boot, move,
    ending or restart, delete after a restart) and after the periodic that follows
    the ending, the restart or the delete (a step the ledger cannot state is left out)."""
    hosts = [h.name for h in scen.hosts]
    names = {"after-boot": "boot", "fenced": "fence",
             **({scen.operation.mid: "move"} if scen.operation.name != "live-migration"
                else {}),
             f"after-{run.ending}": run.ending, "after-restart": "restart",
             "after-failure": "failure"}
    if run.recovery or not run.converge_ending:  # a restart's run, or the deletes right
        names["after-delete"] = "delete"        # after the ending: its deletes are steps too
    out = []
    for cp in run.result.checkpoints:
        step = names.get(cp.name)
        if step is None or cp.evidence is None or cp.evidence.phase.holdings is None:
            continue
        ev = cp.evidence
        want = {h: ledger(ev.phase, h) for h in hosts}
        out.append((step, {h: usage(ev, h, ev.reserved_mb) for h in hosts}, want))
        if step in (run.ending, "restart", "failure", "delete") and ev.after is not None:
            after = dataclasses.replace(ev, snap=ev.after)
            label = "periodic" if step == run.ending else f"{step} periodic"
            out.append((label, {h: usage(after, h, ev.reserved_mb) for h in hosts}, want))
    return out


def build(cause, item: Item, scen, run, record, boundary: Boundary) -> Recreate:
    from harness import faults
    from harness.upstream import recreate_render
    refuse(scen)
    kill, fails = faults.parse(item.fault).kills, boundary.fails
    if fails and not run.recovery:
        raise UsageError(f"root cause {cause.name}: in {item.id} the move went on after the "
                         "failure; a recreate test fails a move so far")
    if fails and scen.operation.name not in ("resize", "live-migration"):
        raise UsageError(f"root cause {cause.name}: a recreate test fails a call in a resize, "
                         f"cold or live migration so far, not in {scen.operation.name}")
    found = steps(run, scen)
    foreign = tuple(phase for phase in PHASES if not cause.acts_at(PHASES[phase])) if fails else ()
    logs = _log_expects(cause, record)
    after = recovery_words("after-failure" if fails else "after-restart")
    server = scen.moves[0].server
    recovery = _recovery(record, server, after) if kill or fails else None
    guests = _guests_left(run) if kill or fails else {}
    # the ERROR is the cause's own only where it explains it (a kept context no longer
    # hides the ERROR: on one item a claim's cause and an ERROR's cause bite apart)
    errored = any(f["check"] == "recovery" and f["where"] == f"server {server} vm_state {after}"
                  and f.get("cause", cause.name) == cause.name
                  for f in record.findings) if fails else False
    own = [(seen, want) for step, seen, want in found if phase_of(step) not in foreign]
    if (all(seen == want for seen, want in own) and not logs
            and (recovery is None and not errored or "failure" in foreign)
            and (not guests or "delete" in foreign)):
        raise UsageError(f"root cause {cause.name}: its effect in {item.id} does not show in a "
                         "recreate test's terms (per-host counts, placement usages, the log)")
    if kill and not any(step == "restart" for step, _, _ in found):
        raise UsageError(f"root cause {cause.name}: {item.id} never reached its restart")
    in_ending = any(cp.name == scen.operation.mid for cp in run.result.checkpoints)
    if kill and in_ending and scen.operation.name == "evacuate":
        raise UsageError(f"root cause {cause.name}: a recreate test kills a host in the "
                         "evacuation's rebuild, not in the source's restart")
    roles = {r: h for r, h in run.tracer.hosts.items() if r in ("source", "dest")}
    status, task, event, fault = (
        dict(boundary.settled).get(server, ("ACTIVE", None, None, False))
        if fails else (_status(record, server), None, None, False))
    rec = Recreate(cause, item, record, boundary, found, roles, logs,
                   recovery, in_ending, status, task_state=task, event=event, fault=fault,
                   errored=errored, guests=guests,
                   undeletable=_undeletable(record, scen, after) if kill or fails else (),
                   foreign=foreign)
    rec.module_name = "test_" + re.sub(r"[^a-z0-9]+", "_", cause.name.lower()).strip("_")
    rec.text, rec.fixed_text = (recreate_render.module(rec, scen, run, fixed)
                                for fixed in (False, True))
    return rec


def refuse_item(item: Item) -> None:
    """Before Nova loads: one resize or cold migration, the whole periodic or a restart
    on Nova as it is, an ending a test can ask for."""
    from harness import scenario as scenario_mod
    from harness import faults
    scen = scenario_mod.load(item.scenario)
    refuse(scen)
    if item.is_uninjected and scen.operation.name != "resize":
        raise UsageError(f"no injection in {scen.operation.name}: a recreate test of Nova's "
                         "own path covers a resize or cold migration so far")
    if item.mutation:
        raise UsageError("a mutation is the harness's: a recreate test is of Nova as it is")
    refusal = faults.parse(item.fault).recreate_refusal(
        scen, item.ending, ENDINGS.get(scen.operation.name, ()))
    if refusal:
        raise UsageError(refusal)


def index(rows: list) -> str:
    """The README of the recreate tests (``recreate/index.json`` kept beside it): one row
    per hard cause (a dict: cause, module, item, how, recreate, fixed; or cause, skipped)."""
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
             "| root cause | module | from item | fault at | recreate | fixed |",
             "|---|---|---|---|---|---|"]
    written = [r for r in rows if "module" in r]
    skipped = [r for r in rows if "module" not in r]
    for r in written:
        lines.append(f"| {r['cause']} | `{r['module']}` | `{r['item']}` | {r['how']} | "
                     f"{r['recreate']} | {r['fixed']} |")
    if skipped:
        lines += ["", "Not written (the operation or fault is not one a recreate test covers "
                  "yet, or the effect does not show in its terms):", ""]
        lines += [f"- {r['cause']}: {r['skipped'].split(': ', 1)[-1]}" for r in skipped]
    lines += ["", f"{len(written)} of {len(rows)} hard root causes written."]
    return "\n".join(lines) + "\n"


def refuse(scen) -> None:
    if scen.operation.name not in ENDINGS or len(scen.moves) != 1:
        raise UsageError(f"{scen.operation.name} of {len(scen.moves)} servers: a recreate test "
                         "covers one resize, cold or live migration or evacuation so far")
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


def _recovery(record, server: str, after: str) -> tuple | None:
    """What Nova's recovery (``after`` the restart, the failure) left of ``server``'s
    move, as the test's ``_move_left`` reads it: None when it left nothing (the
    recovery check was quiet)."""
    left = {f["where"]: f["seen"] for f in record.findings if f["check"] == "recovery"
            and f["where"].startswith(f"server {server} ")}
    if not left:
        return None
    task = left.get(f"server {server} task_state {after}")
    found = (task.strip("'") if isinstance(task, str) else task,
             f"server {server} migration context {after}" in left,
             f"server {server} migration status {after}" in left)
    return None if found == (None, False, False) else found  # it left the server in ERROR


def _guests_left(run) -> dict:
    """Per host with any, how many domains its libvirt still has after the deletes
    (guests no delete reached), running or not."""
    cp = next((c for c in run.result.checkpoints if c.name == "after-delete"), None)
    if cp is None or cp.evidence is None:
        return {}
    left = {}
    for host, truth in sorted(cp.evidence.snap["truth"].items()):
        names = {n for kind in ("defined", "running") for cell in truth[kind].values()
                 for n in cell["by_domain"]}
        if names:
            left[host] = len(names)
    return left


def _undeletable(record, scen, after: str) -> tuple:
    """The servers whose delete ``after`` the restart or failure failed (the harness's
    liveness finding lists them as ``name: why``, joined by ``; ``)."""
    seen = " ".join(str(f["seen"]) for f in record.findings if f["check"] == "liveness"
                    and f["where"] == f"delete {after}")
    return tuple(b.server for b in scen.boots
                 if re.search(rf"(^|; |'){re.escape(b.server)}: ", seen))


def _status(record, server: str) -> str:
    for f in record.findings:
        if f["check"] == "liveness" and f["where"] == f"server {server} status":
            return str(f["seen"]).strip("'")
    return "ACTIVE"
