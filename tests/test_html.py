"""The HTML report: the grid links each failing or known cell to its item's timeline.

Rendered from a JSON report alone; checked as a browser parses it (Debian's
Chromium, headless, where it is installed: .ci/run installs it).
"""
import json
import os
import shutil
import subprocess

import pytest

from harness.front import html, report
from harness.execute.item import Item
from harness.execute.record import Problem, Record
from tests.conftest import cli

POINTS = ["source:A.a>x.save#1", "source:A.a>y.call#1", "dest:B.b>z.save#1", "dest:B.b>w.cast#1"]
FAIL = "s/dest:B.b>z.save#1/dest/confirm"
KNOWN = "s/source:A.a>y.call#1/source/revert"


def _report() -> dict:
    records = [
        Record(Item.parse(FAIL), "fail", [Problem("finding", "hard finding at verify-resize: x")],
               fired=["host-b (now)"],
               findings=[{"checkpoint": "verify-resize", "check": "rt", "where": "host-b pinned pCPUs",
                          "expected": "4", "seen": "2", "class": "hard"}]),
        Record(Item.parse(KNOWN), "known", [], known=[
            "hard: [rt] host-a pinned pCPUs: expected 2, seen 0 (the reviewed reason)",
            "transient: [rt] host-a vcpus_used: expected 2, seen 0 (the reviewed reason)"],
            fired=["host-a (now)"]),
        Record(Item.parse("s/source:A.a>x.save#1/source/confirm"), "pass", []),
    ]
    meta = {"scenario": "s", "nova": "nova 34.0.0", "fault": "periodic", "mode": "fork",
            "campaigns": [{"scenario": "s", "window": "resize", "points": POINTS,
                           "targets": ["source", "dest"], "endings": ["confirm", "revert"]}]}
    return json.loads(report.to_json(records, meta)), records


def test_the_grid_links_failing_and_known_cells_to_their_timelines():
    data, _ = _report()
    page = html.render(data)
    for item_id in (FAIL, KNOWN):
        assert f"href='#{html.anchor(item_id)}'" in page
        assert f"id='{html.anchor(item_id)}'" in page
    assert page.count("<section class='item'") == 2  # a pass has no section
    assert "<td class='fail'" in page and "<td class='known'" in page and "<td class='pass'" in page
    assert page.count("the reviewed reason") == 1  # each reason once, not once per finding
    assert "host-b pinned pCPUs" in page


def test_junit_cases_name_their_place_in_the_html_report():
    _, records = _report()
    xml = report.to_junit(records, "nova-chaos.s", html="out/report.html")
    assert f"details: report.html#{html.anchor(FAIL)}" in xml
    assert f"details: report.html#{html.anchor(KNOWN)}" in xml


def test_html_of_a_missing_or_foreign_file_is_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"items": [{"id": 1}]}')
    for path, says in ((tmp_path / "nope.json", "does not exist"),
                       (bad, "is not a nova-chaos JSON report")):
        proc = cli("html", str(path))
        assert proc.returncode == 2 and says in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "bad.html").exists()


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium here (.ci/run installs Debian's)")
def test_a_browser_shows_the_grid_and_the_timeline(tmp_path):
    """What a person sees: the parsed DOM of the page in headless Chromium."""
    data, _ = _report()
    page = tmp_path / "report.html"
    page.write_text(html.render(data))
    dom = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
         f"file://{page}"], capture_output=True, text=True, timeout=120).stdout
    assert "<table class=\"grid\">" in dom, dom[:2000]
    assert f"<a href=\"#{html.anchor(FAIL)}\">F</a>" in dom
    # the timeline: the point's row, the fault in the target's lane
    at = dom.split("<tr class=\"at\">", 1)[1].split("</tr>", 1)[0]
    assert "B.b&gt;z.save#1" in at and "periodic: host-b (now)" in at
    assert os.path.getsize(page) < 20000
