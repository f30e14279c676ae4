"""Load and validate declarative scenarios (``scenarios/*.toml``).

A scenario names the cloud's CPU sets, the hosts' topologies, the flavors
and the steps: servers booted (possibly pinned to a host), then the moves,
all of one operation (:mod:`harness.operations`): resizes or cold
migrations that leave them in VERIFY_RESIZE together, one live migration,
one unshelve (after a shelve-offload) or one evacuation (of a fenced,
forced-down host). The last move is the *subject*,
the one whose yield points are swept; earlier moves are in flight around
it. The ending (confirm, revert, auto-confirm; a live migration's success
or rollback; an unshelve's one; an evacuation's source restart) is chosen per run; then every server is
deleted. Everything is checked when the file loads, so a bad scenario
fails with one line naming the file and field, before Nova is imported.
"""
from __future__ import annotations

import dataclasses
import os
import tomllib

from fake_driver.pci import PciCloud, flavor_aliases, pci_cloud_from_dict
from fake_driver.topology import (PAGE_SIZES_KB, CpuSets, HostTopology,
                                  cpu_sets_from_dict, host_from_dict, parse_cpu_set)
from harness.errors import InvalidScenario, UnknownChoice
from harness.operations import BY_STEP, OPERATIONS
import scenarios

#: every ending of every operation, in the operations' order
ENDINGS = tuple(e for op in OPERATIONS.values() for e in op.endings)
SCENARIO_DIR = os.path.dirname(os.path.abspath(scenarios.__file__))
_TOP_KEYS = {"name", "description", "endings", "cloud", "hosts", "flavors", "steps"}
_FLAVOR_KEYS = {"vcpus", "memory_mb", "disk_gb", "extra_specs"}
_OPS = {"boot": {"server", "flavor", "host"}, "resize": {"server", "flavor"},
        "migrate": {"server", "host"}, "live-migrate": {"server", "host"},
        "unshelve": {"server", "host"}, "evacuate": {"server", "host"}}
_MOVES = tuple(BY_STEP)


@dataclasses.dataclass(frozen=True)
class Flavor:
    name: str
    vcpus: int
    memory_mb: int
    disk_gb: int
    extra_specs: dict

    @property
    def policy(self) -> str:
        return self.extra_specs.get("hw:cpu_policy", "shared")

    @property
    def dedicated_vcpus(self) -> int:
        """How many vCPUs get a pCPU of their own (all, none, or the mixed mask's)."""
        if self.policy == "dedicated":
            return self.vcpus
        if self.policy == "mixed":
            mask = self.extra_specs.get("hw:cpu_dedicated_mask", "")
            if mask.startswith("^"):
                return self.vcpus - len(parse_cpu_set(mask[1:], "hw:cpu_dedicated_mask"))
            return len(parse_cpu_set(mask, "hw:cpu_dedicated_mask"))
        return 0

    @property
    def shared_vcpus(self) -> int:
        return self.vcpus - self.dedicated_vcpus

    @property
    def dedicated(self) -> bool:
        return self.dedicated_vcpus > 0

    @property
    def page_size_kb(self) -> int | None:
        """Explicit hugepage size in KiB, or None for small pages."""
        raw = self.extra_specs.get("hw:mem_page_size")
        return int(raw) if raw and str(raw).isdigit() and int(raw) > 4 else None

    @property
    def numa(self) -> bool:
        """Whether Nova gives the guest a NUMA topology (then it is held per host cell)."""
        return self.dedicated or any(k in self.extra_specs for k in (
            "hw:mem_page_size", "hw:numa_nodes"))

    @property
    def numa_nodes(self) -> int:
        return int(self.extra_specs.get("hw:numa_nodes", 1))


