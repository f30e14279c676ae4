"""The text of a recreate test and its fixed form, in Nova's idiom.

One module per root cause: Nova's licence header, 79 columns, the
scenario's hosts built with Nova's own fake libvirt host info, the fault
at a named boundary (:class:`harness.upstream.recreate.Boundary`), and an
``assertEqual`` of every host's usage after each step. The fault is one of

* the periodic: ``update_available_resource`` runs on the struck host in
  a stub of the boundary, before the call, and the call goes on;
* a restart: the compute making the call dies there, as Nova's own
  ``test_init_host`` kills one: the stub restarts its service and never
  returns (``time.sleep``), so none of Nova's handlers unwind the move.
"""
from __future__ import annotations

import pprint
import re
import textwrap

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
#: the API action and the instance action event its last step records
ENDING_ACTION = {"confirm": ("confirmResize", "compute_confirm_resize"),
                 "revert": ("revertResize", "compute_finish_revert_resize")}
#: migration statuses Nova's resource tracker no longer counts as in progress
DONE = ("confirmed", "reverted", "error", "failed", "completed", "cancelled", "done")
#: step -> how the bug text says it
LABELS = {"move": "after the move (VERIFY_RESIZE)", "periodic": "after the next periodic",
          "fence": "after the source is fenced", "source-restart": "after the source restarts",
          "restart": "after the restart", "restart periodic": "after the restart and a periodic",
          "failure": "after the failure", "failure periodic": "after the failure and a periodic",
          "delete": "after the delete", "delete periodic": "after the delete and a periodic"}


def module(rec, scen, run, fixed: bool) -> str:
    """The recreate test of ``rec`` (``fixed``: its fixed form)."""
    from harness.upstream import recreate_failure
    restart, live = rec.boundary.kill, scen.operation.name == "live-migration"
    fails = bool(rec.boundary.fails)
    threads = ["import threading"] if restart or rec.boundary.kind == "save" else []
    body = [LICENCE, "import collections", *threads, *(["import time"] if restart else []),
            *(["from unittest import mock"] if restart or fails
              or scen.operation.name == "resize" else []), ""]
    if restart:
        body += ["from oslo_concurrency import lockutils", ""]
    if fails:
        body += recreate_failure.imports(rec)
    if rec.boundary.kind == "rpc" and not restart:  # its method is called as it was
        body.append(f"from {rec.boundary.module_path} import rpcapi as "
                    f"{rec.boundary.alias}")
    body += ["from nova import context as nova_context", "from nova import objects",
             "from nova.tests.fixtures import libvirt as fakelibvirt",
             "from nova.tests.functional.libvirt import base", "", "",
             "# name: (cells, cores per cell, threads, memory KiB, per cell pages)",
             *_hosts_lines(_hosts(scen)), *(["#: migration statuses no longer in progress",
                                            *_done_lines()]
                                           if restart or _asserts_recovery(rec) else []),
             *(["#: what the save the fault strikes at sets",
                f"SAVING = {_fmt(dict(rec.boundary.when), 9)}"]
               if rec.boundary.kind == "save" else []),
             "", "",
             *_head(rec, scen, run)]
    if restart or _asserts_recovery(rec):
        body += _move_left_helper()
    if rec.guests and not foreign(rec, "delete"):
        body += _guests_helper()
    body += [f"    def {rec.test_method}(self):", *_flavors_and_boots(scen),
             *_check("boot", rec, fixed)]
    op = scen.operation.name
    evacuate = op == "evacuate"
    body += (_evacuate_restart_body if restart and evacuate else _restart_body if restart
             else recreate_failure.body if fails
             else _uninjected_body if rec.boundary.kind == "none"
             else _live_body if live else _evacuate_body if evacuate
             else _periodic_body)(rec, scen, fixed)
    return "\n".join(body) + "\n"


