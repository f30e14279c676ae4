"""An upstream-ready bug text for one item (``nova-chaos report``)."""
from __future__ import annotations

from harness.execute.item import target_roles
from harness.upstream.export import seen_of, targets_of


def render(item, scen, record, found, exported) -> str:
    import nova.version
    entry = exported.entry
    trace = record.trace
    at = trace.index(item.point) if item.point in trace else -1
    around = [f"    {'>>' if i == at else '  '} {trace[i]}"
              for i in range(max(0, at - 4), min(len(trace), at + 5))] or ["    (not reached)"]
    wrong = [f"- {f['checkpoint']}: {f['where']}: expected {f['expected']}, seen {seen_of(f)}"
             for f in record.findings]
    targets = targets_of(item, found)
    summary = _summary(item, scen, record, found, targets)
    steps = [f"{i}. boot {b.server} (flavor {b.flavor}: {_flavor(scen.flavors[b.flavor])})"
             + (f" on {b.host}" if b.host else "") for i, b in enumerate(scen.boots, 1)]
    n = len(steps)
    for move in scen.moves:
        n += 1
        steps.append(f"{n}. {move.op} {move.server}"
                     + (f" to flavor {move.flavor} ({_flavor(scen.flavors[move.flavor])})"
                        if move.op == "resize" else ""))
    steps.append(f"{n + 1}. while it runs, update_available_resource runs on "
                 f"{' and '.join(targets)} right before call {found.nth} of {found.callee} "
                 f"by {found.host} (the point below)")
    steps.append(f"{n + 2}. {item.ending} the move, then delete the servers")
    hosts = [f"- {h.name}: {len(h.cells)} NUMA cells, {h.cores} cores x {h.threads} threads; "
             + "; ".join(f"cell {c.id}: CPUs {list(c.cpus)}, {c.memory_mb} MiB"
                         + "".join(f", {n} x {s} KiB pages" for s, n in sorted(c.hugepages.items()))
                         for c in h.cells) for h in scen.hosts]
    lines = [
        f"Summary: {summary}",
        "",
        f"Nova version: {nova.version.version_string()} (in-process functional environment, "
        "libvirt driver on a fake libvirt)",
        f"cpu_dedicated_set = {_set(scen.cpu_sets.dedicated)}, "
        f"cpu_shared_set = {_set(scen.cpu_sets.shared)}",
        "Hosts:", *hosts,
        "",
        "Steps to reproduce:", *steps,
        "",
        "Expected: after the ending and after the deletes, each host's resource tracker and "
        "placement account exactly what the flavors of the servers it holds ask for, before "
        "any further periodic run.",
        "",
        f"Actual ({record.verdict} in nova-chaos):", *(wrong or ["- nothing wrong was seen"]),
        "",
        "The calls around the point (>>), as the harness's tracer names them:", *around,
        "",
        "Cause: " + (entry.reason if entry is not None else "not reviewed yet"),
        *([f"Related bug: {entry.bug}"] if entry is not None and entry.bug else []),
        *(["", " ".join(entry.why.split()), "", f"Nova: {entry.nova}"]
          if getattr(entry, "why", "") else []),
        "",
        f"Reproduce with nova-chaos: {item.replay_command()}",
        f"Regression test (Nova's fixtures only): {exported.module_name}.py, "
        f"{exported.test_id} (nova-chaos export '{item.id}')",
    ]
    return "\n".join(lines) + "\n"


def _summary(item, scen, record, found, targets) -> str:
    """The first wrong value after the ending (else anywhere), and when it happens."""
    after = [f for f in record.findings if f["checkpoint"] == f"after-{item.ending}"]
    first = (after or record.findings or [None])[0]
    what = (f"{first['where']} is {seen_of(first)} instead of {first['expected']}"
            if first else "nothing wrong is seen")
    callee = found.callee.rsplit(".", 2)
    move = "cold migration" if scen.subject.op == "migrate" else "resize"
    return (f"After a {item.ending}ed {move}, "
            f"{what} ({first['checkpoint'] if first else 'every check'}) when "
            f"update_available_resource runs on {' and '.join(targets)} as {found.host} "
            f"calls {'.'.join(callee[-2:])}")


def _flavor(f) -> str:
    specs = ", ".join(f"{k}={v}" for k, v in sorted(f.extra_specs.items()))
    return f"{f.vcpus} vCPUs, {f.memory_mb} MiB" + (f", {specs}" if specs else "")


