"""Discovered traces are what a traced run records.

The harness's own periodics are not Nova's path: they add no yield points.

Nova 34 runs ``update_available_resource`` per node in a pool thread, out of
reach of the tracer's per-thread suspension; before the periodic's request
was marked quiet, a checkpoint's convergence periodics added 29 points to
this trace and shifted the occurrence numbers of later ones, so ``baseline``
printed ids the campaign does not use.

Discovery records the widest window once per ending; the card's window is
a slice of it, recounted: it must be what a tracer opened on the card's
window records.
"""
from harness import scenario
from harness.execute import campaign, discovery, runner
from harness.explore import injection


def test_checkpoint_periodics_leave_the_trace_as_discovery_recorded_it(nova):
    scen = scenario.load("pinned-hugepages")
    discovered = discovery.discover(scen, "lifecycle", endings=["revert"])["revert"]
    run = runner.Run(scen, "revert", converge_every=True)  # a periodic at every checkpoint
    result = run.execute(lambda r: injection.Injector(r, None, "lifecycle"))
    assert result.passed, result.report()
    assert [p.id for p in run.tracer.points] == discovered


def test_the_cards_window_sliced_from_discovery_is_what_its_own_tracer_records(nova):
    scen = scenario.load("pinned-hugepages")
    lifecycle = discovery.discover(scen, "lifecycle", endings=["confirm"])["confirm"]
    card = discovery.discover(scen, "resize", endings=["confirm"])["confirm"]
    run = runner.Run(scen, "confirm", converge_every=False)
    result = run.execute(lambda r: injection.Injector(r, None, "resize"))
    assert result.passed, result.report()
    assert [p.id for p in run.tracer.points] == card
    same = campaign.same_points(lifecycle, card)  # the card's calls, lifecycle id -> card id
    assert len(same) == len(card) < len(lifecycle)
    assert any(wide != narrow for wide, narrow in same.items())  # counters restart