@dataclasses.dataclass(frozen=True)
class Step:
    op: str
    server: str
    flavor: str              # for migrate: the server's flavor (unchanged)
    host: str | None = None  # boot/migrate: where to (None: the scheduler picks)

    @property
    def is_move(self) -> bool:
        return self.op in _MOVES


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    path: str
    cpu_sets: CpuSets
    hosts: tuple[HostTopology, ...]
    flavors: dict
    steps: tuple[Step, ...]
    endings: tuple[str, ...]
    allow_same_host: bool = False
    pci: PciCloud | None = None  # None: no host declares PCI devices

    def host(self, name: str) -> HostTopology:
        return next(h for h in self.hosts if h.name == name)

    @property
    def boots(self) -> tuple:
        return tuple(s for s in self.steps if s.op == "boot")

    @property
    def moves(self) -> tuple:
        return tuple(s for s in self.steps if s.is_move)

    @property
    def subject(self) -> Step:
        """The move whose yield points are swept (the last one)."""
        return self.moves[-1]

    @property
    def operation(self):
        """What the moves are (:mod:`harness.operations`): its window, ledger and endings."""
        return BY_STEP[self.subject.op]

    @property
    def same_host(self) -> bool:
        """Only one host: every move stays on it (one role, one target)."""
        return len(self.hosts) == 1


#: what the scenario directory holds besides scenarios: what is known about them
NOT_SCENARIOS = ("known-findings.toml", "root-causes.toml", "cause-samples.toml")


def available(directory: str = SCENARIO_DIR) -> dict:
    """Scenario name -> file path, for every ``*.toml`` in ``directory``."""
    try:
        files = sorted(f for f in os.listdir(directory)
                       if f.endswith(".toml") and f not in NOT_SCENARIOS)
    except FileNotFoundError:
        raise InvalidScenario(f"scenario directory {directory} does not exist") from None
    return {f[:-5]: os.path.join(directory, f) for f in files}


def load(name_or_path: str, directory: str = SCENARIO_DIR) -> Scenario:
    """Load a scenario by name (from ``directory``) or by path to a .toml file."""
    if name_or_path.endswith(".toml") or os.sep in name_or_path:
        path = name_or_path
        if not os.path.isfile(path):
            raise InvalidScenario(f"scenario file {path} does not exist")
    else:
        known = available(directory)
        if name_or_path not in known:
            raise UnknownChoice("scenario", name_or_path, known)
        path = known[name_or_path]
    try:
        with open(path, "rb") as fh:
            raw = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidScenario(f"{path}: not valid TOML: {exc}") from None
    return from_dict(raw, path)


def _where(path, *parts):
    return f"{os.path.basename(path)}: " + ".".join(str(p) for p in parts)


def _flavor(name, raw, path) -> Flavor:
    where = _where(path, "flavors", name)
    if not isinstance(raw, dict):
        raise InvalidScenario(f"{where}: expected a table")
    unknown = set(raw) - _FLAVOR_KEYS
    if unknown:
        raise InvalidScenario(f"{where}: unknown key(s) {sorted(unknown)}; valid: {sorted(_FLAVOR_KEYS)}")
    values = {}
    for key, default in (("vcpus", None), ("memory_mb", None), ("disk_gb", 1)):
        value = raw.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InvalidScenario(f"{where}: {key!r} must be a positive integer, got {value!r}")
        values[key] = value
    specs = raw.get("extra_specs", {})
    if not isinstance(specs, dict) or not all(isinstance(v, str) for v in specs.values()):
        raise InvalidScenario(f"{where}: extra_specs must be a table of strings")
    flavor = Flavor(name, values["vcpus"], values["memory_mb"], values["disk_gb"], dict(specs))
    size = specs.get("hw:mem_page_size")
    if size is not None and flavor.page_size_kb is None and size not in ("small", "4"):
        raise InvalidScenario(
            f"{where}: hw:mem_page_size must be a size in KiB ({sorted(PAGE_SIZES_KB.values())}) or 'small'")
    if flavor.page_size_kb and (flavor.memory_mb * 1024) % flavor.page_size_kb:
        raise InvalidScenario(f"{where}: memory_mb {flavor.memory_mb} is not a multiple of the page size")
    return flavor