def _set(cpus) -> str:
    return ",".join(str(c) for c in sorted(cpus)) or "(unset)"


def cause_text(rec, scen, fix: str | None = None, windows: dict | None = None) -> str:
    """The bug text of one root cause, beside its recreate test (``recreate``)."""
    import nova.version
    cause = rec.cause
    from harness.upstream.recreate_render import LABELS, foreign
    from harness.upstream import recreate_failure
    method, kill, fails = rec.boundary.short, rec.boundary.kill, rec.boundary.fails
    own = rec.boundary.kind == "none"  # Nova's own path: nothing injected
    if rec.boundary.when:  # a save, told apart by what it sets
        method += " setting " + ", ".join(f"{f} {v}" for f, v in rec.boundary.when)
    caller = rec.hosts.get(rec.item.point.split(":", 1)[0], "?")
    when = (f"after {caller}'s call of" if rec.boundary.after else
            f"before {caller} calls" if not kill else "before it calls")
    struck = [rec.hosts.get(r, r) for r in target_roles(rec.item.target)]
    move = scen.moves[0]
    condition = [f"- {_condition(k, v, rec.hosts, kill, own, fails)}"
                 for k, v in cause.when.items()]
    lines = [
        f"Summary: {cause.title}",
        "",
        f"Nova version: {nova.version.version_string()} (libvirt driver)",
        *([f"Related: {cause.bug}"] if cause.bug else []),
        "",
        "Description:",
        *_wrapped(cause.why),
        "",
        f"Where in Nova: {cause.nova}",
        "",
        ("When: a compute dies (and is restarted) while, for the moving server:" if kill else
         f"When: {recreate_failure.what(rec)} {recreate_failure.VERB[fails]} while, for the "
         "moving server:" if fails else
         "When: the server is deleted while, with no periodic since its move ended:" if own else
         "When: update_available_resource runs while, for the moving server:"),
        *condition,
        "",
        "Steps to reproduce (recreate/" + rec.module_name + ".py, Nova's functional "
        "fixtures only):",
        *[f"{n}. {step}" for n, step in enumerate([
            f"hosts: {'; '.join(_host(h) for h in scen.hosts)}",
            f"cpu_dedicated_set = {_set(scen.cpu_sets.dedicated)}, "
            f"cpu_shared_set = {_set(scen.cpu_sets.shared)}",
            *[f"boot {b.server} with {_flavor(scen.flavors[b.flavor])}"
              + (f" on {b.host}" if b.host else "") for b in scen.boots],
            f"{move.op} {move.server}" + (f" to {_flavor(scen.flavors[move.flavor])}"
                                          if move.op == "resize" else ""),
            *([f"{rec.item.ending} it"] if rec.in_ending or not (kill or fails) else []),
            *([f"delete {move.server}"] if kill or fails else []),
            *([f"delete {move.server} right away, before any periodic runs"] if own else [])],
            1)],
        (f"Meanwhile, {caller} dies just {when} {method}: the test restarts its "
         "compute service in a stub of that call, which never returns." if kill else
         f"Meanwhile, {recreate_failure.what(rec)} "
         f"{recreate_failure.EFFECT[fails]} (the test fails that call in a stub)." if fails else
         "Nothing is injected: this is Nova's own path, a user's prompt delete." if own else
         f"Meanwhile, update_available_resource runs on {' and '.join(struck)} just {when} "
         f"{method} (the test stubs that call)."),
        "",
        "Expected vs actual, per host (pinned pCPUs, hugepages used by size, vCPUs used, "
        "memory used MiB, placement usages):",
    ]
    for step, seen, want in rec.steps:
        if foreign(rec, step):  # another cause's face (its own bug text has it)
            continue
        label = LABELS.get(step, f"after the {step}")
        for host in want:
            if seen[host] != want[host]:
                lines += [f"- {label}, {host}: expected {_usage(want[host])}",
                          f"  {' ' * len(label)}  {' ' * len(host)}  actual   "
                          f"{_usage(seen[host])}"]
    lines += [f"- the periodic fails, logging {name} (update_available_resource logs it "
              "and carries on)" for name in rec.logs]
    if rec.recovery is not None and not foreign(rec, "failure"):
        lines += [f"- after the {'failure' if fails else 'restart'}, the move is left "
                  f"half-done: task_state "
                  f"{rec.recovery[0]}, migration context "
                  f"{'set' if rec.recovery[1] else 'gone'}, migration "
                  f"{'still in progress' if rec.recovery[2] else 'over'} (expected: no task "
                  "state, no migration context, no migration in progress)"]
    if rec.errored and not foreign(rec, "failure"):
        lines += [f"- after the failure, the server is {rec.status} while its guest runs "
                  f"untouched on {rec.hosts.get('source', '?')} (expected: ACTIVE)"]
    if windows:
        lines += ["", "Window: the calls of the move at which a periodic meets the condition "
                  "(a campaign striking at every call):"]
        lines += [f"- {place}: {span['calls']} calls, from {_call(span['first'])} to "
                  f"{_call(span['last'])}" for place, span in sorted(windows.items())]
    lines += ["", candidate_fix(fix), "", f"Found by nova-chaos: {rec.item.replay_command()}"]
    return "\n".join(lines) + "\n"


