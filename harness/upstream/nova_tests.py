"""Nova's own tests, run against the Nova under test wherever it is installed.

A fix is proven by the harness's campaign *and* by the tests Nova already has
for the area (``test_numa_servers``, ``test_resource_tracker``...). Nova's
functional tests look for ``api-paste.ini`` under its source tree; an
installed wheel keeps it under the prefix. Run as
``python -m harness.upstream.nova_tests MODULE...``, this module points
Nova's config fixture at the file this Nova has, changes nothing else, and
runs the tests with testtools, as Nova's stestr does.
"""
from __future__ import annotations

import os
import subprocess
import sys

#: Nova's tests for the code the root causes live in (issue 32's list)
AREA = (
    "nova.tests.functional.libvirt.test_numa_servers",
    "nova.tests.functional.libvirt.test_numa_live_migration",
    "nova.tests.functional.regressions.test_bug_1879878",
    "nova.tests.unit.compute.test_resource_tracker",
)


def point_config_at_paste() -> None:
    """Nova's config fixture falls back to this Nova's api-paste.ini (once per process)."""
    from nova.tests.fixtures import conf

    from harness.upstream.prelude import api_paste_config
    paste = api_paste_config()
    if paste is None or getattr(conf.ConfFixture, "_nova_chaos_paste", None):
        return
    set_up = conf.ConfFixture.setUp

    def setUp(self):
        set_up(self)
        if not os.path.isfile(self.conf.wsgi.api_paste_config):
            self.conf.set_default("api_paste_config", paste, group="wsgi")

    conf.ConfFixture.setUp = setUp
    conf.ConfFixture._nova_chaos_paste = paste


def _selected(suite, pattern):
    import re
    import unittest
    out = unittest.TestSuite()
    for test in _flat(suite):
        if pattern is None or re.search(pattern, test.id()):
            out.addTest(test)
    return out


def _flat(suite):
    for test in suite:
        if hasattr(test, "__iter__"):
            yield from _flat(test)
        else:
            yield test


def main(argv=None) -> int:
    """``python -m harness.upstream.nova_tests [-k REGEX] MODULE...``: Nova's tests, run
    as Nova runs them (testtools; stestr is its parallel front end)."""
    import argparse
    import unittest

    import testtools
    ap = argparse.ArgumentParser(prog="python -m harness.upstream.nova_tests")
    ap.add_argument("-k", dest="select", help="only test ids matching this regex")
    ap.add_argument("modules", nargs="+", help="dotted test modules, classes or tests, or "
                    "test files (a recreate test kept outside Nova's tree)")
    args = ap.parse_args(argv)
    point_config_at_paste()
    names = []
    for name in args.modules:  # a file: its directory on the path, its module by name
        if name.endswith(".py") and os.path.isfile(name):
            sys.path.insert(0, os.path.dirname(os.path.abspath(name)))
            name = os.path.basename(name)[:-3]
        names.append(name)
    suite = _selected(unittest.defaultTestLoader.loadTestsFromNames(names), args.select)
    result = testtools.TextTestResult(sys.stdout)
    result.startTestRun()
    try:
        suite.run(result)
    finally:
        result.stopTestRun()
    print(f"{result.testsRun} tests, {len(result.failures)} failures, "
          f"{len(result.errors)} errors, {len(result.skip_reasons)} skip reasons")
    return 0 if result.wasSuccessful() and result.testsRun else 1


def command(modules, select: str | None = None) -> list:
    """The command line that runs ``modules`` (dotted names) of the importable Nova."""
    return ([sys.executable, "-m", "harness.upstream.nova_tests"]
            + (["-k", select] if select else []) + list(modules))


def run(modules, select: str | None = None, env: dict | None = None, cwd: str | None = None,
        timeout: float = 1800) -> tuple:
    """Run them; ``(returncode, last summary line)``. A run past ``timeout`` is killed and
    said as stuck, with the last test it started (measured: Nova's area tests stalled
    once inside test_numa_live_migration, on an unpatched Nova)."""
    try:
        proc = subprocess.run(command(modules, select), capture_output=True, text=True,
                              env=env, cwd=cwd, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (
            exc.stdout or "")
        started = [line for line in out.splitlines() if line.startswith("nova.")]
        return 124, (f"stuck: no result in {timeout:g} s"
                     + (f"; last test started: {started[-1][:160]}" if started else ""))
    if proc.returncode < 0:  # killed from outside: its last line is a progress dot
        return proc.returncode, f"killed by signal {-proc.returncode}: no result"
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    return proc.returncode, (lines[-1] if lines else proc.stderr.strip()[-300:])


def bad(summary: str) -> int:
    """Failures plus errors in :func:`main`'s summary line (a run that did not say: many)."""
    import re
    m = re.match(r"(\d+) tests, (\d+) failures, (\d+) errors", summary)
    return int(m.group(2)) + int(m.group(3)) if m else 10 ** 6


if __name__ == "__main__":
    sys.exit(main())
