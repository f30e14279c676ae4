"""dedicated CPUs + 2 MiB hugepages, resize 2->4 vCPU on one host (same-host):
revert, with the resource tracker's periodic run on host-a at one call of the
move.

Mechanism (reviewed, nova-chaos root causes):
    same-host-double-count: same-host resize: a periodic between the move claim and finish_resize counts the new NUMA topology twice, fails, and loses the guest's old pins and pages

Bug: https://bugs.launchpad.net/nova/+bug/1953359 (its fix does not exclude same-node migrations)

The point: source:API.get_instance_nw_info>lock.refresh_cache-<uuid>#1
  = call 1 of oslo_concurrency.lockutils.lock (refresh_cache-<uuid>) made by compute host-a, counted from the move's request on.

What the harness saw (known):
    after-injection@host-a: [logs] log lines matching 'CPUPinningInvalid': expected [], seen CPUPinningInvalid
    after-injection@host-a: [logs] log lines matching 'Error updating resources for node': expected [], seen CPUPinningInvalid
    after-revert: [rt] host-a pinned pCPUs: expected 2, seen 0
    after-revert: [rt] host-a hugepages used: expected {2048: 512}, seen {}
    after-revert: [rt] host-a cell 1 pinned cpus (vs NUMA topologies): expected [6, 11], seen []
    after-revert: [rt] host-a cell 1 hugepages used (vs NUMA topologies): expected {2048: 512}, seen {}
    after-revert: [rt] host-a cell 1 guest memory MiB (vs NUMA topologies): expected 1024, seen 0
    after-revert: [rt] host-a cell 1 pinned cpus (vs domains): expected [6, 11], seen []
    after-revert: [rt] host-a cell 1 hugepages used (vs domains): expected {2048: 512}, seen {}
    after-revert: [rt] host-a cell 1 guest memory MiB (vs domains): expected 1024, seen 0
    after-revert: [truth] host-a cell 1 pCPUs pinned on the host but free in the RT: expected [], seen [6, 11]
    after-revert: [truth] host-a cell 1 hugepages held on the host beyond the RT: expected {}, seen {2048: 512}
    ... and 4 more

Each check compares Nova's accounting (the compute nodes as saved, placement)
with what the flavors say each host holds, before any periodic.

Replay in the harness: nova-chaos replay 'same-host/source:API.get_instance_nw_info>lock.refresh_cache-<uuid>#1/source/revert'
Written by: nova-chaos export 'same-host/source:API.get_instance_nw_info>lock.refresh_cache-<uuid>#1/source/revert'
"""
# first of Nova: its functional test package sets up the concurrency mode (eventlet or
# native threads, OS_NOVA_DISABLE_EVENTLET_PATCHING) before anything imports eventlet
import nova.tests.functional  # noqa: F401

import collections
import contextlib
import inspect
import importlib
import os
import re
import sys
import threading
import time

import fixtures

from nova import context as nova_context
from nova import objects
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.functional.api import client
from nova.tests.functional.libvirt import base
from nova.virt.libvirt import config as vconfig
from nova.virt.libvirt import host as libvirt_host

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
#: where a thread's work starts (an RPC server's dispatch): a stack walk stops there
_THREAD_BASES = {("oslo_messaging.rpc.server", "_process_incoming")}
_REAL_ONLINE_CPUS = libvirt_host.Host.get_online_cpus
#: seconds a test may take before it fails as stuck
TIMEOUT = 300
#: what an accounting error logs (the periodic logs its errors, it does not raise them)
LOG_PATTERNS = ("CPUUnpinningInvalid", "CPUPinningInvalid", "Error updating resources for node",
                "MemoryPagesUnsupported|MemoryPageSizeNotSupported")