def _head(rec, scen, run) -> list:
    """The class line, its docstring, ``setUp`` (the hosts) and ``_usages``."""
    cls = "Test" + "".join(w.capitalize() for w in re.split(r"[^a-zA-Z0-9]+", rec.cause.name)
                           if w)
    same_host = ["        self.flags(allow_resize_to_same_host=True)"] if scen.allow_same_host else []
    doc = _docstring(rec, run)
    live = scen.operation.name == "live-migration"
    bases = "base.LibvirtMigrationMixin, base.ServersTestBase" if live else "base.ServersTestBase"
    line = f"class {cls}({bases}):"
    return [*([line] if len(line) <= 79 else [f"class {cls}(", f"        {bases}):"]),
            '    """' + doc[0], *[("    " + line) if line else "" for line in doc[1:]],
            '    """', "",
            "    microversion = 'latest'", "    ADMIN_API = True",
            *(["    # the dying compute's call never returns: no caller may wait on it",
               "    CAST_AS_CALL = False"] if rec.boundary.kill else
              ["    # a failure reaches the handlers it reaches in production only",
               "    CAST_AS_CALL = False"] if rec.boundary.fails else []), "",
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
            "        return usages", "", *(_migrate_stub(rec) if live else [])]


def _migrate_stub(rec) -> list:
    """Nova's fake libvirt migrates nothing: the job is the test's (as in
    test_numa_live_migration), it succeeds or fails as the ending says."""
    src, dest = rec.hosts["source"], rec.hosts["dest"]
    conn = f"self.computes[{src!r}].driver._host.get_connection()"
    if rec.item.ending == "success":
        return ["    def _migrate_stub(self, domain, destination, params, flags):",
                '        """The guest starts on the destination; the job completes."""',
                f"        self.computes[{dest!r}].driver._host.get_connection().createXML(",
                "            params['destination_xml'],",
                "            'fake-createXML-doesnt-care-about-flags')",
                f"        conn = {conn}",
                "        conn.lookupByUUIDString(self.server['id']).complete_job()", ""]
    return ["    def _migrate_stub(self, domain, destination, params, flags):",
            '        """The job fails: the guest stays on the source."""',
            f"        conn = {conn}",
            "        conn.lookupByUUIDString(self.server['id']).fail_job()", ""]


def _periodic_stub(rec) -> list:
    """The periodic on the struck hosts, in a stub of the boundary, before the call."""
    b = rec.boundary
    periodic = [f"self.computes[{h!r}].manager.update_available_resource(" for h in rec.struck]
    if b.kind == "save":  # the first save that changes these fields so
        when = "SAVING"
        strike = [f"                {line}\n                    self.ctxt)" for line in periodic]
        body = ["", "        struck = threading.Event()",
                f"        save = objects.{b.object}.save", "",
                "        def save_and_periodic(obj, *args, **kwargs):",
                "            changed = obj.obj_what_changed()",
                "            strike = not struck.is_set() and all(",
                "                f in changed and getattr(obj, f) == v",
                f"                for f, v in {when}.items())",
                "            if strike:",
                "                struck.set()", *([] if b.after else strike),
                "            result = save(obj, *args, **kwargs)",
                *(["            if strike:", *strike] if b.after else []),
                "            return result", ""]
        return body + [f"        self.stub_out(\n            '{b.path}',\n"
                       "            save_and_periodic)"]
    run = [f"            {line}\n                self.ctxt)" for line in periodic]
    body = ["", f"        call = {b.alias}.{b.owner}.{b.method}", ""]
    if b.after:
        body += ["        def call_then_periodic(*args, **kwargs):",
                 "            result = call(*args, **kwargs)", *run, "            return result"]
    else:
        body += ["        def periodic_then_call(*args, **kwargs):", *run,
                 "            return call(*args, **kwargs)"]
    stub = "call_then_periodic" if b.after else "periodic_then_call"
    return body + ["", f"        self.stub_out(\n            '{b.path}',\n            {stub})"]


def _live_body(rec, scen, fixed) -> list:
    server = _ident(scen.moves[0].server)
    status = "completed" if rec.item.ending == "success" else "failed"
    body = _periodic_stub(rec)
    body += [f"        self.server = {server}",
             f"        {server} = self._live_migrate(",
             f"            {server}, {status!r}, host={scen.moves[0].host!r})"]
    body += _check(rec.item.ending, rec, fixed)
    if any(step == "periodic" for step, _, _ in rec.steps):
        body += ["", "        self._run_periodics()"] + _check("periodic", rec, fixed)
    return body


