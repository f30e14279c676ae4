"""Run tests/inprocess (which import Nova) in a plain pytest subprocess under xdist."""
import glob
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT


INPROCESS = sorted(os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "tests", "inprocess",
                                                                       "test_*.py")))


@pytest.mark.parametrize("module", INPROCESS)
def test_inprocess_tests_pass_in_a_subprocess(request, module):
    """One subprocess per module, so that xdist spreads them."""
    if not hasattr(request.config, "workerinput"):
        pytest.skip("not under xdist: tests/inprocess run directly in this session")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "-q",
         "-W", "ignore", f"tests/inprocess/{module}"],
        cwd=ROOT, capture_output=True, text=True, timeout=1200,
        env=dict(os.environ, PYTHONWARNINGS="ignore"))
    summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else "no output"
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert " passed" in summary and "failed" not in summary, summary
