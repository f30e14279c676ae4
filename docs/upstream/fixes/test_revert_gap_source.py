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

from unittest import mock

from nova.compute import rpcapi
from nova import context as nova_context
from nova import objects
from nova.tests.functional.libvirt import base


class TestRevertResizeSourcePeriodicRace(base.ServersTestBase):
    """Regression test for the revert-resize sibling of bug 1944759 (fixed).

    On revert, the destination's revert_resize saves the migration as
    'reverted' (drop_move_claim_at_dest) and then casts
    finish_revert_resize to the source, which saves instance.host back.
    In between, the source's update_available_resource sees the instance
    neither as its own (its host is still the destination) nor as an
    in-progress migration ('reverted' is not one), and drops its pinned
    CPUs. finish_revert_resize does not claim them back, so the guest runs
    on pCPUs the source's tracker shows as free until the next periodic.

    The source's periodic runs in the cast, after the destination has
    released the resource tracker lock: the window's first point.
    """

    microversion = 'latest'
    ADMIN_API = True

    def setUp(self):
        super().setUp()
        self.flags(cpu_dedicated_set='0-3', cpu_shared_set='4-7',
                   group='compute')
        self.flags(vcpu_pin_set=None)
        self.start_compute(hostname='src')
        self.start_compute(hostname='dest')
        self.ctxt = nova_context.get_admin_context()

    def _pinned_cpus(self, hostname):
        node = objects.ComputeNode.get_by_nodename(self.ctxt, hostname)
        topology = objects.NUMATopology.obj_from_db_obj(node.numa_topology)
        return sum(len(cell.pinned_cpus) for cell in topology.cells)

    def test_revert_resize_with_source_periodic_before_finish(self):
        flavor = self._create_flavor(
            vcpu=2, extra_spec={'hw:cpu_policy': 'dedicated'})
        new_flavor = self._create_flavor(
            vcpu=2, extra_spec={'hw:cpu_policy': 'dedicated'})
        server = self._create_server(flavor_id=flavor, host='src',
                                     networks='none')
        self.assertEqual(2, self._pinned_cpus('src'))

        with mock.patch(
            'nova.virt.libvirt.driver.LibvirtDriver'
            '.migrate_disk_and_power_off', return_value='{}',
        ):
            self.api.post_server_action(
                server['id'], {'resize': {'flavorRef': new_flavor}})
            server = self._wait_for_state_change(server, 'VERIFY_RESIZE')
        self.assertEqual('dest', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(2, self._pinned_cpus('src'))
        self.assertEqual(2, self._pinned_cpus('dest'))

        cast = rpcapi.ComputeAPI.finish_revert_resize

        def source_periodic_then_cast(*args, **kwargs):
            self.computes['src'].manager.update_available_resource(
                self.ctxt)
            return cast(*args, **kwargs)

        self.stub_out(
            'nova.compute.rpcapi.ComputeAPI.finish_revert_resize',
            source_periodic_then_cast)
        self.api.post_server_action(server['id'], {'revertResize': None})
        server = self._wait_for_state_change(server, 'ACTIVE')
        self._wait_for_migration_status(server, ['reverted'])
        self._wait_for_instance_action_event(
            server, 'revertResize', 'compute_finish_revert_resize',
            'success')
        self.assertEqual('src', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(0, self._pinned_cpus('dest'))
        self.assertEqual(2, self._pinned_cpus('src'))

        # the next periodic heals it
        self._run_periodics()
        self.assertEqual(2, self._pinned_cpus('src'))
        self.assertEqual(0, self._pinned_cpus('dest'))
