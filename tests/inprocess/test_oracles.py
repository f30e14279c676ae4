"""Every check fires: corrupt the state it watches and it must say so, readably.

Clean runs pass on both backends (threads in a subprocess: Nova picks its
backend at import time).
"""
import logging

import pytest

from harness import scenario
from harness.execute import runner
from tests.conftest import cli

SCENARIO = "pinned-hugepages"


def run_with(corrupt, at="verify-resize", ending="confirm"):
    import fixtures

    class Corrupt(fixtures.Fixture, runner.Hooks):
        def before_check(self, run, name):
            if name == at:
                corrupt(run)
    return runner.run(scenario.load(SCENARIO), ending, instrument=lambda run: Corrupt())


def findings(result, check, checkpoint="verify-resize"):
    return [f for cp, f in result.findings if f.check == check and cp == checkpoint]


# CI: revert on this backend (test_threads_backend_passes runs all three on Nova 34's own)
@pytest.mark.parametrize("ending", [pytest.param("confirm", marks=pytest.mark.breadth), "revert",
                                    pytest.param("auto-confirm", marks=pytest.mark.breadth)])
def test_clean_nova_passes_every_phase(nova, ending):
    result = runner.run(scenario.load(SCENARIO), ending)
    assert result.passed, result.report()
    assert [cp.name for cp in result.checkpoints] == [
        "after-boot", "verify-resize", f"after-{ending}", "after-delete"]


def test_threads_backend_passes():
    proc = cli("baseline", SCENARIO, "--backend", "threads")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    assert "(threads backend: --backend)" in proc.stderr
    # confirm and auto-confirm meet Nova's own untracked-after-move cause (known, exit 0)
    verdicts = {e: v for e in ("confirm", "revert", "auto-confirm")
                for v in ("PASS", "KNOWN") if f"{SCENARIO} / {e}: {v} in " in proc.stdout}
    assert verdicts == {"confirm": "KNOWN", "revert": "PASS", "auto-confirm": "KNOWN"}, proc.stdout


def _rogue_domain(run):
    """Leak hugepages on host-b: a domain the resource tracker knows nothing of."""
    host = run.cloud.libvirt_host("host-b")
    host.defineXML("""<domain><name>rogue</name><uuid>rogue</uuid><memory>65536</memory>
      <vcpu>1</vcpu><os><type>hvm</type></os><devices/>
      <cpu><numa><cell id="0" cpus="0" memory="65536" unit="KiB"/></numa></cpu>
      <numatune><memnode cellid="0" nodeset="0"/></numatune>
      <memoryBacking><hugepages><page size="2048" unit="KiB" nodeset="0"/></hugepages></memoryBacking>
      </domain>""").create()


def test_truth_check_catches_pages_leaked_on_the_host(nova):
    result = run_with(_rogue_domain)
    lines = [f.line() for f in findings(result, "truth")]
    assert "[truth] host-b cell 0 hugepages held on the host beyond the RT: expected {}, seen {2048: 32}" in lines
    assert any("host-b hugepages held by running domains" in ln for ln in lines)


def test_delete_phase_is_checked_too(nova):
    """After the delete everything must be back to zero, ground truth included."""
    result = run_with(_rogue_domain, at="after-delete")
    lines = [f.line() for f in findings(result, "truth", "after-delete")]
    assert "[truth] host-b hugepages held by running domains: expected {}, seen {2048: 32}" in lines


def _rogue_small_page_guest(run):
    """A NUMA guest on small pages, floating, that no resource tracker knows of."""
    run.cloud.libvirt_host("host-b").defineXML("""<domain><name>rogue</name><uuid>rogue</uuid>
      <memory>262144</memory><vcpu>1</vcpu><os><type>hvm</type></os><devices/>
      <cputune><vcpupin vcpu="0" cpuset="0-1"/></cputune>
      <cpu><numa><cell id="0" cpus="0" memory="262144" unit="KiB"/></numa></cpu>
      <numatune><memnode cellid="0" nodeset="0"/></numatune></domain>""").create()


def test_truth_check_catches_small_pages_memory_and_floating_vcpus_beyond_the_rt(nova):
    """Small pages, guest memory and floating vCPUs are held per cell like hugepages:
    a double free of any of them (Nova clamps it to zero, silently) shows here."""
    result = run_with(_rogue_small_page_guest)
    lines = [f.line() for f in findings(result, "truth")]
    for what, n in (("small pages", 65536), ("guest memory MiB", 256), ("floating vCPUs", 1)):
        assert f"[truth] host-b cell 0 {what} held on the host beyond the RT: expected 0, seen {n}" \
            in lines, lines


