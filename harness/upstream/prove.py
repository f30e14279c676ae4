"""Proof of a Nova patch: the same campaign on the Nova under test and on a copy
with the patch applied, compared per root cause.

A Nova developer who writes a fix wants three answers: does the cause it
targets still bite anywhere (every interleaving the campaign sweeps, not one
hand-picked), did anything new start biting, and do the recreate test and
Nova's own tests for the area say the same. The patched copy lives in a
temporary directory put first on ``PYTHONPATH`` (the harness drives any
importable Nova); nothing of the Nova under test is touched.
"""
from __future__ import annotations

import collections
import dataclasses
import importlib.util
import json
import os
import shutil
import subprocess
import sys

import fixtures

from harness.errors import NovaUnusable, UsageError


def fixes(patch: str) -> list:
    """The root causes a patch says it fixes: its ``Fixes:`` lines before the diff
    (``git apply`` skips that text, as it skips a commit message)."""
    names = []
    with open(patch) as fh:
        for line in fh:
            if line.startswith(("diff ", "--- ")):
                break
            if line.startswith("Fixes:"):
                names += [n.strip() for n in line[len("Fixes:"):].split(",") if n.strip()]
    return names


def fix_for(directory: str, cause: str) -> str | None:
    """The patch in ``directory`` that fixes ``cause`` (``CAUSE.patch``, or one whose
    ``Fixes:`` names it), relative to ``directory``'s parent; None if none does."""
    if not os.path.isdir(directory):
        return None
    parent = os.path.basename(os.path.normpath(directory))
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if name.endswith(".patch") and (name == cause + ".patch" or cause in fixes(path)):
            return os.path.join(parent, name)
    return None


class PatchedNova(fixtures.Fixture):
    """A copy of the importable Nova package with ``patch`` applied (``git apply``:
    paths ``a/nova/...``, as ``git diff`` writes them in a Nova tree). ``root``
    holds ``nova/``: put it first on ``PYTHONPATH``."""

    def __init__(self, patch: str):
        super().__init__()
        self.patch = os.path.abspath(patch)

    def _setUp(self):
        if not os.path.isfile(self.patch):
            raise UsageError(f"patch {self.patch} does not exist")
        spec = importlib.util.find_spec("nova")
        if spec is None or not spec.origin:
            raise NovaUnusable("no importable nova to patch")
        package = os.path.dirname(os.path.abspath(spec.origin))
        self.root = self.useFixture(fixtures.TempDir()).path
        shutil.copytree(package, os.path.join(self.root, "nova"),
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        proc = subprocess.run(["git", "apply", "--whitespace=nowarn", self.patch],
                              cwd=self.root, capture_output=True, text=True)
        if proc.returncode:
            first = (proc.stderr.strip().splitlines() or ["git apply failed"])[0]
            raise UsageError(f"patch {os.path.basename(self.patch)} does not apply to the Nova "
                             f"at {package}: {first}")

    def setUp(self):
        """As Fixture's, but a usage error (a missing patch, one that does not apply) is
        raised as itself, for its one line, not wrapped with the cleanup's."""
        try:
            super().setUp()
        except fixtures.MultipleExceptions as exc:
            first = exc.args[0][1]
            raise first if isinstance(first, UsageError) else exc

    def env(self, base: dict | None = None) -> dict:
        env = dict(os.environ if base is None else base)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (self.root, env.get("PYTHONPATH")) if p)
        return env


@dataclasses.dataclass
class Side:
    """One campaign's outcome: per cause the items it bit in, and the failing items."""

    exit_code: int
    bit: dict          # cause -> [item ids]
    held: dict         # cause -> number of items where its condition held
    fails: list        # ids of items that failed or errored
    items: int


def campaign(scenario: str, args: list, json_path: str, log_path: str, env: dict,
             fixed: list = ()) -> Side:
    """``nova-chaos run SCENARIO ARGS --json JSON_PATH`` in a subprocess (its output to
    ``log_path``), read back as a :class:`Side`."""
    cmd = [sys.executable, "-m", "harness", "run", scenario, *args, "--json", json_path]
    for cause in fixed:
        cmd += ["--fixed", cause]
    with open(log_path, "w") as log:
        code = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
    if code not in (0, 1) or not os.path.isfile(json_path):
        raise UsageError(f"the campaign on {scenario} did not run (exit {code}); see {log_path}")
    with open(json_path) as fh:
        report = json.load(fh)
    bit, held = collections.defaultdict(list), collections.Counter()
    fails = []
    for item in report["items"]:
        for name in item.get("causes", {}).get("bit", []):
            bit[name].append(item["id"])
        held.update(item.get("causes", {}).get("held", []))
        if item["verdict"] in ("fail", "error"):
            fails.append(item["id"])
    return Side(code, dict(bit), dict(held), fails, len(report["items"]))


def table(before: Side, after: Side, fixed: list) -> list:
    """Lines per cause: items bit before and after (and where its condition held)."""
    names = sorted(set(before.bit) | set(after.bit) | set(fixed))
    width = max([len(n) for n in names] + [10])
    lines = [f"{'root cause':{width}}  before  after  (held after)"]
    for name in names:
        mark = "  <- fixed" if name in fixed else ""
        lines.append(f"{name:{width}}  {len(before.bit.get(name, [])):6}  "
                     f"{len(after.bit.get(name, [])):5}  ({after.held.get(name, 0)}){mark}")
    return lines


def unshown(befores: list, fixed: list) -> list:
    """The targeted causes no scenario's campaign saw bite before the patch, one line
    each: such a campaign cannot show them fixed. Judged over every scenario together,
    since a cause of one operation has no item in another's campaign."""
    return [f"{name} bit nowhere before the patch: this campaign cannot show it fixed"
            for name in fixed if not any(side.bit.get(name) for side in befores)]


def verdict(before: Side, after: Side, fixed: list) -> list:
    """What makes one scenario's proof fail, one line each (empty: proven there)."""
    out = []
    for name in fixed:
        if after.bit.get(name):
            out.append(f"{name} still bites after the patch in {len(after.bit[name])} items, "
                       f"e.g. {after.bit[name][0]}")
    failed_before = set(before.fails)
    new = [i for i in after.fails if i not in failed_before]
    if new:
        out.append(f"{len(new)} items fail after the patch and not before, e.g. {new[0]}")
    # a known cause biting more often is a new defect a reviewed name would hide: the
    # patch unmasked it, or widened its window (counts, not ids: a call the patch adds
    # may renumber the points after it)
    for name in sorted(set(after.bit) - set(fixed)):
        was, now = set(before.bit.get(name, [])), after.bit[name]
        if len(now) > len(was):
            gained = [i for i in now if i not in was] or now
            out.append(f"{name} bites in more items after the patch ({len(was)} -> "
                       f"{len(now)}), e.g. {gained[0]}")
    return out
