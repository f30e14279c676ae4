"""A long run's JSON report is kept up to date while it runs."""
import json
import os
import types

from harness.front import report


def _result(n):
    item = types.SimpleNamespace(id=f"s/p#{n}/source/revert")
    return types.SimpleNamespace(item=item, to_json=lambda: {"id": item.id, "verdict": "pass"})


def test_a_partial_report_holds_what_has_arrived_and_says_it_is_partial(tmp_path):
    path = tmp_path / "r.json"
    partial = report.PartialReport(str(path), {"scenario": "s"}, planned=3, every=0)
    partial.add(_result(1))
    partial.add(_result(2))
    data = json.loads(path.read_text())
    assert data["meta"] == {"scenario": "s", "partial": True, "items_done": 2, "items_planned": 3}
    assert [i["id"] for i in data["items"]] == ["s/p#1/source/revert", "s/p#2/source/revert"]
    assert os.listdir(tmp_path) == ["r.json"]  # written whole, no temp file left


def test_it_is_rewritten_at_most_every_so_often(tmp_path):
    path = tmp_path / "r.json"
    partial = report.PartialReport(str(path), {}, planned=2, every=3600)
    partial.add(_result(1))
    assert not path.exists()
    partial.write()
    assert json.loads(path.read_text())["meta"]["items_done"] == 1


def test_a_forked_child_never_writes_its_parents_report(tmp_path):
    path = tmp_path / "r.json"
    partial = report.PartialReport(str(path), {}, planned=1, every=0)
    partial.pid = -1  # as in a child forked after it was made
    partial.add(_result(1))
    assert not path.exists()


def test_a_proposal_names_a_point_set_it_holds_whole():
    sets = {"gap": ["dest:a#1", "source:b#1"], "other": ["dest:z#1"]}
    assert report._named(("dest:x#1", "dest:a#1", "source:b#1"), sets) == ["dest:x#1", "@gap"]
    assert report._named(("dest:a#1", "dest:x#1"), sets) == ["dest:a#1", "dest:x#1"]  # not whole


def test_reports_get_the_mode_a_plain_open_would_give(tmp_path):
    """The atomic temp file is 0600; CI log servers publish reports by their mode."""
    from harness import files
    path = tmp_path / "r.json"
    report.atomic_write(str(path), "{}")
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~files.UMASK
    old = os.umask(0o022)
    try:
        assert files._umask() == 0o022
    finally:
        os.umask(old)


def test_progress_says_items_per_second_and_time_left():
    import io
    now = [100.0]
    out = io.StringIO()
    progress = report.Progress(40, stream=out, clock=lambda: now[0])
    for _ in range(10):
        now[0] += 2.0  # one item every 2 s: 30 left take 60 s
        progress.update(types.SimpleNamespace(verdict="pass"))
    assert out.getvalue().strip().endswith("10/40 pass=10 0.50/s, 0:01:00 left")


def test_the_table_fits_100_columns_and_keeps_every_mark():
    from harness.execute.item import Item
    long = "dest:_TrackingEndpointWrapper.__getattr__._tracked>InstanceActionEvent.event_start#1"
    points = ["source:ComputeManager._resize_instance>Instance.save#1", long * 2]
    targets, endings = ["source", "dest", "both"], ["confirm", "revert", "auto-confirm"]
    verdicts = iter(["pass", "pass", "fail", "pass", "known", "error", "pass", "pass", "pass"] * 2)
    results = [types.SimpleNamespace(item=Item("s", p, t, e), verdict=next(verdicts))
               for p in points for t in targets for e in endings]
    text = report.table(results, points, targets, endings)
    assert max(len(line) for line in text.splitlines()) <= 100, text
    row = text.splitlines()[3]
    assert row.startswith("  2. dest:_Tracking") and "\u2026" in row and row.split()[-3:] == [
        "".join(report.MARK[r.verdict] for r in results[9 + 3 * k:12 + 3 * k]) for k in range(3)]
    assert "totals: pass" in text and "c confirm, r revert, a auto-confirm" in text
