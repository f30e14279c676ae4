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
from unittest import mock

from nova.compute import rpcapi as compute_rpcapi
from nova import context as nova_context
from nova import objects
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.functional.libvirt import base


# name: (cells, cores per cell, threads, memory KiB, per cell pages)
HOSTS = {
    'host-a': (2, 4, 1, 8388608, [
        [(4, 655360), (2048, 768)],
        [(4, 524288), (2048, 512), (1048576, 1)],
    ]),
    'host-b': (1, 4, 2, 8388608, [
        [(4, 1179648), (2048, 256), (1048576, 3)],
    ]),
}


class TestRevertGapDest(base.ServersTestBase):
    """Revert: a destination periodic between its dropping the claim (the
    migration 'reverted', the topology reverted) and the source's
    finish_revert_resize counts the leaving guest as its own, with the new
    flavor and the source's NUMA cells.

    instance.host still names the destination, so its periodic counts the
    guest as its own instance: the new flavor's vCPUs and memory, and --
    after revert_migration_context -- the source's NUMA topology, whose
    cells it pins where it has a cell of that id (host-a's pCPU numbers in
    host-b's cell: hard on two-cell destinations; counters only on a one-
    cell one). Nothing undoes it until the next periodic.

    The periodic runs on host-b (the dest) in a stub of
    ComputeAPI.finish_revert_resize, before host-b makes that call, which is
    when the state above holds.
    """

    microversion = 'latest'
    ADMIN_API = True

    def setUp(self):
        super().setUp()
        self.flags(cpu_dedicated_set='4,5,6,7',
                   cpu_shared_set='0,1,2,3',
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

    def test_finish_revert_resize_with_periodic_before_it(self):
        large = self._create_flavor(
            vcpu=2, memory_mb=2048, disk=1, ephemeral=0,
            extra_spec={'hw:mem_page_size': '1048576'})
        small = self._create_flavor(
            vcpu=2, memory_mb=1024, disk=1, ephemeral=0,
            extra_spec={'hw:mem_page_size': '2048'})
        vm1 = self._create_server(
            flavor_id=small, host='host-a', networks='none')
        self.assertEqual({
            'host-a': (0, {2048: 512}, 2, 1024,
                       {'DISK_GB': 1, 'MEMORY_MB': 1024, 'VCPU': 2}),
            'host-b': (0, {}, 0, 0, {}),
        }, self._usages())

        call = compute_rpcapi.ComputeAPI.finish_revert_resize

        def periodic_then_call(*args, **kwargs):
            self.computes['host-b'].manager.update_available_resource(
                self.ctxt)
            return call(*args, **kwargs)

        self.stub_out(
            'nova.compute.rpcapi.ComputeAPI.finish_revert_resize',
            periodic_then_call)
        with mock.patch(
            'nova.virt.libvirt.driver.LibvirtDriver'
            '.migrate_disk_and_power_off', return_value='{}',
        ):
            self.api.post_server_action(
                vm1['id'], {'resize': {'flavorRef': large}})
            vm1 = self._wait_for_state_change(vm1, 'VERIFY_RESIZE')
        self.assertEqual({
            'host-a': (0, {2048: 512}, 2, 1024,
                       {'DISK_GB': 1, 'MEMORY_MB': 1024, 'VCPU': 2}),
            'host-b': (0, {1048576: 2}, 2, 2048,
                       {'DISK_GB': 1, 'MEMORY_MB': 2048, 'VCPU': 2}),
        }, self._usages())
        self.api.post_server_action(vm1['id'], {'revertResize': None})
        vm1 = self._wait_for_state_change(vm1, 'ACTIVE')
        self._wait_for_instance_action_event(
            vm1, 'revertResize', 'compute_finish_revert_resize',
            'success')
        # FIXME(bug): this should be
        # 'host-b': (0, {}, 0, 0, {}),
        self.assertEqual({
            'host-a': (0, {2048: 512}, 2, 1024,
                       {'DISK_GB': 1, 'MEMORY_MB': 1024, 'VCPU': 2}),
            'host-b': (0, {2048: 512}, 2, 2048, {}),
        }, self._usages())

        self._run_periodics()
        self.assertEqual({
            'host-a': (0, {2048: 512}, 2, 1024,
                       {'DISK_GB': 1, 'MEMORY_MB': 1024, 'VCPU': 2}),
            'host-b': (0, {}, 0, 0, {}),
        }, self._usages())