def fits(flavor: Flavor, host: HostTopology, cpu_sets: CpuSets) -> str | None:
    """Why ``flavor`` cannot fit on ``host`` (None if it may fit).

    A necessary condition only (Nova makes the real decision): each guest
    cell needs its share of vCPUs and memory within one host cell.
    """
    nodes = flavor.numa_nodes
    if nodes > len(host.cells):
        return f"{nodes} NUMA nodes but {len(host.cells)} cells"
    vcpus, mem_kb = -(-flavor.dedicated_vcpus // nodes), flavor.memory_mb * 1024 // nodes
    for cell in host.cells:
        if len(cpu_sets.dedicated & set(cell.cpus)) < vcpus:
            continue
        if flavor.shared_vcpus and not cpu_sets.shared & set(cell.cpus):
            continue
        size = flavor.page_size_kb
        if size and cell.hugepages.get(size, 0) * size < mem_kb:
            continue
        if not size and cell.memory_mb * 1024 < mem_kb:
            continue
        return None
    need = f"{vcpus} dedicated pCPUs" if flavor.dedicated else "shared pCPUs"
    if flavor.dedicated and flavor.shared_vcpus:
        need += " and shared pCPUs"
    pages = f", {mem_kb // flavor.page_size_kb} x {flavor.page_size_kb} KiB pages" if flavor.page_size_kb else ""
    return f"no cell has {need}{pages} for one guest cell"


def _policy(flavor: Flavor, where: str) -> None:
    if flavor.policy not in ("shared", "dedicated", "mixed"):
        raise InvalidScenario(f"{where}: hw:cpu_policy must be shared, dedicated or mixed")
    if flavor.policy == "mixed":
        mask = flavor.extra_specs.get("hw:cpu_dedicated_mask")
        if not mask:
            raise InvalidScenario(f"{where}: hw:cpu_policy=mixed needs hw:cpu_dedicated_mask")
        cpus = parse_cpu_set(mask.lstrip("^"), f"{where}: hw:cpu_dedicated_mask")
        if max(cpus) >= flavor.vcpus or not 0 < flavor.dedicated_vcpus < flavor.vcpus:
            raise InvalidScenario(f"{where}: hw:cpu_dedicated_mask {mask!r} must leave both "
                                  f"dedicated and shared vCPUs among {flavor.vcpus}")


def _steps(raw_steps, flavors, names, path) -> tuple:
    """Validate the steps: boots first, then moves, each server moved at most once."""
    steps, flavor_of, moved = [], {}, set()
    for i, step in enumerate(raw_steps):
        where = _where(path, f"steps[{i}]")
        op = step.get("op") if isinstance(step, dict) else None
        if op not in _OPS:
            raise UnknownChoice(f"op in {where}", op, _OPS)
        unknown = set(step) - _OPS[op] - {"op"}
        missing = {k for k in _OPS[op] if k != "host"} - set(step)
        if unknown or missing:
            raise InvalidScenario(f"{where}: {op} takes {sorted(_OPS[op])}; "
                                  f"unknown {sorted(unknown)}, missing {sorted(missing)}")
        if "flavor" in step and step["flavor"] not in flavors:
            raise UnknownChoice(f"flavor in {where}", step["flavor"], flavors)
        if step.get("host") is not None and step["host"] not in names:
            raise UnknownChoice(f"host in {where}", step["host"], names)
        server = step["server"]
        if op == "boot":
            if server in flavor_of:
                raise InvalidScenario(f"{where}: server {server!r} is booted twice")
            if moved:
                raise InvalidScenario(f"{where}: boot steps come before the moves")
            flavor_of[server] = step["flavor"]
        elif server not in flavor_of:
            raise UnknownChoice(f"server in {where}", server, flavor_of)
        elif server in moved:
            raise InvalidScenario(f"{where}: server {server!r} is moved twice (one move each)")
        else:
            moved.add(server)
        steps.append(Step(op, server, step.get("flavor", flavor_of[server]), step.get("host")))
    if not moved:
        raise InvalidScenario(f"{_where(path, 'steps')}: at least one boot then a move "
                              f"({', '.join(_MOVES)})")
    moves = [s for s in steps if s.is_move]
    kinds = {BY_STEP[s.op] for s in moves}
    if len(kinds) > 1:
        raise InvalidScenario(f"{_where(path, 'steps')}: the moves are of one operation, not "
                              + " and ".join(sorted(k.name for k in kinds)))
    why = BY_STEP[moves[-1].op].validate(moves, _where(path, "steps"), tuple(steps))
    if why:
        raise InvalidScenario(why)
    return tuple(steps)


def from_dict(raw: dict, path: str = "<scenario>") -> Scenario:
    base = os.path.basename(path)
    unknown = set(raw) - _TOP_KEYS
    if unknown:
        raise InvalidScenario(f"{base}: unknown key(s) {sorted(unknown)}; valid: {sorted(_TOP_KEYS)}")
    name = raw.get("name") or os.path.splitext(base)[0]
    hosts_raw = raw.get("hosts")
    if not isinstance(hosts_raw, list) or not hosts_raw:
        raise InvalidScenario(f"{base}: hosts: at least one [[hosts]] is needed")
    hosts = tuple(host_from_dict(h, f"{base}: hosts[{i}]") for i, h in enumerate(hosts_raw))
    names = [h.name for h in hosts]
    if len(set(names)) != len(names):
        raise InvalidScenario(f"{base}: hosts: duplicate host names {names}")
    cloud = dict(raw.get("cloud", {}))
    same_host = cloud.pop("allow_resize_to_same_host", False)
    if not isinstance(same_host, bool):
        raise InvalidScenario(f"{base}: cloud: allow_resize_to_same_host must be true or false")
    if len(hosts) == 1 and not same_host:
        raise InvalidScenario(f"{base}: hosts: a move needs two [[hosts]], or one with "
                              "cloud.allow_resize_to_same_host = true")
    pci = pci_cloud_from_dict(cloud.pop("pci", None), hosts, f"{base}: cloud.pci")
    cpu_sets = cpu_sets_from_dict(cloud, hosts, f"{base}: cloud")
    flavors_raw = raw.get("flavors")
    if not isinstance(flavors_raw, dict) or not flavors_raw:
        raise InvalidScenario(f"{base}: flavors: at least one [flavors.NAME] table is needed")
    flavors = {n: _flavor(n, f, path) for n, f in flavors_raw.items()}
    for flavor in flavors.values():
        _policy(flavor, _where(path, "flavors", flavor.name))
        for alias in flavor_aliases(flavor.extra_specs):
            if alias not in (pci.aliases if pci else {}):
                raise UnknownChoice(f"pci_passthrough:alias in {_where(path, 'flavors', flavor.name)}",
                                    alias, pci.aliases if pci else {})
        reasons = {h.name: fits(flavor, h, cpu_sets) for h in hosts}
        if all(reasons.values()):
            detail = "; ".join(f"{h}: {r}" for h, r in reasons.items())
            raise InvalidScenario(f"{_where(path, 'flavors', flavor.name)}: cannot fit any host ({detail})")
    steps = _steps(raw.get("steps", []), flavors, names, path)
    far = {"migrate": "a cold migration", "live-migrate": "a live migration",
           "evacuate": "an evacuation"}
    elsewhere = next((far[s.op] for s in steps if s.op in far), None)
    if len(hosts) == 1 and elsewhere:
        raise InvalidScenario(f"{base}: steps: {elsewhere} needs two [[hosts]]")
    own = BY_STEP[[s for s in steps if s.is_move][-1].op].endings
    endings = tuple(raw.get("endings", own))
    for ending in endings:
        if ending not in own:
            raise UnknownChoice(f"ending in {base}", ending, own)
    return Scenario(name, raw.get("description", ""), path, cpu_sets, hosts, flavors,
                    steps, endings, same_host, pci)
