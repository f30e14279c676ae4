"""Run locally what the CI definitions would run, on a small campaign, and check the merge.

    python3 bench/ci_dry_run.py                       # evacuate, both windows
    python3 bench/ci_dry_run.py --scope "unshelve"    # another scenario (run's arguments)

Reads ``.github/workflows/chaos-campaign.yml`` and ``.zuul.yaml`` (with its
playbooks), extracts the shell commands each would run per shard and for the
merge, checks that both give the same commands (the README's, with
``--shard K/N``), then runs them one after another in a temporary directory:
``python3 -m tox -e ENV -- ARGS`` becomes ENV's command from tox.ini with ARGS
for ``{posargs}`` (``nova-chaos`` is this checkout's ``python -m harness``) and
the full campaign (``run all --window resize --window lifecycle``) becomes
``--scope``. The unsharded run is the same command without ``--shard``; the
merged report must equal it item for item (``bench/compare_reports.py``).
Exits 1 on any difference.
"""
from __future__ import annotations

import argparse
import configparser
import glob
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GITHUB = os.path.join(ROOT, ".github", "workflows", "chaos-campaign.yml")
ZUUL = os.path.join(ROOT, ".zuul.yaml")
#: the full campaign in tox.ini's ``full`` env, which --scope replaces
FULL = "run all --window resize --window lifecycle"
#: what a CI definition runs only to set itself up (not part of the campaign)
SETUP = re.compile(r"^python3 -m pip install ")


def _yaml(path: str):
    import yaml
    with open(path) as fh:
        return yaml.safe_load(fh)


def github_commands(path: str = GITHUB) -> dict:
    """{"shards": [shard K's commands, K = 1..N], "merge": [...]} of the workflow."""
    jobs = _yaml(path)["jobs"]
    matrix = jobs["shard"]["strategy"]["matrix"]["shard"]

    def runs(job, k=None):
        out = []
        for step in job["steps"]:
            if "run" not in step:
                continue
            cmd = (step["run"].replace("${{ matrix.shard }}", str(k))
                   .replace("${{ strategy.job-total }}", str(len(matrix))))
            if "${{" in cmd:
                raise ValueError(f"{path}: an expression this dry run does not know: {cmd}")
            if not SETUP.match(cmd):
                out.append(cmd)
        return out
    return {"shards": [runs(jobs["shard"], k) for k in matrix], "merge": runs(jobs["merge"])}


def _render(text: str, variables: dict) -> str:
    def one(m):
        name = m.group(1)
        if name not in variables:
            raise ValueError(f"a Zuul variable this dry run does not know: {name}")
        return str(variables[name])
    return re.sub(r"\{\{\s*([\w.]+)\s*\}\}", one, text)


def _playbook_commands(path: str, variables: dict) -> list:
    out = []
    for play in _yaml(os.path.join(ROOT, path)):
        for task in play["tasks"]:
            cmd = task.get("ansible.builtin.shell") or task.get("shell")
            if cmd and not SETUP.match(cmd):
                out.append(_render(cmd, variables))
    return out


def zuul_commands(path: str = ZUUL) -> dict:
    """The same for Zuul: the template's shard jobs (in order) and the merge job that
    depends on every one of them."""
    config = _yaml(path)
    jobs = {c["job"]["name"]: c["job"] for c in config if "job" in c}
    template = next(c["project-template"] for c in config if "project-template" in c)
    listed = [j if isinstance(j, str) else next(iter(j))
              for j in template["periodic"]["jobs"]]

    def resolved(name):
        """A job with its parents' attributes under its own (vars merged)."""
        job = dict(jobs[name])
        parent = job.get("parent")
        if parent in jobs:
            base = resolved(parent)
            job = {**base, **job, "vars": {**base.get("vars", {}), **job.get("vars", {})}}
        return job
    shard_jobs = [n for n in listed if resolved(n).get("dependencies") is None]
    merges = [n for n in listed if resolved(n).get("dependencies") is not None]
    if len(merges) != 1 or sorted(resolved(merges[0])["dependencies"]) != sorted(shard_jobs):
        raise ValueError(f"{path}: one merge job must depend on every shard job {shard_jobs}")
    shards = []
    for name in shard_jobs:
        job = resolved(name)
        if job["vars"]["nova_chaos_shards"] != len(shard_jobs):
            raise ValueError(f"{path}: {name} says {job['vars']['nova_chaos_shards']} shards, "
                             f"the template runs {len(shard_jobs)}")
        shards.append(_playbook_commands(job["run"], job["vars"]))
    merge = resolved(merges[0])
    return {"shards": shards, "merge": _playbook_commands(merge["run"], merge.get("vars", {}))}


