"""The harness's own periodics are not Nova's path: they add no yield points.

Nova 34 runs ``update_available_resource`` per node in a pool thread, out of
reach of the tracer's per-thread suspension; before the periodic's request
was marked quiet, a checkpoint's convergence periodics added 29 points to
this trace and shifted the occurrence numbers of later ones, so ``baseline``
printed ids the campaign does not use.
"""
from harness import scenario
from harness.execute import discovery, runner
from harness.explore import injection


def test_checkpoint_periodics_leave_the_trace_as_discovery_recorded_it(nova):
    scen = scenario.load("pinned-hugepages")
    discovered = discovery.discover(scen, "lifecycle", endings=["revert"])["revert"]
    run = runner.Run(scen, "revert", converge_every=True)  # a periodic at every checkpoint
    result = run.execute(lambda r: injection.Injector(r, None, "lifecycle"))
    assert result.passed, result.report()
    assert [p.id for p in run.tracer.points] == discovered
