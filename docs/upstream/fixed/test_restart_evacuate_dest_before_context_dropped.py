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

import collections
import threading
import time
from unittest import mock

from oslo_concurrency import lockutils

from nova import context as nova_context
from nova import objects
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.functional.libvirt import base


# name: (cells, cores per cell, threads, memory KiB, per cell pages)
HOSTS = {
    'host-a': (2, 5, 1, 8388608, [
        [(4, 655360), (2048, 768)],
        [(4, 655360), (2048, 768)],
    ]),
    'host-b': (2, 3, 2, 16777216, [
        [(4, 1572864), (2048, 1024)],
        [(4, 1572864), (2048, 1024)],
    ]),
}
#: migration statuses no longer in progress
DONE = ('confirmed', 'reverted', 'error', 'failed', 'completed', 'cancelled',
        'done')
#: what the save the fault strikes at sets
SAVING = {'host': 'host-b', 'node': 'host-b'}


class TestRestartEvacuateDestBeforeContextDropped(base.ServersTestBase):
    """Evacuate: the destination dies in finish_evacuation after saving the
    host, before dropping the migration context; the context stays for ever.

    Nothing ever drops a migration context the restart interrupted: the
    server is done and accounted rightly, but keeps it.

    host-b dies there: the test restarts its compute service in a stub of
    Instance.save (the save that sets host host-b, node host-b), as that
    call returns to host-b, and the stub never returns, as in Nova's
    test_init_host; the state above holds then.
    """

    microversion = 'latest'
    ADMIN_API = True
    # the dying compute's call never returns: no caller may wait on it
    CAST_AS_CALL = False

    def setUp(self):
        super().setUp()
        self.flags(cpu_dedicated_set='1,2,3,4,6,7,8,9',
                   cpu_shared_set='0,5',
                   group='compute')
        self.flags(reserved_host_memory_mb=0)
        self.ctxt = nova_context.get_admin_context()
        for name, (cells, cores, threads, mem, pages) in HOSTS.items():
            info = fakelibvirt.HostInfo(
                cpu_nodes=cells, cpu_cores=cores, cpu_threads=threads,
                kB_mem=mem, mempages={
                    i: fakelibvirt.create_mempages(p)
                    for i, p in enumerate(pages)})
            self.start_compute(hostname=name, host_info=info)

    def _usages(self):
        """Per host: (pinned pCPUs, hugepages used by size, vCPUs used,
        memory used (MiB), placement usages), as its tracker saved them."""
        usages = {}
        for name in HOSTS:
            node = objects.ComputeNode.get_by_nodename(self.ctxt, name)
            cells = objects.NUMATopology.obj_from_db_obj(
                node.numa_topology).cells
            pages = collections.Counter()
            for page in (p for cell in cells for p in cell.mempages):
                pages[page.size_kb] += page.used if page.size_kb != 4 else 0
            placement = self._get_provider_usages(self.compute_rp_uuids[name])
            usages[name] = (
                sum(len(cell.pinned_cpus) for cell in cells), dict(+pages),
                node.vcpus_used, node.memory_mb_used,
                {k: v for k, v in placement.items() if v})
        return usages

    def _move_left(self, server):
        """(task_state, migration context set, latest migration still in
        progress): what a move abandoned half-way leaves."""
        inst = objects.Instance.get_by_uuid(
            self.ctxt, server['id'], expected_attrs=['migration_context'])
        migrations = objects.MigrationList.get_by_filters(
            self.ctxt, {'instance_uuid': server['id']})
        latest = max(migrations, key=lambda m: m.id)
        return (inst.task_state, inst.migration_context is not None,
                latest.status not in DONE)

    def test_dest_dies_after_saving_instance(self):
        pinned = self._create_flavor(
            vcpu=2, memory_mb=1024, disk=1, ephemeral=0,
            extra_spec={'hw:cpu_policy': 'dedicated',
                        'hw:mem_page_size': '2048'})
        spanning = self._create_flavor(
            vcpu=4, memory_mb=2048, disk=1, ephemeral=0,
            extra_spec={'hw:cpu_policy': 'dedicated',
                        'hw:mem_page_size': '2048',
                        'hw:numa_nodes': '2'})
        vm1 = self._create_server(
            flavor_id=spanning, host='host-a', networks='none')
        vm2 = self._create_server(
            flavor_id=pinned, host='host-b', networks='none')
        self.assertEqual({
            'host-a': (4, {2048: 1024}, 4, 2048,
                       {'DISK_GB': 1, 'MEMORY_MB': 2048, 'PCPU': 4}),
            'host-b': (2, {2048: 512}, 2, 1024,
                       {'DISK_GB': 1, 'MEMORY_MB': 1024, 'PCPU': 2}),
        }, self._usages())

        # host-a fails: its compute stops, its service is forced down
        self.computes['host-a'].stop()
        service = self.api.get_services(
            host='host-a', binary='nova-compute')[0]
        self.api.put_service(service['id'], {'forced_down': True})
        self.assertEqual({
            'host-a': (4, {2048: 1024}, 4, 2048,
                       {'DISK_GB': 1, 'MEMORY_MB': 2048, 'PCPU': 4}),
            'host-b': (2, {2048: 512}, 2, 1024,
                       {'DISK_GB': 1, 'MEMORY_MB': 1024, 'PCPU': 2}),
        }, self._usages())

        restarted = threading.Event()
        dying = threading.Event()
        save = objects.Instance.save

        def die_here(obj, *args, **kwargs):
            changed = obj.obj_what_changed()
            if dying.is_set() or not all(
                    f in changed and getattr(obj, f) == v
                    for f, v in SAVING.items()):
                return save(obj, *args, **kwargs)
            dying.set()
            save(obj, *args, **kwargs)
            # host-b dies after this save: a new compute service
            # starts on its host (without the dead one's locks); this
            # thread never returns
            self.stub_out('oslo_concurrency.lockutils._semaphores',
                          lockutils.Semaphores())
            self.stub_out('oslo_concurrency.lockutils._fair_locks',
                          lockutils.FairLocks())
            self.restart_compute_service('host-b')
            restarted.set()
            time.sleep(1000000)

        die = mock.patch.object(objects.Instance, 'save', die_here)
        self.api.microversion = '2.94'  # the guest keeps running
        with die:
            self.api.post_server_action(vm1['id'], {'evacuate': {
                'host': 'host-b'}})
            self.assertTrue(restarted.wait(60))
        # host-a comes back: its init_host cleans up evacuations
        self.restart_compute_service('host-a')
        self.api.put_service(service['id'], {'forced_down': False})
        self._wait_for_server_parameter(
            vm1, {'OS-EXT-STS:task_state': None})
        self.assertEqual((None, False, False), self._move_left(vm1))

        self._run_periodics()

        for server in (vm1, vm2):
            self.api.delete_server(server['id'])
            self._wait_for_instance_action_event(
                server, 'delete', 'compute_terminate_instance', 'success')
        self.assertEqual({
            'host-a': (0, {}, 0, 0, {}),
            'host-b': (0, {}, 0, 0, {}),
        }, self._usages())