def host_of_call(frame):
    """The compute host whose code makes the call at ``frame``: the nearest
    ComputeManager / ResourceTracker / LibvirtDriver on the stack (None: no
    compute's, e.g. the API or the conductor)."""
    from nova.compute.manager import ComputeManager
    from nova.compute.resource_tracker import ResourceTracker
    from nova.virt.libvirt.driver import LibvirtDriver
    depth = 80
    while frame is not None and depth:
        obj = frame.f_locals.get("self")
        if isinstance(obj, (ComputeManager, ResourceTracker)):
            return obj.host
        if isinstance(obj, LibvirtDriver):
            return getattr(obj._host.get_connection(), "hostname", None)
        if (frame.f_globals.get("__name__"), frame.f_code.co_name) in _THREAD_BASES:
            return None
        frame, depth = frame.f_back, depth - 1
    return None


def resolve(path):
    """``"package.module.Class"`` (or a module) -> the object."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            obj = getattr(obj, name)
        return obj
    raise ImportError(path)


def call_detail(callee, args, kwargs):
    """What tells calls of one callee apart (a notification's event type, a lock's name)."""
    if callee.endswith("NotificationBase.emit") and args:
        event = getattr(args[0], "event_type", None)
        try:
            return event.to_notification_event_type_field()
        except Exception:
            return None
    if callee.endswith("notify_about_instance_usage"):
        return kwargs.get("event_suffix", args[3] if len(args) > 3 else None)
    if callee.endswith("lockutils.lock") and args:
        return _UUID.sub("<uuid>", str(args[0]).split("@")[0])
    return None


class Trigger(fixtures.Fixture):
    """Run ``action`` right before the ``nth`` call of ``callee`` (with
    ``detail``) made by compute ``host``, counting from :meth:`arm` on.

    With ``nth=None`` it only counts (``calls``: one entry per matching call).
    """

    def __init__(self, callee, detail, host, nth=None, action=None):
        super().__init__()
        self.callee, self.detail, self.host = callee, detail, host
        self.nth, self.action = nth, action
        self.armed, self.calls, self.fired = False, 0, False

    def arm(self):
        self.armed = True

    def _setUp(self):
        owner_path, attr = self.callee.rsplit(".", 1)
        owner = resolve(owner_path)
        raw = inspect.getattr_static(owner, attr)
        if isinstance(raw, classmethod):
            new = classmethod(self._make(raw.__func__))
        elif isinstance(raw, staticmethod):
            new = staticmethod(self._make(raw.__func__))
        else:
            new = self._make(raw)
        self.useFixture(fixtures.MonkeyPatch(self.callee, new))

    def _make(self, real):
        trigger = self

        def counted(*args, **kwargs):
            if (trigger.armed and call_detail(trigger.callee, args, kwargs) == trigger.detail
                    and host_of_call(sys._getframe(1)) == trigger.host):
                trigger.calls += 1
                if trigger.calls == trigger.nth and trigger.action is not None:
                    trigger.fired = True
                    trigger.action()
            return real(*args, **kwargs)
        for name in ("__name__", "__qualname__", "__doc__", "__wrapped__", "remotable"):
            if hasattr(real, name):
                setattr(counted, name, getattr(real, name))
        return counted


def host_info(cells, sockets, cores, threads):
    """A fake libvirt host whose NUMA cells are exactly ``cells``:
    ``[(cell id, memory KiB, [(cpu, socket, core, siblings)], [(page KiB, count)])]``."""
    info = fakelibvirt.HostInfo(cpu_nodes=len(cells), cpu_sockets=sockets, cpu_cores=cores,
                                cpu_threads=threads,
                                kB_mem=sum(memory_kb for _, memory_kb, _, _ in cells))
    topology = vconfig.LibvirtConfigCapsNUMATopology()
    for cell_id, memory_kb, cpus, pools in cells:
        cell = vconfig.LibvirtConfigCapsNUMACell()
        cell.id, cell.memory = cell_id, memory_kb
        for cpu_id, socket_id, core_id, siblings in cpus:
            cpu = vconfig.LibvirtConfigCapsNUMACPU()
            cpu.id, cpu.socket_id, cpu.core_id, cpu.siblings = cpu_id, socket_id, core_id, set(siblings)
            cell.cpus.append(cpu)
        cell.mempages = fakelibvirt.create_mempages(pools)
        topology.cells.append(cell)
    info.numa_topology = topology
    return info


def usage(test, hosts):
    """What Nova accounts on each host, as saved by its resource tracker and in
    placement: ``{"host pinned pCPUs": n, "host hugepages used": {KiB: n}, ...}``."""
    ctx = nova_context.get_admin_context()
    seen = {}
    for host in hosts:
        node = objects.ComputeNode.get_by_host_and_nodename(ctx, host, host)
        pinned, pages, small = 0, collections.Counter(), 0
        if node.numa_topology:
            for cell in objects.NUMATopology.obj_from_db_obj(node.numa_topology).cells:
                pinned += len(cell.pinned_cpus)
                for pool in cell.mempages:
                    if pool.size_kb == 4:
                        small += pool.used
                    elif pool.used:
                        pages[pool.size_kb] += pool.used
        seen[f"{host} pinned pCPUs"] = pinned
        seen[f"{host} hugepages used"] = dict(sorted(pages.items()))
        seen[f"{host} small pages used"] = small
        provider = test.compute_rp_uuids[host]
        body = test.placement.get(f"/resource_providers/{provider}/usages").body
        seen[f"placement {host} usages"] = {k: v for k, v in sorted(body["usages"].items()) if v}
    return seen


def differences(expected, seen):
    """One line per value that is not as expected, in the harness's wording."""
    return [f"{what}: expected {expected[what]!r}, seen {seen.get(what)!r}"
            for what in expected if seen.get(what) != expected[what]]