def _drop_cell_memory(run):
    """The source's tracker forgets the guest memory and small pages of one cell."""
    from nova import context, objects
    ctx = context.get_admin_context()
    cn = objects.ComputeNode.get_by_host_and_nodename(ctx, "host-a", "host-a")
    topo = objects.NUMATopology.obj_from_db_obj(cn.numa_topology)
    cell = next(c for c in topo.cells if c.memory_usage)
    run.dropped_cell = cell.id
    cell.memory_usage = 0
    cn.numa_topology = topo._to_json()
    cn.save()


def test_rt_check_catches_guest_memory_lost_from_a_cell(nova):
    result = run_with(_drop_cell_memory)
    lines = [f.line() for f in findings(result, "rt")]
    assert any(ln.startswith("[rt] host-a cell ") and "guest memory MiB (vs domains): expected 1024, seen 0"
               in ln for ln in lines), lines


def _shift_a_pin(run):
    """Move one of the destination's pins to a free pCPU of the same cell: the count holds."""
    from nova import context, objects
    ctx = context.get_admin_context()
    cn = objects.ComputeNode.get_by_host_and_nodename(ctx, "host-b", "host-b")
    topo = objects.NUMATopology.obj_from_db_obj(cn.numa_topology)
    cell = next(c for c in topo.cells if c.pinned_cpus)
    free = sorted(cell.pcpuset - cell.pinned_cpus)[0]
    run.shifted = (cell.id, min(cell.pinned_cpus), free)
    cell.pinned_cpus = (cell.pinned_cpus - {min(cell.pinned_cpus)}) | {free}
    cn.numa_topology = topo._to_json()
    cn.save()


def test_rt_cells_are_checked_against_the_numa_topologies_nova_chose(nova):
    """Exact per cell from the guests' topologies: right count, wrong pCPU is caught,
    and this check needs no settled domains (it runs mid-move too)."""
    captured = {}

    def shift(run):
        _shift_a_pin(run)
        captured.update(cell=run.shifted)
    result = run_with(shift)
    cell, old, new = captured["cell"]
    lines = [f.line() for f in findings(result, "rt")]
    assert not any("host-b pinned pCPUs" in ln for ln in lines)  # the total is right
    assert any(ln.startswith(f"[rt] host-b cell {cell} pinned cpus (vs NUMA topologies)")
               and str(new) in ln for ln in lines), lines


def _drop_pinned_cpu(run):
    """Remove one pinned pCPU from the source's saved NUMA topology."""
    from nova import context, objects
    ctx = context.get_admin_context()
    cn = objects.ComputeNode.get_by_host_and_nodename(ctx, "host-a", "host-a")
    topo = objects.NUMATopology.obj_from_db_obj(cn.numa_topology)
    cell = next(c for c in topo.cells if c.pinned_cpus)
    run.dropped = (cell.id, min(cell.pinned_cpus))
    cell.pinned_cpus = cell.pinned_cpus - {min(cell.pinned_cpus)}
    cn.numa_topology = topo._to_json()
    cn.save()


def test_rt_check_catches_a_dropped_pin_and_convergence_sees_the_heal(nova):
    result = run_with(_drop_pinned_cpu)
    lines = [f.line() for f in findings(result, "rt")]
    assert "[rt] host-a pinned pCPUs: expected 2, seen 1" in lines
    assert any("pinned cpus (vs domains)" in ln for ln in lines)
    healed = [f.line() for f in findings(result, "convergence")]
    assert any("periodic changed rt host-a cells" in ln for ln in healed), healed


def _drop_migration_allocation(run):
    from harness.oracles import views
    consumer = views.consumers(run.cloud)["vm1 migration"]
    run.cloud.env.placement.delete(f"/allocations/{consumer}")


def test_placement_check_catches_a_lost_allocation(nova):
    result = run_with(_drop_migration_allocation)
    lines = [f.line() for f in findings(result, "placement")]
    assert any(ln.startswith("[placement] allocations of vm1 migration: expected {'host-a'")
               and ln.endswith("seen {}") for ln in lines), lines
    assert any("host-a provider usages" in ln for ln in lines)


def _error_state(run):
    run.cloud.env.api.post_server_action(run.cloud.servers["vm1"],
                                         {"os-resetState": {"state": "error"}})


def test_liveness_check_catches_error_state(nova):
    result = run_with(_error_state)
    assert "[liveness] server vm1 status: expected 'VERIFY_RESIZE', seen 'ERROR'" in [
        f.line() for f in findings(result, "liveness")]


def _log_periodic_error(run):
    logging.getLogger("nova.compute.manager").error(
        "Error updating resources for node host-a.: CPUUnpinningInvalid")


def test_log_check_catches_an_error_the_periodic_swallowed(nova):
    result = run_with(_log_periodic_error)
    lines = [f.line() for f in findings(result, "logs")]
    assert any("CPUUnpinningInvalid" in ln for ln in lines)
    assert any("Error updating resources for node host-a" in ln for ln in lines)
