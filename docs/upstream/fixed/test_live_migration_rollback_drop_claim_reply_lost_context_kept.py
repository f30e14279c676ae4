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

import oslo_messaging as messaging

from nova.compute import rpcapi as compute_rpcapi
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
#: migration statuses no longer in progress
DONE = ('confirmed', 'reverted', 'error', 'failed', 'completed', 'cancelled',
        'done')


class TestLiveMigrationRollbackDropClaimReplyLostContextKept(
        base.LibvirtMigrationMixin, base.ServersTestBase):
    """Live-migration rollback: the destination drops its claim but the reply
    of drop_move_claim_at_destination is lost; the source's rollback stops
    there and _do_live_migration puts the instance in ERROR on the source
    with its migration context for good.

    As live-migration-rollback-drop-claim-fails, with another effect: the
    destination ran drop_move_claim_at_destination to the end (its tracker
    no longer holds the guest), and only its reply was lost. The source's
    _rollback_live_migration raises MessagingTimeout before it clears the
    task state and drops the migration context; _do_live_migration puts the
    instance in ERROR on the source with its migration 'error'.

    ComputeAPI.drop_move_claim_at_destination from host-a runs on its
    callee, and its reply is lost: the caller times out (MessagingTimeout),
    in a stub of that call; Nova's own handling runs, then the server is
    deleted.
    """

    microversion = 'latest'
    ADMIN_API = True
    # a failure reaches the handlers it reaches in production only
    CAST_AS_CALL = False

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

    def _migrate_stub(self, domain, destination, params, flags):
        """The job fails: the guest stays on the source."""
        conn = self.computes['host-a'].driver._host.get_connection()
        conn.lookupByUUIDString(self.server['id']).fail_job()

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

    def test_drop_move_claim_at_destination_reply_lost_rollback(self):
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

        call = compute_rpcapi.ComputeAPI.drop_move_claim_at_destination

        def reply_lost(*args, **kwargs):
            try:
                call(*args, **kwargs)
            except Exception:
                pass  # its error went with its reply
            raise messaging.MessagingTimeout('reply lost')

        fail = mock.patch(
            'nova.compute.rpcapi.ComputeAPI.drop_move_claim_at_destination',
            reply_lost)
        self.server = vm1
        with fail:
            self.api.post_server_action(vm1['id'], {'os-migrateLive': {
                'host': 'host-b', 'block_migration': 'auto'}})
            vm1 = self._wait_for_server_parameter(
                vm1, {'OS-EXT-STS:task_state': None})
        self.assertEqual('ACTIVE', vm1['status'])
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