def _causes(lines, i):
    """The exception log line ``i`` is (a traceback's last line), or the one a traceback
    right under it ends in, if one does."""
    raised = re.match(r"(?:[A-Za-z_]\w*\.)*([A-Z]\w*(?:Error|Exception|Invalid|Unknown|"
                      r"Unsupported|NotSupported|NotFound|Failed|Timeout)): ", lines[i])
    if raised:
        return [raised.group(1)]
    if i + 1 < len(lines) and lines[i + 1].startswith("Traceback"):
        last = next((line for line in lines[i + 2:] if not line.startswith(" ")), "")
        if last:
            return [last.split(":", 1)[0].rsplit(".", 1)[-1]]
    return []


def wait_settled(test, server_id, what, timeout=60.0):
    """Poll the API until the server has no task; fail unless it is ACTIVE."""
    deadline = time.monotonic() + timeout
    while True:
        server = test.api.get_server(server_id)
        if server["OS-EXT-STS:task_state"] is None and server["status"] in ("ACTIVE", "ERROR",
                                                                            "VERIFY_RESIZE"):
            break
        if time.monotonic() > deadline:
            test.fail(f"{what}: still {server['status']}/{server['OS-EXT-STS:task_state']} "
                      f"after {timeout:.0f} s")
        time.sleep(0.05)
    return server


def api_paste_config():
    """Nova's api-paste.ini: beside the package in a tree, under the prefix from a wheel."""
    import nova
    tree = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(nova.__file__))), "etc")
    for root in (tree, os.path.join(sys.prefix, "etc")):
        path = os.path.join(root, "nova", "api-paste.ini")
        if os.path.isfile(path):
            return path
    return None


class HostStubs(fixtures.Fixture):
    """The host's CPUs and disks as nova-chaos's cloud stubs them (it uses this class):
    the online CPUs are the fake host's own (Nova's base says 0-15); images, disk
    info and shared storage are stubbed so the driver's real resize path runs."""

    def _setUp(self):
        from nova.virt.libvirt import utils as libvirt_utils
        self.useFixture(fixtures.MonkeyPatch("nova.virt.libvirt.host.Host.get_online_cpus",
                                             _REAL_ONLINE_CPUS))

        def create_image(driver, context, instance, *args, **kwargs):
            os.makedirs(libvirt_utils.get_instance_path(instance), exist_ok=True)
            return False, False
        self.useFixture(fixtures.MonkeyPatch(
            "nova.virt.libvirt.LibvirtDriver._create_image", create_image))
        self.useFixture(fixtures.MockPatch(
            "nova.virt.libvirt.LibvirtDriver._get_instance_disk_info", return_value=[]))
        self.useFixture(fixtures.MockPatch(
            "nova.virt.libvirt.LibvirtDriver._is_path_shared_with", return_value=True))