def _fence(rec, scen, fixed) -> tuple:
    """``(source, lines)``: the evacuated server's host fails, checked."""
    move = scen.moves[0]
    src = next(b.host for b in scen.boots if b.server == move.server)
    body = ["", f"        # {src} fails: its compute stops, its service is forced down",
            f"        self.computes[{src!r}].stop()",
            "        service = self.api.get_services(",
            f"            host={src!r}, binary='nova-compute')[0]",
            "        self.api.put_service(service['id'], {'forced_down': True})"]
    return src, body + _check("fence", rec, fixed)


def _source_back(src: str, why: str) -> list:
    return [f"        # {src} comes back{why}",
            f"        self.restart_compute_service({src!r})",
            "        self.api.put_service(service['id'], {'forced_down': False})"]


def _evacuate_body(rec, scen, fixed) -> list:
    server, move = _ident(scen.moves[0].server), scen.moves[0]
    src, body = _fence(rec, scen, fixed)
    body += _periodic_stub(rec)
    body += ["        self.api.microversion = '2.94'  # the guest keeps running",
             f"        {server} = self._evacuate_server(",
             f"            {server}, {{'host': {move.host!r}}}, expected_host={move.host!r},",
             "            expected_state='ACTIVE')"]
    body += _check("move", rec, fixed)
    body += _source_back(src, "")
    body += _check("source-restart", rec, fixed)
    if any(step == "periodic" for step, _, _ in rec.steps):
        body += ["", "        self._run_periodics()"] + _check("periodic", rec, fixed)
    return body


def _move_left_helper() -> list:
    return ["    def _move_left(self, server):",
            '        """(task_state, migration context set, latest migration still in',
            '        progress): what a move abandoned half-way leaves."""',
            "        inst = objects.Instance.get_by_uuid(",
            "            self.ctxt, server['id'], expected_attrs=['migration_context'])",
            "        migrations = objects.MigrationList.get_by_filters(",
            "            self.ctxt, {'instance_uuid': server['id']})",
            "        latest = max(migrations, key=lambda m: m.id)",
            "        return (inst.task_state, inst.migration_context is not None,",
            "                latest.status not in DONE)", ""]


def _guests_helper() -> list:
    return ["    def _guests(self):",
            '        """Per host with any: its domains, running or not (the resize',
            '        stub above powers nothing off)."""',
            "        every = (fakelibvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE |",
            "                 fakelibvirt.VIR_CONNECT_LIST_DOMAINS_INACTIVE)",
            "        domains = {name: self.computes[name].driver._host",
            "                   .get_connection().listAllDomains(every)",
            "                   for name in HOSTS}",
            "        return {name: len(d) for name, d in domains.items() if d}", ""]


def _flavors_and_boots(scen) -> list:
    body = []
    for name, f in sorted(scen.flavors.items()):
        body += [f"        {_ident(name)} = self._create_flavor(",
                 f"            vcpu={f.vcpus}, memory_mb={f.memory_mb}, disk={f.disk_gb}, "
                 "ephemeral=0,",
                 f"            extra_spec={_fmt(dict(f.extra_specs), 23)})"]
    for boot in scen.boots:
        host = f", host={boot.host!r}" if boot.host else ""
        body += [f"        {_ident(boot.server)} = self._create_server(",
                 f"            flavor_id={_ident(boot.flavor)}{host}, networks='none')"]
    return body


def _action(scen) -> tuple:
    """``(server variable, the move's API action)``."""
    move = scen.moves[0]
    action = (f"{{'resize': {{'flavorRef': {_ident(move.flavor)}}}}}" if move.op == "resize"
              else f"{{'migrate': {{'host': {move.host!r}}}}}" if move.host else "{'migrate': None}")
    return _ident(move.server), action


def _no_disk_copy() -> list:
    return ["            'nova.virt.libvirt.driver.LibvirtDriver'",
            "            '.migrate_disk_and_power_off', return_value='{}',"]