def candidate_fix(fix: str | None) -> str:
    """A bug text's candidate-fix line: the patch (``prove.fix_for``), or none yet."""
    return f"Candidate fix: {fix}" if fix else "Candidate fix: none proposed yet"


#: a condition's keys in Nova's words ({} is the value, {host} its host where it is a role)
_WORDS = {
    "runs_on": "the periodic runs on the {} host ({host})",
    "instance.host": "instance.host is the {} host ({host})",
    "instance.node": "instance.node is the {} node",
    "instance.vm_state": "instance.vm_state is {}",
    "instance.task_state": "instance.task_state is {}",
    "instance.migration_context": "the instance has a migration context: {}",
    "instance.old_flavor": "instance.old_flavor is set: {}",
    "instance.new_flavor": "instance.new_flavor is set: {}",
    "instance.topology": "instance.numa_topology is the move's {} one",
    "migration.type": "the migration's type is {}",
    "migration.status": "the migration's status is {}",
    "migration.source": "the migration's source is the {} host ({host})",
    "migration.dest": "the migration's destination is the {} host ({host})",
    "tracked.migration": "that host's resource tracker tracks the migration: {}",
    "tracked.instance": "that host's resource tracker tracks the instance: {}",
}


def _condition(key: str, value, hosts: dict, kill: bool = False, own: bool = False,
               fails: str = "") -> str:
    values = [str(v) for v in (value if isinstance(value, (list, tuple)) else [value])]
    shown = " or ".join(values)
    host = " or ".join(hosts.get(v, v) for v in values)
    template = _WORDS.get(key, key + " is {}")
    if kill:  # the restart's condition: the dying host's role, what placement holds
        template = {"runs_on": "the compute that dies is the {} host ({host})",
                    "allocations.instance": "placement holds the instance's allocation on the {} "
                                            "host",
                    "allocations.migration": "placement holds the migration's allocation on "
                                             "the {} host"}.get(key, template)
    if fails:  # the failure's condition: the failing host's role
        template = {"runs_on": "the failing call is made on the {} host ({host})"}.get(
            key, template)
    if own:  # what the delete meets, on the host whose tracker keeps the usage
        template = {"runs_on": "on the {} host ({host})"}.get(key, template)
    return template.format(shown, host=host).replace("True", "yes").replace("False", "no")


def _call(point_id: str) -> str:
    """A point as Nova's call: "X.y (the source's N-th)", without the tracer's caller."""
    role, rest = point_id.split(":", 1)
    callee, nth = rest.split(">", 1)[1].rsplit("#", 1)
    return f"{callee} (the {role}'s call {nth})"


def _wrapped(text: str) -> list:
    import textwrap
    return textwrap.wrap(" ".join(text.split()), 79)


def _host(h) -> str:
    return (f"{h.name} {len(h.cells)} NUMA cells x {h.cores} cores x {h.threads} threads, "
            + ", ".join(f"cell {c.id} {c.memory_mb} MiB"
                        + "".join(f" {n}x{s}K" for s, n in sorted(c.hugepages.items()))
                        for c in h.cells))


def _usage(u: dict) -> str:
    return f"({u['pinned']}, {u['pages']}, {u['vcpus']}, {u['memory_mb']}, {u['placement']})"
