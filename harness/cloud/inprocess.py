"""An in-process Nova cloud on fake libvirt hosts, as a ``fixtures.Fixture``.

Real API, conductor, scheduler, placement and one real ComputeManager +
ResourceTracker + LibvirtDriver per host, assembled by Nova's own functional
test base (``ServersTestBase``) driven programmatically -- not run as a
unittest under pytest, which sidesteps Nova's ``_clear_attrs`` teardown
clash. Periodic tasks are off; the harness runs ``update_available_resource``
itself. Every stub beyond Nova's own test base is listed in ``STUBS``.
"""
from __future__ import annotations

import collections
import contextlib
import functools
import importlib
import os
import sys
import time

import fixtures

from harness.errors import HostCrashed, NovaUnusable, RunTimeout, ScenarioFailed

#: stubs this harness adds to Nova's ServersTestBase, with the reason for each
STUBS = (
    ("LibvirtDriver._create_image",
     "only creates the instance directory: there is no image service to fetch from"),
    ("LibvirtDriver._get_instance_disk_info",
     "returns no local disks, so migrate_disk_and_power_off copies no files (no qemu-img)"),
    ("LibvirtDriver._is_path_shared_with",
     "True: instance path shared between hosts, so no ssh to the destination"),
)
#: environment corrections: make the shared in-process config look per-host
PER_HOST = (
    ("nova.compute.manager.CONF.host, nova.virt.libvirt.driver.CONF.host",
     "answer the host whose compute code is running (e.g. confirm undefines the "
     "source domain only when instance.host != CONF.host)"),
    ("[pci] device_spec, report_in_placement in those two and PCI_READERS",
     "a host's own values where the scenario gives them ([cloud.pci.hosts.NAME])"),
)
#: the modules whose compute code reads a host's own ``[pci] device_spec`` or
#: ``report_in_placement`` (with compute.manager and libvirt.driver, host-aware
#: anyway): host-aware for them too when a scenario sets those per host
PCI_READERS = ("nova.pci.manager", "nova.pci.stats", "nova.pci.devspec",
               "nova.compute.pci_placement_translator")  # and the two above
#: stubs inherited from Nova's ServersTestBase that the harness undoes
UNSTUBBED = (
    ("Host.get_online_cpus", "answered by the fake host's own CPU map, not range(16)"),
    ("Host.get_connection", "each compute gets its own FakeLibvirtHost"),
)

_ENV_CLASS = None
#: seconds a resize may sit in VERIFY_RESIZE before the periodic confirms it
RESIZE_CONFIRM_WINDOW = 3600
#: how often a wait asks again (its bound counts these, see Cloud._poll)
POLL_SECONDS = 0.05


def api_paste_config() -> str:
    """Locate api-paste.ini for the loaded Nova (checkout or wheel layout)."""
    import nova
    pkg = os.path.dirname(os.path.abspath(nova.__file__))
    candidates = [os.path.join(os.path.dirname(pkg), "etc", "nova", "api-paste.ini"),
                  os.path.join(sys.prefix, "etc", "nova", "api-paste.ini")]
    try:
        from importlib import metadata
        for f in metadata.files("nova") or ():
            if str(f).endswith("etc/nova/api-paste.ini"):
                candidates.append(str(f.locate()))
    except Exception:  # not installed as a distribution (bare checkout)
        pass
    for path in candidates:
        if os.path.isfile(path):
            return os.path.abspath(path)
    raise NovaUnusable(f"nova at {pkg}: cannot find etc/nova/api-paste.ini (looked in {candidates[:2]})")