def _periodic_body(rec, scen, fixed) -> list:
    server, action = _action(scen)
    body = _periodic_stub(rec) if rec.boundary.kind != "none" else []
    body += ["        with mock.patch(", *_no_disk_copy(), "        ):",
             f"            self.api.post_server_action(\n                {server}['id'], {action})",
             f"            {server} = self._wait_for_state_change({server}, 'VERIFY_RESIZE')"]
    body += _check("move", rec, fixed)
    ending, event = ENDING_ACTION[rec.item.ending]
    status = rec.status
    body += [f"        self.api.post_server_action({server}['id'], {{'{ending}': None}})",
             f"        {server} = self._wait_for_state_change({server}, '{status}')",
             "        self._wait_for_instance_action_event(",
             f"            {server}, '{ending}', '{event}',",
             f"            '{'error' if status == 'ERROR' else 'success'}')"]
    for name in rec.logs:
        body += ([f"        self.assertNotIn('{name}', self.stdlog.logger.output)"] if fixed else
                 [f"        # FIXME({_bug(rec.cause)}): the periodic fails with {name}",
                  f"        self.assertIn('{name}', self.stdlog.logger.output)"])
    body += _check(rec.item.ending, rec, fixed)
    if any(step == "periodic" for step, _, _ in rec.steps):
        body += ["", "        self._run_periodics()"] + _check("periodic", rec, fixed)
    return body


def _uninjected_body(rec, scen, fixed) -> list:
    """Nothing injected: the move and its ending, then the deletes before any periodic."""
    return (_periodic_body(rec, scen, fixed) + [""] + _deletes(scen)
            + _check("delete", rec, fixed) + _periodic_check("delete", rec, fixed))


def _deletes(scen, rec=None, fixed: bool = True) -> list:
    """Delete every server and wait until its compute is done with it (the API forgets
    a server before its compute has updated its tracker). A delete the harness saw
    fail on its compute is waited for as an error, under the bug's FIXME."""
    other = rec is not None and foreign(rec, "delete")  # a failing delete not the cause's
    failing = set() if rec is None or fixed and not other else set(rec.undeletable)
    body = []
    for group, result in ((b for b in scen.boots if b.server not in failing), "success"), (
            (b for b in scen.boots if b.server in failing), "error"):
        servers = [_ident(b.server) for b in group]
        if not servers:
            continue
        if result == "error" and not other:
            body += [f"        # FIXME({_bug(rec.cause)}): the delete fails on the compute; "
                     "it should", "        # succeed"]
        loop = ", ".join(servers) + ("," if len(servers) == 1 else "")
        body += [f"        for server in ({loop}):",
                 "            self.api.delete_server(server['id'])",
                 "            self._wait_for_instance_action_event(",
                 f"                server, 'delete', 'compute_terminate_instance', '{result}')"]
    return body


def _die_stub(rec) -> list:
    """``die``: a patch of the boundary whose side effect restarts the dying host's
    compute service from the thread making the call, which never returns."""
    b, dying = rec.boundary, rec.dying
    if b.kind == "driver":
        die = ["        die = mock.patch.object(",
               *_fit(f"            self.computes[{dying!r}].driver, {b.method!r},",
                     f"            self.computes[{dying!r}].driver,\n"
                     f"            {b.method!r},"),
               "            side_effect=die_here)"]
    elif b.kind == "save":
        die = [f"        die = mock.patch.object(objects.{b.object}, 'save', die_here)"]
    else:
        die = [f"        die = mock.patch(\n            '{b.path}',\n"
               "            side_effect=die_here)"]
    body = ["", "        restarted = threading.Event()"]
    if b.kind == "save":  # the save that changes these fields so, the first time
        when = "SAVING"
        body += ["        dying = threading.Event()",
                 f"        save = objects.{b.object}.save", "",
                 "        def die_here(obj, *args, **kwargs):",
                 "            changed = obj.obj_what_changed()",
                 "            if dying.is_set() or not all(",
                 "                    f in changed and getattr(obj, f) == v",
                 f"                    for f, v in {when}.items()):",
                 "                return save(obj, *args, **kwargs)",
                 "            dying.set()",
                 *(["            save(obj, *args, **kwargs)"] if b.after else []),
                 f"            # {dying} dies {'after' if b.after else 'making'} this save: "
                 "a new compute service",
                 "            # starts on its host (without the dead one's locks); this",
                 "            # thread never returns"]
    else:
        body += ["", "        def die_here(*args, **kwargs):",
                 f"            # {dying} dies making this call: a new compute service",
                 "            # starts on its host (without the dead one's locks); this",
                 "            # thread never returns"]
    return body + ["            self.stub_out('oslo_concurrency.lockutils._semaphores',",
                   "                          lockutils.Semaphores())",
                   "            self.stub_out('oslo_concurrency.lockutils._fair_locks',",
                   "                          lockutils.FairLocks())",
                   f"            self.restart_compute_service({dying!r})",
                   "            restarted.set()",
                   "            time.sleep(1000000)", "", *die]