class PerHostLocks(fixtures.Fixture):
    """One ``compute_resources`` lock per compute host, as in production (one
    nova-compute process each); in-process they would share one.

    A periodic asked for on a host whose lock this very thread holds (the
    point is inside a resource-tracker critical section) runs as soon as the
    lock is released, as production's periodic, blocked on it, would:
    :meth:`run_or_defer`.
    """

    def _setUp(self):
        from oslo_concurrency import lockutils
        real = lockutils.lock
        self.held = {}                                    # lock name -> thread ident
        self.on_release = collections.defaultdict(list)   # lock name -> callbacks
        locks = self

        @contextlib.contextmanager
        def lock(name, *args, **kwargs):
            if name == "compute_resources":
                host = host_of_call(sys._getframe(1))
                name = f"{name}@{host}" if host else name
            with real(name, *args, **kwargs) as acquired:
                locks.held[name] = threading.get_ident()
                try:
                    yield acquired
                finally:
                    locks.held.pop(name, None)
            for callback in locks.on_release.pop(name, ()):
                callback()
        self.useFixture(fixtures.MonkeyPatch("oslo_concurrency.lockutils.lock", lock))

    def run_or_defer(self, host, fn):
        """``fn()`` now, or at the release of ``host``'s lock if this thread holds it."""
        name = f"compute_resources@{host}"
        if self.held.get(name) == threading.get_ident():
            self.on_release[name].append(fn)
        else:
            fn()


class MoveTestBase(base.ServersTestBase):
    """Nova's libvirt functional base, driven by the scenario the harness swept.

    Each ``check`` compares what Nova accounts with what the flavors say the
    hosts should hold; every difference is kept and the test fails at its
    end with all of them, so one run shows the whole damage.
    """

    microversion = "latest"
    ADMIN_API = True

    def _setup_services(self):
        paste = api_paste_config()
        if paste:
            self.flags(api_paste_config=paste, group="wsgi")
        super()._setup_services()

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.Timeout(TIMEOUT, gentle=True))  # a stuck run fails, never hangs
        self.problems = []
        self.locks = self.useFixture(PerHostLocks())
        self.useFixture(HostStubs())

    def start_hosts(self, hosts, dedicated, shared, same_host):
        self.flags(cpu_dedicated_set=dedicated, cpu_shared_set=shared, group="compute")
        self.flags(vcpu_pin_set=None)
        self.flags(allow_resize_to_same_host=same_host)
        self.hosts = list(hosts)
        for name, layout in hosts.items():
            self.start_compute(hostname=name, host_info=host_info(**layout))

    def create_flavors(self, flavors):
        self.flavor_ids = {name: self._create_flavor(name=name, ephemeral=0, swap=0, **spec)
                           for name, spec in flavors.items()}
        self.servers = {}
        self.log_seen = len(self.stdlog.logger.output)  # start-up warnings are not evidence

    def boot(self, name, flavor, host):
        server = self._create_server(name=name, flavor_id=self.flavor_ids[flavor], host=host,
                                     networks="none", expected_state="ACTIVE")
        self.servers[name] = server["id"]

    def _action(self, name, body, status, what):
        try:
            self.api.post_server_action(self.servers[name], body)
        except client.OpenStackApiException as exc:
            self.problems.append(f"{what}: the API refused: {str(exc)[:300]}")
            return
        server = wait_settled(self, self.servers[name], what)
        if server["status"] != status:
            self.problems.append(f"{what}: the server is {server['status']}, not {status}")

    def resize(self, name, flavor):
        self._action(name, {"resize": {"flavorRef": self.flavor_ids[flavor]}}, "VERIFY_RESIZE",
                     f"resize of {name}")

    def migrate(self, name, host):
        self._action(name, {"migrate": {"host": host} if host else None}, "VERIFY_RESIZE",
                     f"migrate of {name}")

    def confirm(self, name):
        self._action(name, {"confirmResize": None}, "ACTIVE", f"confirm of {name}")

    def revert(self, name):
        self._action(name, {"revertResize": None}, "ACTIVE", f"revert of {name}")

    def periodic(self, host):
        self.computes[host].manager.update_available_resource(nova_context.get_admin_context())

    def periodic_at_point(self, hosts):
        """The injected periodic on each of ``hosts``, through its lock as production's;
        what it logged is checked right after it."""
        def injected(host):
            self.periodic(host)
            self.check_logs(f"after-injection@{host}")
        for host in hosts:
            self.locks.run_or_defer(host, lambda host=host: injected(host))

    def check_logs(self, checkpoint):
        """No accounting error logged since the last check; each named by its exceptions."""
        text = self.stdlog.logger.output
        lines, self.log_seen = text[self.log_seen:].splitlines(), len(text)
        for pattern in LOG_PATTERNS:
            hits = [i for i, line in enumerate(lines) if re.search(pattern, line)]
            if hits:
                causes = sorted({c for i in hits for c in _causes(lines, i)})
                self.problems.append(f"{checkpoint}: log lines matching {pattern!r}: "
                                     f"{', '.join(causes) or 'no exception'}")

    def delete_all(self):
        for name, server_id in self.servers.items():
            try:
                self.api.delete_server(server_id)
            except client.OpenStackApiException as exc:
                self.problems.append(f"delete of {name}: the API refused: {str(exc)[:200]}")
                continue
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    self.api.get_server(server_id)
                except client.OpenStackApiNotFoundException:
                    break
                time.sleep(0.05)
            else:
                self.problems.append(f"delete of {name}: still there after 60 s")

    def check(self, checkpoint, expected):
        """Nova's accounting now (no periodic in between) against ``expected``."""
        self.problems += [f"{checkpoint}: {line}"
                          for line in differences(expected, usage(self, self.hosts))]
        self.check_logs(checkpoint)

    def check_converged(self, checkpoint):
        """A periodic on every host must change nothing Nova accounts."""
        before = usage(self, self.hosts)
        for host in self.hosts:
            self.periodic(host)
        after = usage(self, self.hosts)
        self.problems += [f"{checkpoint}: a periodic changed {what}: {before[what]!r} -> "
                          f"{after[what]!r}" for what in before if after[what] != before[what]]
        self.check_logs(f"{checkpoint}, the periodic after it")

    def assertNoProblems(self):
        if self.problems:
            self.fail("Nova's accounting is not what the flavors say:\n  "
                      + "\n  ".join(self.problems))