def _environment_class():
    """Build (once) the ServersTestBase subclass; imports Nova."""
    global _ENV_CLASS
    if _ENV_CLASS is not None:
        return _ENV_CLASS
    from nova.tests.functional.libvirt import base

    from fake_driver.host import FakeLibvirtHost
    from harness.upstream import prelude  # before base's setUp mocks the online CPUs

    class NovaEnvironment(base.ServersTestBase):
        """Nova's libvirt functional base, used as an environment, not a test."""

        microversion = "latest"
        ADMIN_API = True

        def runTest(self):  # testtools needs a test method to exist
            pass

        def _setup_services(self):
            # the wheel puts api-paste.ini under <prefix>/etc, not beside nova/
            self.flags(api_paste_config=api_paste_config(), group="wsgi")
            # before any service starts: each servicegroup driver (the API's
            # controllers, the scheduler's filters) copies it when made
            self.flags(service_down_time=SERVICE_DOWN_TIME)
            _configure_pci(self, self.harness_pci)
            super()._setup_services()

        def setUp(self):
            super().setUp()
            # the same stubs an exported regression test carries (harness.upstream)
            self.useFixture(prelude.HostStubs())
            from harness.cloud.hostctx import HostAwareConf
            per_host = self.harness_pci.per_host if self.harness_pci else None
            groups = {"pci": per_host} if per_host else None
            for module in ("nova.compute.manager", "nova.virt.libvirt.driver",
                           *(PCI_READERS if per_host else ())):
                conf = importlib.import_module(module).CONF
                self.useFixture(fixtures.MonkeyPatch(f"{module}.CONF", HostAwareConf(conf, groups)))

        def _get_connection(self, host_info=None, pci_info=None, mdev_info=None,
                            vdpa_info=None, libvirt_version=None, qemu_version=None,
                            hostname=None):
            peers = self.__dict__.setdefault("harness_peers", {})  # live migration reaches them
            return FakeLibvirtHost(self.harness_topologies[hostname], self.harness_dedicated,
                                   peers=peers)

    _ENV_CLASS = NovaEnvironment
    return _ENV_CLASS


def _configure_pci(env, pci) -> None:
    """``[pci]`` for a scenario whose hosts declare PCI devices (before any service
    starts: the API reads the aliases, the scheduler its filters).

    The in-process services share one ``CONF``: these are the cloud-wide
    values (by default ``device_spec`` lists every declared vendor/product
    pair, so each host tracks exactly the devices it declares), which a
    host's own ``device_spec`` / ``report_in_placement`` override for its
    compute code (``PCI_READERS``, host-aware). ``PciPassthroughFilter`` joins
    the scheduler's filters; PCI in placement (``[pci] report_in_placement``
    and ``[filter_scheduler] pci_in_placement``) only if the scenario asks.
    Without PCI nothing changes.
    """
    if pci is None:
        return
    env.ADDITIONAL_FILTERS = [*env.ADDITIONAL_FILTERS, "PciPassthroughFilter"]
    env.flags(device_spec=list(pci.device_spec), alias=pci.alias_options(),
              report_in_placement=pci.in_placement, group="pci")
    env.flags(pci_in_placement=pci.in_placement, group="filter_scheduler")