def _fit(line: str, wrapped: str) -> list:
    """``line`` if it fits Nova's 79 columns, else its ``wrapped`` form."""
    return [line if len(line) <= 79 else wrapped]


def _restart_body(rec, scen, fixed) -> list:
    server, action = _action(scen)
    b, body = rec.boundary, _die_stub(rec)
    if rec.in_ending:
        ending, _ = ENDING_ACTION.get(rec.item.ending, (None, None))
        body += ["        with mock.patch(", *_no_disk_copy(), "        ):",
                 f"            self.api.post_server_action(\n                {server}['id'], "
                 f"{action})",
                 f"            {server} = self._wait_for_state_change({server}, 'VERIFY_RESIZE')"]
        body += _check("move", rec, fixed)
        if rec.item.ending == "auto-confirm":  # the destination's periodic confirms it
            body += ["        self.flags(resize_confirm_window=1)",
                     "        time.sleep(2)  # the window passes",
                     "        with die:",
                     f"            self.computes[{rec.hosts['dest']!r}].manager"
                     "._poll_unconfirmed_resizes(",
                     "                self.ctxt)"]
        else:
            body += ["        with die:",
                     f"            self.api.post_server_action({server}['id'], "
                     f"{{'{ending}': None}})"]
        body.append("            self.assertTrue(restarted.wait(60))")
    else:  # dying in migrate_disk_and_power_off, the stub stands for it
        body += (["        with die:"] if b.method == "migrate_disk_and_power_off" else
                 ["        with mock.patch(", *_no_disk_copy(), "        ), die:"])
        body += [f"            self.api.post_server_action(\n                {server}['id'], "
                 f"{action})",
                 "            self.assertTrue(restarted.wait(60))"]
    return body + _after_restart(rec, scen, server, fixed)


def _evacuate_restart_body(rec, scen, fixed) -> list:
    """The destination dies rebuilding the evacuated server; the source comes back."""
    server, move = _ident(scen.moves[0].server), scen.moves[0]
    src, body = _fence(rec, scen, fixed)
    body += _die_stub(rec)
    body += ["        self.api.microversion = '2.94'  # the guest keeps running",
             "        with die:",
             f"            self.api.post_server_action({server}['id'], {{'evacuate': {{",
             f"                'host': {move.host!r}}}}})",
             "            self.assertTrue(restarted.wait(60))"]
    body += _source_back(src, ": its init_host cleans up evacuations")
    return body + _after_restart(rec, scen, server, fixed)


def _after_restart(rec, scen, server: str, fixed: bool) -> list:
    """What the recovery left of the move, the usages, then the delete."""
    body = []
    if rec.recovery is not None:
        seen = (None, False, False) if fixed else rec.recovery
        if not fixed:
            body += [f"        # FIXME({_bug(rec.cause)}): the move is left half-done; this "
                     "should be", "        # (None, False, False)"]
        else:  # a fix may finish or undo the move once the service is up
            body.append(f"        self._wait_for_server_parameter(\n"
                        f"            {server}, {{'OS-EXT-STS:task_state': None}})")
        body += _fit(f"        self.assertEqual({seen!r}, self._move_left({server}))",
                     f"        self.assertEqual(\n            {seen!r},\n"
                     f"            self._move_left({server}))")
    # a fixed recovery leaves another state than the one these values follow from
    if not (fixed and rec.recovery is not None):
        body += _check("restart", rec, fixed) + _periodic_check("restart", rec, fixed,
                                                                always=True)
    else:
        body += ["", "        self._run_periodics()"]
    body.append("")
    # _delete_server would not delete a server in ERROR (a fixed recovery's)
    body += _deletes(scen, rec, fixed) + _check("delete", rec, fixed)
    if rec.guests:
        body += ([] if fixed else [f"        # FIXME({_bug(rec.cause)}): no delete reached "
                                   "these guests"])
        body.append(f"        self.assertEqual({({} if fixed else rec.guests)!r}, "
                    "self._guests())")
    return body + _periodic_check("delete", rec, fixed)


