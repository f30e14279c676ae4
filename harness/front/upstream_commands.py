"""``nova-chaos export`` and ``nova-chaos report``: an item as Nova's own regression
test, and as an upstream bug text (harness.upstream)."""
from __future__ import annotations

import os

from harness.front import console
from harness.front.console import EXIT_OK


def _prepare(item_id: str, args):
    """Validate the item, run it (judged, with detail) counting its trigger."""
    from harness import scenario
    from harness.cloud import nova_support
    from harness.execute import campaign, discovery
    from harness.execute.item import Item
    from harness.explore import faults
    from harness.oracles import known
    from harness.upstream import export, trigger
    item = Item.parse(item_id)
    scen = scenario.load(item.scenario)
    known.load()
    campaign.validate(scen, {}, [item.target], [item.ending], [], item.mutation, item.window,
                      item.fault)
    export.refuse_unsupported(scen, item)
    console.load(args)
    faults.check_backend(item.fault, nova_support.current_backend())
    traces = discovery.discover(scen, item.window, endings=[item.ending])
    campaign.validate(scen, {item.ending: traces[item.ending]}, [item.target], [item.ending],
                      [item.point], item.mutation, item.window, item.fault)
    found, record = trigger.find(scen, item, traces)
    return item, scen, record, found


def cmd_export(args) -> int:
    from harness import files
    from harness.upstream import export
    item, scen, record, found = _prepare(args.id, args)
    out = export.build(item, scen, record, found)
    path = os.path.join(args.out, out.module_name + ".py")
    os.makedirs(args.out, exist_ok=True)
    files.atomic_write(path, out.text)
    print(f"wrote {path}: {out.test_id} (the harness: {record.verdict})", file=console.OUT)
    print(f"run it: cd {args.out} && python -m testtools.run {out.module_name}", file=console.OUT)
    return EXIT_OK


def cmd_report(args) -> int:
    from harness import files
    from harness.upstream import bugreport, export
    item, scen, record, found = _prepare(args.id, args)
    exported = export.build(item, scen, record, found)
    text = bugreport.render(item, scen, record, found, exported)
    if args.out:
        files.atomic_write(args.out, text)
        print(f"wrote {args.out}", file=console.OUT)
    else:
        print(text, file=console.OUT)
    return EXIT_OK