HOSTS = {'host-a': {'cells': [(0,
                       8388608,
                       [(0, 0, 0, [0]),
                        (1, 0, 1, [1]),
                        (2, 0, 2, [2]),
                        (3, 0, 3, [3]),
                        (4, 0, 4, [4]),
                        (5, 0, 5, [5])],
                       [(4, 1572864), (2048, 1024)]),
                      (1,
                       8388608,
                       [(6, 1, 0, [6]),
                        (7, 1, 1, [7]),
                        (8, 1, 2, [8]),
                        (9, 1, 3, [9]),
                        (10, 1, 4, [10]),
                        (11, 1, 5, [11])],
                       [(4, 1572864), (2048, 1024)])],
            'sockets': 1,
            'cores': 6,
            'threads': 1}}
FLAVORS = {'large': {'vcpu': 4,
           'memory_mb': 2048,
           'disk': 1,
           'extra_spec': {'hw:cpu_policy': 'dedicated', 'hw:mem_page_size': '2048'}},
 'small': {'vcpu': 2,
           'memory_mb': 1024,
           'disk': 1,
           'extra_spec': {'hw:cpu_policy': 'dedicated', 'hw:mem_page_size': '2048'}}}
CALLEE = 'oslo_concurrency.lockutils.lock'
DETAIL = 'refresh_cache-<uuid>'
EXPECTED = {'after-boot': {'host-a pinned pCPUs': 2,
                'host-a hugepages used': {2048: 512},
                'host-a small pages used': 0,
                'placement host-a usages': {'DISK_GB': 1, 'MEMORY_MB': 1024, 'PCPU': 2}},
 'verify-resize': {'host-a pinned pCPUs': 6,
                   'host-a hugepages used': {2048: 1536},
                   'host-a small pages used': 0,
                   'placement host-a usages': {'DISK_GB': 2, 'MEMORY_MB': 3072, 'PCPU': 6}},
 'after-revert': {'host-a pinned pCPUs': 2,
                  'host-a hugepages used': {2048: 512},
                  'host-a small pages used': 0,
                  'placement host-a usages': {'DISK_GB': 1, 'MEMORY_MB': 1024, 'PCPU': 2}},
 'after-delete': {'host-a pinned pCPUs': 0,
                  'host-a hugepages used': {},
                  'host-a small pages used': 0,
                  'placement host-a usages': {}}}