class Cloud(fixtures.Fixture):
    """Two (or more) compute hosts, flavors created, services running.

    :ivar env: the Nova test environment (API client, placement, computes)
    :ivar flavor_ids: scenario flavor name -> Nova flavor id
    :ivar servers: scenario server name -> server uuid
    """

    crashed: tuple | list = ()  # hosts whose compute died (the restart fault), not restarted yet
    #: set by a fault that makes a call fail: ``() -> MoveInterrupted | None``, what a wait
    #: raises once Nova's handling of the failure is over (the fault's recovery takes over)
    interruption = None

    def __init__(self, scenario, timeout: float = 60.0, one_thread: bool = False,
                 files_at: str | None = None):
        super().__init__()
        self.scenario = scenario
        self.timeout = timeout
        self.one_thread = one_thread  # the OneThread fixture once up (threads backend, fork)
        self.files_at = files_at  # instances_path, resolved in each process's working directory

    def _setUp(self):
        # in-memory databases: a forked child must keep the parent's connections,
        # which oslo.db would otherwise invalidate as "created by another pid"
        self.useFixture(fixtures.MonkeyPatch(
            "oslo_db.sqlalchemy.engines._add_process_guards", lambda engine: None))
        if self.one_thread:  # before any service starts: they must start no thread
            from harness.cloud.one_thread import OneThread
            self.one_thread = self.useFixture(OneThread())
        env = _environment_class()("runTest")
        env.harness_topologies = {h.name: h for h in self.scenario.hosts}
        env.harness_dedicated = self.scenario.cpu_sets.dedicated
        env.harness_pci = self.scenario.pci
        try:
            env.setUp()
        finally:
            self.addCleanup(env.doCleanups)
        if self.one_thread:  # before the cloud goes: a killed compute's frozen thread
            self.addCleanup(self.one_thread.bury)
        self.env = env
        if self.files_at:  # a process that forks: its children see their own files there
            from nova import conf
            home = self.useFixture(fixtures.TempDir()).path
            os.rename(conf.CONF.instances_path, os.path.join(home, "instances"))
            self.addCleanup(os.chdir, os.getcwd())
            os.chdir(home)
            env.flags(instances_path=self.files_at)
        fmt = lambda cpus: ",".join(str(c) for c in sorted(cpus)) or None  # noqa: E731
        env.flags(cpu_dedicated_set=fmt(self.scenario.cpu_sets.dedicated),
                  cpu_shared_set=fmt(self.scenario.cpu_sets.shared), group="compute")
        env.flags(vcpu_pin_set=None)
        # No Nova deadline may expire because the harness paused or starved
        # Nova: a fork parent waits for its children with a resize call in
        # flight, for as long as the campaign's size and the machine allow
        # (measured: with 600 s, 150 of 387 bystander items at --jobs 1; with
        # Nova's 60 s, fork parents under pytest -n auto). RPC deadlines are
        # as long as the heartbeats'; the harness's own --timeout bounds a
        # stuck item instead.
        env.flags(rpc_response_timeout=SERVICE_DOWN_TIME)
        # Nova behaviour that follows the wall clock, not the interleaving: a
        # forked parent lives for minutes while its children run, so neither
        # may change what a child does. Measured: the report client's 300 s
        # provider-cache refresh added placement calls to late children and
        # broke their recorded trace. 0 = refresh never (still loaded once);
        # and no service may look down for want of a heartbeat (see
        # SERVICE_DOWN_TIME, set before the services start).
        env.flags(resource_provider_association_refresh=0, group="compute")
        # the auto-confirm ending moves the clock past this window (freezegun)
        env.flags(resize_confirm_window=RESIZE_CONFIRM_WINDOW)
        env.flags(allow_resize_to_same_host=self.scenario.allow_same_host)
        for host in self.scenario.hosts:
            env.start_compute(hostname=host.name)
        # a restarted compute keeps its fake host and provider; Nova's restart
        # helper drops both from its maps while the new service starts
        self.providers = dict(env.compute_rp_uuids)
        self.down: set = set()  # hosts whose compute is stopped (evacuate's fenced source)
        self.crashed = []
        self.flavor_ids = {}
        for name, flavor in sorted(self.scenario.flavors.items()):
            self.flavor_ids[name] = env._create_flavor(
                name=name, vcpu=flavor.vcpus, memory_mb=flavor.memory_mb,
                disk=flavor.disk_gb, ephemeral=0, swap=0, extra_spec=flavor.extra_specs)
        self.servers = {}
        self.moves_ended = collections.Counter()  # instance uuid -> live migrations over
        self.useFixture(fixtures.MonkeyPatch(
            "nova.compute.manager.ComputeManager._do_live_migration", self._counted()))

    def _counted(self):
        """The source's ``_do_live_migration``, counting its returns per instance: its
        last word on a live migration, which the API's status precedes (it says ACTIVE
        before the source has cleaned up and set the migration's status) -- after its
        own handler of what ``_post_live_migration`` or the rollback raised, which may
        set the migration 'error' once they already said 'completed'."""
        from nova.compute import manager
        real = manager.ComputeManager._do_live_migration

        @functools.wraps(real)
        def counted(manager_self, context, dest, instance, *args, **kwargs):
            try:
                return real(manager_self, context, dest, instance, *args, **kwargs)
            finally:
                self.moves_ended[instance.uuid] += 1
        return counted

    # -- accessors -----------------------------------------------------------
    def compute(self, host: str):
        return self.env.computes[host]

    def libvirt_host(self, host: str):
        return self.env.harness_peers[host]

    def rp_uuid(self, host: str) -> str:
        return self.providers[host]

    def server(self, name: str) -> dict:
        return self.env.api.get_server(self.servers[name])

    def log_text(self) -> str:
        return self.env.stdlog.logger.output

    # -- operations ----------------------------------------------------------
    def _poll(self, ready, stuck):
        """Call ``ready()`` until it returns something true, and return that; bounded.

        Past ``self.timeout`` seconds of polling the wait is a reported
        failure: ``stuck()`` says where. The bound counts polls, not the wall
        clock: a fork parent holds its whole process still while it forks and
        waits for slots, and on eventlet this wait runs meanwhile (a live
        migration's job runs on after the API call returns), so wall time
        would charge the children's time to Nova (measured: 33 of 46 eventlet
        live-migration items, and their parent, "never finished").
        """
        for _ in range(int(self.timeout / POLL_SECONDS) + 1):
            if self.crashed:  # what it waits for died with the host: the recovery takes over
                raise HostCrashed(self.crashed[0])
            interrupted = self.interruption() if self.interruption is not None else None
            if interrupted is not None:  # what it waits for will not come: the same
                raise interrupted
            value = ready()
            if value:
                return value
            time.sleep(POLL_SECONDS)
        raise ScenarioFailed(stuck())

    def wait_for(self, name: str, statuses, what: str) -> dict:
        """Poll the server until its status is in ``statuses`` (an ERROR ends the wait)."""
        seen = {}

        def stuck():
            server = seen["server"]
            return (f"{what}: server {name} is {server['status']} "
                    f"(task_state {server.get('OS-EXT-STS:task_state')}), expected "
                    f"{'/'.join(statuses)}" + (f"; fault: {server['fault']['message']}"
                                               if server.get("fault") else ""))

        def ready():
            server = seen["server"] = self.server(name)
            if server["status"] == "ERROR":
                raise ScenarioFailed(stuck())
            return server["status"] in statuses and not server.get("OS-EXT-STS:task_state") and server

        return self._poll(ready, stuck)

    def boot(self, name: str, flavor: str, host: str | None) -> dict:
        try:
            server = self.env._create_server(
                name=name, flavor_id=self.flavor_ids[flavor], host=host,
                networks="none", expected_state="ACTIVE")
        except AssertionError as exc:  # testtools' wait gave up
            raise ScenarioFailed(f"boot {name}: {str(exc).splitlines()[0]}") from None
        self.servers[name] = server["id"]
        return self.wait_for(name, ("ACTIVE",), f"boot {name}")

    def post_action(self, name: str, body: dict, what: str) -> None:
        from nova.tests.functional.api import client
        try:
            self.env.api.post_server_action(self.servers[name], body)
        except client.OpenStackApiException as exc:
            raise ScenarioFailed(f"{what}: API refused: {str(exc)[:200]}") from None

    def resize(self, name: str, flavor: str) -> dict:
        self.post_action(name, {"resize": {"flavorRef": self.flavor_ids[flavor]}}, f"resize {name}")
        return self.wait_for(name, ("VERIFY_RESIZE",), f"resize {name}")

    def migrate(self, name: str, host: str | None) -> dict:
        self.post_action(name, {"migrate": {"host": host} if host else None}, f"migrate {name}")
        return self.wait_for(name, ("VERIFY_RESIZE",), f"migrate {name}")

    def live_migrate(self, name: str, host: str | None) -> dict:
        """Live-migrate ``name`` (to ``host``, or where the scheduler picks) and wait
        until the source is done with it; the job ends as the source's fake host
        says (``job_outcome``, :meth:`set_job_outcome`)."""
        uuid = self.servers[name]
        ended = self.moves_ended[uuid]
        self.post_action(name, {"os-migrateLive": {"host": host, "block_migration": "auto"}},
                         f"live-migrate {name}")
        self._poll(lambda: self.moves_ended[uuid] > ended,
                   lambda: f"live-migrate {name}: the source never finished it "
                           f"(server {self.server(name)['status']})")
        return self.wait_for(name, ("ACTIVE",), f"live-migrate {name}")

    def set_job_outcome(self, outcome: str) -> None:
        """How live-migration jobs from every host end from now on (fake_driver.migration)."""
        for host in self.scenario.hosts:
            self.libvirt_host(host.name).job_outcome = outcome

    @contextlib.contextmanager
    def job_decisions(self, callback):
        """Call ``callback()`` as each live-migration job is about to end, on every host."""
        hosts = [self.libvirt_host(h.name) for h in self.scenario.hosts]
        for host in hosts:
            host.on_job_settle = callback
        try:
            yield
        finally:
            for host in hosts:
                host.on_job_settle = None

    def shelve_offload(self, name: str) -> dict:
        """Shelve ``name``; with Nova's default ``shelved_offload_time`` of 0 it is
        offloaded at once: no host, nothing held anywhere."""
        self.post_action(name, {"shelve": {}}, f"shelve {name}")
        return self.wait_for(name, ("SHELVED_OFFLOADED",), f"shelve {name}")

    def unshelve(self, name: str, host: str | None) -> dict:
        """Unshelve ``name`` (to ``host``: microversion 2.91, or where the scheduler picks)."""
        self.post_action(name, {"unshelve": {"host": host} if host else None}, f"unshelve {name}")
        return self.wait_for(name, ("ACTIVE",), f"unshelve {name}")

    def fence(self, host: str) -> None:
        """Take ``host`` down as an operator would before evacuating it.

        Its compute service stops (no RPC, no periodic), its guests are
        stopped but stay defined (fenced: they hold nothing on the host), and
        the service is forced down so the API lets its servers be evacuated.
        """
        self.compute(host).stop()
        self.down.add(host)
        conn = self.libvirt_host(host)
        for domain in list(conn._running_vms.values()):
            domain.destroy()
        self.env.api.put_service(self._service_id(host), {"forced_down": True})

    def restart(self, host: str) -> None:
        """Start a new compute service on ``host``'s fake host (a new ComputeManager
        and resource tracker: its init_host runs here), then clear forced-down."""
        self.env.restart_compute_service(host)
        self.down.discard(host)
        self.env.api.put_service(self._service_id(host), {"forced_down": False})

    def kill(self, host: str) -> None:
        """``host``'s compute process dies here, on the thread running its code
        (one-thread cloud): that thread is frozen for good, its RPC server
        gone; its guests run on. Never returns (the caller is that thread)."""
        compute = self.compute(host)
        self.crashed.append(host)
        self.down.add(host)
        mine = {id(compute.rpcserver), id(getattr(compute, "rpcserver_alt", None))}
        for *_, listener in self.one_thread.listeners:
            if id(listener.server) in mine:
                listener.stop()
        self.one_thread.crash(host)

    def restart_dead(self, host: str) -> None:
        """A new compute service on the dead ``host``'s fake host: a new
        ComputeManager whose ``init_host`` and start-up periodic run here; then
        the casts that waited for it are delivered. The dead one is not
        stopped (it cannot run its shutdown)."""
        compute = self.compute(host)
        compute.stop = lambda: None
        self.env.restart_compute_service(host)
        self.crashed.remove(host)
        self.down.discard(host)
        self.one_thread.revive(host)

    def _service_id(self, host: str):
        return self.env.api.get_services(host=host, binary="nova-compute")[0]["id"]

    def evacuate(self, name: str, host: str | None) -> dict:
        """Evacuate ``name`` from its down host (to ``host``, or where the scheduler
        picks); wait until the migration is 'done' and the server ACTIVE again.

        Microversion 2.94: the server keeps its state (ACTIVE); from 2.95 an
        evacuated server is left SHUTOFF.
        """
        from harness.oracles import views
        api = self.env.api
        body = {"evacuate": {"host": host} if host else {}}
        latest, api.microversion = api.microversion, "2.94"
        try:
            self.post_action(name, body, f"evacuate {name}")
        finally:
            api.microversion = latest
        seen = {}

        def settled():
            migration = seen["m"] = views.latest_migration(self, name)
            if migration is not None and migration.status in ("failed", "error"):
                raise ScenarioFailed(f"evacuate {name}: the migration is {migration.status}")
            return migration is not None and migration.status == "done"
        self._poll(settled, lambda: f"evacuate {name}: the migration is "
                                    f"{getattr(seen.get('m'), 'status', None)}, not 'done'")
        return self.wait_for(name, ("ACTIVE",), f"evacuate {name}")

    def confirm(self, name: str) -> dict:
        self.post_action(name, {"confirmResize": None}, f"confirm {name}")
        return self.wait_for(name, ("ACTIVE",), f"confirm {name}")

    def revert(self, name: str) -> dict:
        self.post_action(name, {"revertResize": None}, f"revert {name}")
        return self.wait_for(name, ("ACTIVE",), f"revert {name}")

    def auto_confirm(self, name: str) -> dict:
        """Let ``_poll_unconfirmed_resizes`` confirm it, as if the window had passed.

        The periodic runs on the host the server now lives on (the
        destination), as production's would. Only its query for overdue
        migrations sees the clock moved past ``resize_confirm_window``
        (freezegun): moving every clock would also make the source compute
        look dead (its service heartbeat an hour old) and refuse the confirm.
        """
        from nova import context, objects
        host = self.server(name)["OS-EXT-SRV-ATTR:host"]
        # the database read under the remotable query (a yield point): a
        # periodic injected at that point runs before, at the real time
        query = objects.MigrationList._db_migration_get_unconfirmed_by_dest_compute
        with fixtures.MonkeyPatch(
                "nova.objects.MigrationList._db_migration_get_unconfirmed_by_dest_compute",
                _after_confirm_window(query)):
            poll = self.compute(host).manager._poll_unconfirmed_resizes
            if self.one_thread:  # as the periodic's own thread (a restart fault may kill it there)
                self.one_thread.as_thread_of(host, poll, context.get_admin_context())
            else:
                poll(context.get_admin_context())
        return self.wait_for(name, ("ACTIVE",), f"auto-confirm {name}")

    def delete(self, name: str) -> None:
        from nova.tests.functional.api import client
        try:
            self.env.api.delete_server(self.servers[name])
        except client.OpenStackApiException as exc:
            raise ScenarioFailed(f"delete {name}: API refused: {str(exc)[:200]}") from None
        self._poll(lambda: self.gone(name),
                   lambda: f"delete {name}: still there after {self.timeout:.0f}s")

    def gone(self, name: str) -> bool:
        """Whether the API has forgotten the server (404)."""
        from nova.tests.functional.api import client
        try:
            self.server(name)
        except client.OpenStackApiNotFoundException:
            return True
        return False

    def periodic(self, host: str, ctx=None) -> None:
        """Run ``update_available_resource`` on ``host`` as the periodic would
        (nothing while its compute is down).

        Its context is quiet: the harness's periodics are not Nova's path and
        add no yield points, in whatever thread Nova runs them.
        """
        from nova import context

        from harness.explore.tracer import quiet_context
        if host in self.down:  # a stopped compute runs no periodic
            return
        with quiet_context(ctx or context.get_admin_context()) as ctx:
            self.compute(host).manager.update_available_resource(ctx)


