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

from nova.scheduler import rpcapi as scheduler_rpcapi
from nova import context as nova_context
from nova import objects
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.functional.libvirt import base


# name: (cells, cores per cell, threads, memory KiB, per cell pages)
HOSTS = {
    'host-a': (2, 4, 1, 8388608, [
        [(4, 655360), (2048, 768)],
        [(4, 786432), (2048, 512)],
    ]),
    'host-b': (1, 5, 2, 8388608, [
        [(4, 1310720), (2048, 1536)],
    ]),
}


class TestEvacuateGapDest(base.ServersTestBase):
    """Evacuate: a destination periodic after the rebuild's save and before
    finish_evacuation skips the evacuation and loses the guest's pins and
    pages.

    After the rebuild's save the instance has no task state, so the
    destination's periodic neither counts the evacuation's migration as a
    move in progress nor (its host still the source's) the instance: the
    guest's pCPUs and pages are free in the destination's tracker while it
    runs on them, until the next periodic.

    The periodic runs on host-b (the dest) in a stub of
    SchedulerAPI.update_instance_info, before host-b makes that call, which
    is when the state above holds.
    """

    microversion = 'latest'
    ADMIN_API = True

    def setUp(self):
        super().setUp()
        self.flags(cpu_dedicated_set='2,3,4,5,6,7',
                   cpu_shared_set='0,1',
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

    def test_update_instance_info_with_periodic_before_it(self):
        pinned = self._create_flavor(
            vcpu=2, memory_mb=1024, disk=1, ephemeral=0,
            extra_spec={'hw:cpu_policy': 'dedicated',
                        'hw:mem_page_size': '2048'})
        vm1 = self._create_server(
            flavor_id=pinned, host='host-a', networks='none')
        vm2 = self._create_server(
            flavor_id=pinned, host='host-b', networks='none')
        self.assertEqual({
            'host-a': (2, {2048: 512}, 2, 1024,
                       {'DISK_GB': 1, 'MEMORY_MB': 1024, 'PCPU': 2}),
            'host-b': (2, {2048: 512}, 2, 1024,
                       {'DISK_GB': 1, 'MEMORY_MB': 1024, 'PCPU': 2}),
        }, self._usages())

        # host-a fails: its compute stops, its service is forced down
        self.computes['host-a'].stop()
        service = self.api.get_services(
            host='host-a', binary='nova-compute')[0]
        self.api.put_service(service['id'], {'forced_down': True})
        self.assertEqual({
            'host-a': (2, {2048: 512}, 2, 1024,
                       {'DISK_GB': 1, 'MEMORY_MB': 1024, 'PCPU': 2}),
            'host-b': (2, {2048: 512}, 2, 1024,
                       {'DISK_GB': 1, 'MEMORY_MB': 1024, 'PCPU': 2}),
        }, self._usages())

        call = scheduler_rpcapi.SchedulerAPI.update_instance_info

        def periodic_then_call(*args, **kwargs):
            self.computes['host-b'].manager.update_available_resource(
                self.ctxt)
            return call(*args, **kwargs)

        self.stub_out(
            'nova.scheduler.rpcapi.SchedulerAPI.update_instance_info',
            periodic_then_call)
        self.api.microversion = '2.94'  # the guest keeps running
        vm1 = self._evacuate_server(
            vm1, {'host': 'host-b'}, expected_host='host-b',
            expected_state='ACTIVE')
        # FIXME(bug): this should be
        # 'host-b': (4, {2048: 1024}, 4, 2048,
        #            {'DISK_GB': 2, 'MEMORY_MB': 2048, 'PCPU': 4}),
        self.assertEqual({
            'host-a': (2, {2048: 512}, 2, 1024,
                       {'DISK_GB': 1, 'MEMORY_MB': 1024, 'PCPU': 2}),
            'host-b': (2, {2048: 512}, 2, 1024,
                       {'DISK_GB': 2, 'MEMORY_MB': 2048, 'PCPU': 4}),
        }, self._usages())
        self.restart_compute_service('host-a')
        self.api.put_service(service['id'], {'forced_down': False})
        # FIXME(bug): this should be
        # 'host-b': (4, {2048: 1024}, 4, 2048,
        #            {'DISK_GB': 2, 'MEMORY_MB': 2048, 'PCPU': 4}),
        self.assertEqual({
            'host-a': (0, {}, 0, 0, {}),
            'host-b': (2, {2048: 512}, 2, 1024,
                       {'DISK_GB': 2, 'MEMORY_MB': 2048, 'PCPU': 4}),
        }, self._usages())

        self._run_periodics()
        self.assertEqual({
            'host-a': (0, {}, 0, 0, {}),
            'host-b': (4, {2048: 1024}, 4, 2048,
                       {'DISK_GB': 2, 'MEMORY_MB': 2048, 'PCPU': 4}),
        }, self._usages())