def readme_commands(n: int, path: str = os.path.join(ROOT, "README.md")) -> dict:
    """The README's shard and merge commands (its ``K`` and ``N`` filled in) for ``n`` shards."""
    with open(path) as fh:
        text = fh.read()
    section = text.split("## Shards across machines", 1)[1].split("\n## ", 1)[0]
    lines = [ln.split("  #")[0].strip() for ln in section.splitlines()]
    shard = next(ln for ln in lines if ln.startswith("python3 -m tox -e full -- --shard"))
    merge = next(ln for ln in lines if ln.startswith("python3 -m tox -e merge"))
    fill = (lambda line, k: re.sub(r"\bN\b", str(n), re.sub(r"\bK\b", str(k), line)))
    return {"shards": [[fill(shard, k)] for k in range(1, n + 1)], "merge": [merge]}


def local(cmd: str, scope: str, cwd: str) -> list:
    """``cmd`` as it runs here: a tox env's command from tox.ini, this checkout's harness,
    ``scope`` for the full campaign, shell globs expanded in ``cwd``."""
    words = shlex.split(cmd)
    if words[:4] != ["python3", "-m", "tox", "-e"] or words[5:6] != ["--"]:
        raise ValueError(f"not a 'python3 -m tox -e ENV -- ARGS' command: {cmd}")
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(os.path.join(ROOT, "tox.ini"))
    env = tox[f"testenv:{words[4]}"]["commands"].strip()
    env = env.replace(FULL, "run " + scope)
    args = []
    for word in shlex.split(env.replace("{posargs}", shlex.join(words[6:]))):
        args += sorted(glob.glob(os.path.join(cwd, word))) if "*" in word else [word]
    if args[0] != "nova-chaos":
        raise ValueError(f"tox env {words[4]} does not run nova-chaos: {env}")
    return [sys.executable, "-m", "harness", *args[1:]]


def run(argv: list, cwd: str) -> float:
    started = time.monotonic()
    env = dict(os.environ, PYTHONPATH=ROOT, PYTHONWARNINGS="ignore")
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=3600)
    wall = time.monotonic() - started
    if proc.returncode not in (0, 1):  # 1: findings (the merge judges them)
        sys.exit(f"ci_dry_run: {shlex.join(argv[2:])} exited {proc.returncode}: "
                 f"{(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    return wall


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scope", default="evacuate --window resize --window lifecycle",
                   help="nova-chaos run's campaign in place of the full one")
    args = p.parse_args(argv)
    github, zuul = github_commands(), zuul_commands()
    n = len(github["shards"])
    for name, commands in (("GitHub Actions", github), ("Zuul", zuul)):
        print(f"{name}:")
        for k, cmds in enumerate(commands["shards"], 1):
            print(f"  shard {k}/{n}: " + "; ".join(cmds))
        print("  merge: " + "; ".join(commands["merge"]))
    if github != zuul or github != readme_commands(n):
        print("the definitions' commands differ from each other or from the README's")
        return 1
    print("both definitions run the README's commands\n")
    tmp = tempfile.mkdtemp(prefix="nova-chaos-ci-dry-run-")
    sharded, unsharded = os.path.join(tmp, "sharded"), os.path.join(tmp, "unsharded")
    os.makedirs(sharded)
    os.makedirs(unsharded)
    for k, cmds in enumerate(github["shards"], 1):
        for cmd in cmds:
            argv = local(cmd, args.scope, sharded)
            print(f"shard {k}/{n}: {shlex.join(argv[2:])}: {run(argv, sharded):.0f} s")
    for cmd in github["merge"]:
        argv = local(cmd, args.scope, sharded)
        print(f"merge: {shlex.join(argv[2:])}: {run(argv, sharded):.0f} s")
    argv = local("python3 -m tox -e full -- ", args.scope, unsharded)
    print(f"unsharded: {shlex.join(argv[2:])}: {run(argv, unsharded):.0f} s")
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import compare_reports
    merged = compare_reports.load(os.path.join(sharded, "reports", "full.json"))
    alone = compare_reports.load(os.path.join(unsharded, "reports", "full.json"))
    differences = compare_reports.compare(merged, alone)
    for line in differences:
        print(line)
    html = os.path.join(sharded, "reports", "full.html")
    print(f"merged report: {len(merged)} items, unsharded: {len(alone)} items; "
          f"{len(differences)} difference(s); HTML {'written' if os.path.getsize(html) else 'empty'}"
          f" ({tmp})")
    return 1 if differences or not merged else 0


if __name__ == "__main__":
    sys.exit(main())