#: No heartbeat is that old in any run. A forked child starts with its
#: parent's heartbeats, as old as the parent's wait; measured with Nova's
#: default 60 s, the API took such a compute for down and deleted a server
#: locally, leaving its domain running (crossing, under load).
SERVICE_DOWN_TIME = 7 * 24 * 3600


def _after_confirm_window(query):
    """``query`` run with the clock just past the confirm window (freezegun)."""
    import datetime

    import freezegun

    def overdue(*args, **kwargs):
        later = (datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
                 + datetime.timedelta(seconds=RESIZE_CONFIRM_WINDOW + 60))
        # the database layer keeps real time: only the query's "now" moves
        with freezegun.freeze_time(later, tick=True,
                                   ignore=["sqlalchemy", "oslo_db", "sqlite3", "eventlet"]):
            return query(*args, **kwargs)
    return staticmethod(overdue)


def deadline_guard(seconds: float, where):
    """A fixture that fails the run with :class:`RunTimeout` after ``seconds``.

    ``where`` is a callable returning a short text of where the run is.
    """
    def handler(*_):
        raise RunTimeout(f"no progress within {seconds:.0f}s; stuck at {where()}")
    return _AlarmFixture(seconds, handler)


class _AlarmFixture(fixtures.Fixture):
    """SIGALRM-based bound on a whole run (main thread only)."""

    def __init__(self, seconds, handler):
        super().__init__()
        self.seconds, self.handler = seconds, handler

    def _setUp(self):
        import signal
        old = signal.signal(signal.SIGALRM, self.handler)
        self.addCleanup(signal.signal, signal.SIGALRM, old)
        signal.setitimer(signal.ITIMER_REAL, self.seconds)
        self.addCleanup(signal.setitimer, signal.ITIMER_REAL, 0)