def _done_lines() -> list:
    lines = textwrap.wrap(", ".join(repr(d) for d in DONE), 70)
    return [("DONE = (" if i == 0 else "        ") + line + (")" if i == len(lines) - 1 else "")
            for i, line in enumerate(lines)]


def _periodic_check(step: str, rec, fixed: bool, always: bool = False) -> list:
    """A periodic after ``step``, checked where it changes what Nova showed. ``always``:
    run it even where no count moves (the restart's: the run ran one there, and what
    it leaves in a tracker's memory, the instances it tracks, decides the deletes)."""
    seen = {s: shown for s, shown, _ in rec.steps}
    if seen.get(f"{step} periodic", seen.get(step)) == seen.get(step):
        return ["", "        self._run_periodics()"] if always else []
    return ["", "        self._run_periodics()"] + _check(f"{step} periodic", rec, fixed)


def _asserts_recovery(rec) -> bool:
    """Whether the test asserts what the handling left of the move (``_move_left``)."""
    return rec.recovery is not None and not foreign(rec, "failure")


def foreign(rec, step: str) -> bool:
    """Whether ``step`` is in a phase another cause owns (:attr:`Recreate.foreign`)."""
    from harness.upstream.recreate import phase_of
    return phase_of(step) in rec.foreign


def _check(step: str, rec, fixed: bool) -> list:
    checks = {s: (seen, want) for s, seen, want in rec.steps}
    if step not in checks:
        return []
    seen, want = checks[step]
    if foreign(rec, step) and seen != want:
        return []  # another cause's face: its own test asserts it, under its FIXME
    out = []
    if not fixed and seen != want:
        out.append(f"        # FIXME({_bug(rec.cause)}): this should be")
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


def _first_lines(text: str, most: int) -> str:
    """The sentences of ``text`` that fill at most ``most`` docstring lines."""
    sentences = re.split(r"(?<=[.:;]) (?=[A-Z(])", re.sub(r"\s+", " ", text.strip()))
    kept = sentences[:1]
    for sentence in sentences[1:]:
        if len(textwrap.wrap(" ".join(kept + [sentence]), 72)) > most:
            break
        kept.append(sentence)
    return " ".join(kept)


def _docstring(rec, run) -> list:
    from harness.upstream import recreate_failure
    cause, b = rec.cause, rec.boundary
    if b.kind == "none":
        how = (f"Nothing is injected: the servers are deleted as soon as the "
               f"{rec.item.ending} is done, before any periodic runs, as a user may.")
        paras = [cause.title[0].upper() + cause.title[1:] + ".", _first_lines(cause.why, 8),
                 how]
        return [ln for para in paras for ln in textwrap.wrap(para, 72) + [""]][:-1]
    what = (f"{b.short} (the save that sets " + ", ".join(f"{f} {v}" for f, v in b.when) + ")"
            if b.kind == "save" else b.short)
    when = "as that call returns to" if b.after else "before"
    how = (f"{rec.dying} dies there: the test restarts its compute service in a stub of "
           f"{what}, {when} {rec.dying} {'' if b.after else 'makes that call'}".rstrip()
           + ", and the stub never returns, as in Nova's test_init_host; the state above "
           "holds then."
           if b.kill else
           recreate_failure.docstring_how(rec) if b.fails else
           f"The periodic runs on {' and '.join(rec.struck_roles(run))} in a stub of "
           f"{what}, {when} {rec.caller}{'' if b.after else ' makes that call'}, which is "
           "when the state above holds.")
    paras = [cause.title[0].upper() + cause.title[1:] + ".", _first_lines(cause.why, 8), how]
    lines = []
    for para in paras:
        lines += textwrap.wrap(para, 72) + [""]
    return lines[:-1]