#: what nova-chaos reported for this item: (checkpoint, check, where, expected, seen)
HARNESS_SAW = [('after-injection@host-a',
  'logs',
  "log lines matching 'CPUPinningInvalid'",
  '[]',
  'CPUPinningInvalid'),
 ('after-injection@host-a',
  'logs',
  "log lines matching 'Error updating resources for node'",
  '[]',
  'CPUPinningInvalid'),
 ('after-revert', 'rt', 'host-a pinned pCPUs', '2', '0'),
 ('after-revert', 'rt', 'host-a hugepages used', '{2048: 512}', '{}'),
 ('after-revert', 'rt', 'host-a cell 1 pinned cpus (vs NUMA topologies)', '[6, 11]', '[]'),
 ('after-revert',
  'rt',
  'host-a cell 1 hugepages used (vs NUMA topologies)',
  '{2048: 512}',
  '{}'),
 ('after-revert', 'rt', 'host-a cell 1 guest memory MiB (vs NUMA topologies)', '1024', '0'),
 ('after-revert', 'rt', 'host-a cell 1 pinned cpus (vs domains)', '[6, 11]', '[]'),
 ('after-revert', 'rt', 'host-a cell 1 hugepages used (vs domains)', '{2048: 512}', '{}'),
 ('after-revert', 'rt', 'host-a cell 1 guest memory MiB (vs domains)', '1024', '0'),
 ('after-revert',
  'truth',
  'host-a cell 1 pCPUs pinned on the host but free in the RT',
  '[]',
  '[6, 11]'),
 ('after-revert',
  'truth',
  'host-a cell 1 hugepages held on the host beyond the RT',
  '{}',
  '{2048: 512}'),
 ('after-revert',
  'truth',
  'host-a cell 1 guest memory MiB held on the host beyond the RT',
  '0',
  '1024'),
 ('after-revert', 'convergence', 'periodic changed rt host-a cells 1 cpus', '[]', '[6, 11]'),
 ('after-revert', 'convergence', 'periodic changed rt host-a cells 1 memory_mb', '0', '1024'),
 ('after-revert',
  'convergence',
  'periodic changed rt host-a cells 1 pages 2048',
  'None',
  '512')]


class TestSameHost(MoveTestBase):

    def test_revert_periodic_on_source_at_lock_refresh_cache_uuid_1(self):
        self.start_hosts(HOSTS, '2,3,4,5,6,7,8,9,10,11', '0,1', same_host=True)
        self.create_flavors(FLAVORS)
        self.boot('vm1', 'small', None)
        self.check('after-boot', EXPECTED['after-boot'])
        # the point: run the periodic there, as production's could
        trigger = self.useFixture(Trigger(
            CALLEE, DETAIL, 'host-a', nth=1,
            action=lambda: self.periodic_at_point(['host-a'])))
        trigger.arm()
        self.resize('vm1', 'large')
        self.check('verify-resize', EXPECTED['verify-resize'])
        self.revert('vm1')
        if not trigger.fired:
            self.problems.append("the point was never reached: nothing was tested")
        self.check('after-revert', EXPECTED['after-revert'])
        self.check_converged('after-revert')
        self.delete_all()
        self.check('after-delete', EXPECTED['after-delete'])
        self.check_converged('after-delete')
        self.assertNoProblems()
