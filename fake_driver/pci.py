"""Declarative PCI devices of a host, and the cloud's PCI config (pure data).

A host declares PFs (each with its VFs) and plain PCI devices per NUMA
cell; every device gets a stable address (bus ``0x81 + numa_node``, the
next free slot in declaration order; a PF at function 0, its VFs at
functions 1-7 of the same slot, as Nova's fake renders them) unless the
declaration gives one. The cloud declares the ``[pci] alias`` entries
flavors name, whether PCI is tracked in placement and, optionally,
``[pci] device_spec`` (by default every declared vendor/product pair),
both also per host (``[cloud.pci.hosts.NAME]``).
Validated eagerly, one line naming host and field.
"""
from __future__ import annotations

import dataclasses
import json
import re

from harness.errors import InvalidTopology

#: the bus of cell N's devices is FIRST_BUS + N (Nova's fake uses 0x81)
FIRST_BUS = 0x81
#: a PF's VFs are functions 1-7 of its own slot
MAX_VFS = 7
MAX_SLOT = 0x1f
#: declared kind -> Nova's PciDeviceType
DEVICE_TYPES = {"PF": "type-PF", "VF": "type-VF", "PCI": "type-PCI"}
NUMA_POLICIES = ("required", "legacy", "preferred", "socket")

_HEX4 = re.compile(r"^[0-9a-fA-F]{4}$")
_ADDRESS = re.compile(r"^(?:(?P<domain>[0-9a-fA-F]{4}):)?(?P<bus>[0-9a-fA-F]{2}):"
                      r"(?P<slot>[0-9a-fA-F]{2})\.(?P<function>[0-7])$")
_DEVICE_KEYS = {"type", "numa_node", "vendor_id", "product_id", "vfs", "vf_product_id",
                "count", "address"}
_ALIAS_KEYS = {"vendor_id", "product_id", "device_type", "numa_policy", "live_migratable"}
_CLOUD_KEYS = {"alias", "in_placement", "device_spec", "hosts"}
_HOST_KEYS = {"device_spec", "report_in_placement"}
_SPEC_KEYS = {"vendor_id", "product_id"}


@dataclasses.dataclass(frozen=True)
class PciDevice:
    """One PCI function of a host: a PF, one of its VFs, or a plain device."""

    address: str  # "0000:81:00.0", Nova's PciDevice.address
    kind: str     # PF, VF or PCI
    vendor_id: str
    product_id: str
    numa_node: int
    parent: str | None = None  # a VF's PF address

    @property
    def bus_slot_function(self) -> tuple:
        return split_address(self.address)

    @property
    def name(self) -> str:
        """libvirt's node device name, ``pci_0000_81_00_1``."""
        return "pci_" + re.sub(r"[:.]", "_", self.address)


def address(bus: int, slot: int, function: int) -> str:
    return f"0000:{bus:02x}:{slot:02x}.{function:x}"


def split_address(addr: str) -> tuple:
    """``"0000:81:00.1"`` -> ``(0x81, 0, 1)``."""
    _, bus, rest = addr.split(":")
    slot, function = rest.split(".")
    return int(bus, 16), int(slot, 16), int(function, 16)


def _hex4(raw: dict, key: str, where: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not _HEX4.match(value):
        raise InvalidTopology(f"{where}: {key!r} must be 4 hex digits such as '8086', got {value!r}")
    return value.lower()


def _count(raw: dict, key: str, where: str, default: int, lo: int, hi: int) -> int:
    value = raw.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise InvalidTopology(f"{where}: {key!r} must be an integer {lo}-{hi}, got {value!r}")
    return value


def _parse_address(value, where: str) -> tuple:
    match = _ADDRESS.match(value) if isinstance(value, str) else None
    if not match or (match["domain"] or "0000") != "0000":
        raise InvalidTopology(f"{where}: 'address' must be 'BB:SS.F' on PCI domain 0000, got {value!r}")
    slot = int(match["slot"], 16)
    if slot > MAX_SLOT or match["function"] != "0":
        raise InvalidTopology(f"{where}: 'address' {value!r} must be function 0 of a slot "
                              f"00-{MAX_SLOT:02x} (VFs take functions 1-{MAX_VFS})")
    return int(match["bus"], 16), slot


def devices_from_list(raw, ncells: int, where: str) -> tuple[PciDevice, ...]:
    """The devices a host's ``[[hosts.pci]]`` entries declare, with their addresses.

    Keys: ``type`` (``PF`` or ``PCI``; VFs come with their PF), ``numa_node``
    (a cell of the host), ``vendor_id``, ``product_id``, ``vfs`` (0-7, a
    PF's) and ``vf_product_id``, ``count`` (identical devices, default 1),
    ``address`` (``BB:SS.F`` of the first; the next ones in the next slots).
    """
    if not isinstance(raw, list):
        raise InvalidTopology(f"{where}: 'pci' must be a list of [[hosts.pci]] tables")
    entries = []
    for i, entry in enumerate(raw):
        at = f"{where}: pci[{i}]"
        if not isinstance(entry, dict):
            raise InvalidTopology(f"{at}: expected a table, got {entry!r}")
        unknown = set(entry) - _DEVICE_KEYS
        if unknown:
            raise InvalidTopology(f"{at}: unknown key(s) {sorted(unknown)}; valid: {sorted(_DEVICE_KEYS)}")
        kind = entry.get("type")
        if kind == "VF":
            raise InvalidTopology(f"{at}: a VF has no declaration of its own: give its PF 'vfs' "
                                  "and 'vf_product_id'")
        if kind not in ("PF", "PCI"):
            raise InvalidTopology(f"{at}: 'type' must be 'PF' or 'PCI', got {kind!r}")
        node = entry.get("numa_node")
        if not isinstance(node, int) or isinstance(node, bool) or not 0 <= node < ncells:
            raise InvalidTopology(f"{at}: 'numa_node' must be a cell of the host (0-{ncells - 1}), "
                                  f"got {node!r}")
        vendor, product = _hex4(entry, "vendor_id", at), _hex4(entry, "product_id", at)
        vfs = _count(entry, "vfs", at, 0, 0, MAX_VFS)
        if kind == "PCI" and ("vfs" in entry or "vf_product_id" in entry):
            raise InvalidTopology(f"{at}: a plain PCI device has no VFs (declare a PF)")
        if bool(vfs) != ("vf_product_id" in entry):
            raise InvalidTopology(f"{at}: 'vfs' and 'vf_product_id' go together")
        vf_product = _hex4(entry, "vf_product_id", at) if vfs else None
        count = _count(entry, "count", at, 1, 1, MAX_SLOT + 1)
        first = _parse_address(entry["address"], at) if "address" in entry else None
        entries.append((at, kind, node, vendor, product, vfs, vf_product, count, first))
    taken = {}  # (bus, slot) -> where
    for at, *_, count, first in entries:
        if first is None:
            continue
        bus, slot = first
        for n in range(count):
            if slot + n > MAX_SLOT:
                raise InvalidTopology(f"{at}: {count} devices from slot {slot:02x} pass slot {MAX_SLOT:02x}")
            if (bus, slot + n) in taken:
                raise InvalidTopology(f"{at}: duplicate address {address(bus, slot + n, 0)} "
                                      f"(also {taken[(bus, slot + n)]})")
            taken[(bus, slot + n)] = at
    devices = []
    for at, kind, node, vendor, product, vfs, vf_product, count, first in entries:
        for n in range(count):
            if first is not None:
                bus, slot = first[0], first[1] + n
            else:
                bus = FIRST_BUS + node
                slot = next((s for s in range(MAX_SLOT + 1) if (bus, s) not in taken), None)
                if slot is None:
                    raise InvalidTopology(f"{at}: no free slot left on bus {bus:02x} (cell {node})")
                taken[(bus, slot)] = at
            pf = address(bus, slot, 0)
            devices.append(PciDevice(pf, kind, vendor, product, node))
            devices.extend(PciDevice(address(bus, slot, f), "VF", vendor, vf_product, node, pf)
                           for f in range(1, vfs + 1))
    return tuple(sorted(devices, key=lambda d: d.address))


@dataclasses.dataclass(frozen=True)
class PciCloud:
    """The ``[pci]`` config: flavors' aliases, PCI in placement, device_spec;
    ``per_host``: a host's own ``[pci] device_spec`` and ``report_in_placement``
    where its ``[cloud.pci.hosts.NAME]`` table gives them."""

    aliases: dict  # name -> {"vendor_id", "product_id", "device_type", ["numa_policy"]}
    in_placement: bool = False
    device_spec: tuple = ()  # JSON strings, one per vendor/product pair
    per_host: dict = dataclasses.field(default_factory=dict)  # host -> {option: value}

    def alias_options(self) -> list:
        """``[pci] alias``: one JSON string per alias."""
        return [json.dumps(dict(alias, name=name)) for name, alias in sorted(self.aliases.items())]


def pci_cloud_from_dict(raw, hosts, where: str = "cloud.pci") -> PciCloud | None:
    """The ``[cloud.pci]`` table, checked against the hosts' devices; None if no
    host declares one and the table is absent (the cloud is as without PCI)."""
    declared = [d for h in hosts for d in h.pci]
    if raw is None:
        if not declared:
            return None
        raw = {}
    if not isinstance(raw, dict):
        raise InvalidTopology(f"{where}: expected a table")
    unknown = set(raw) - _CLOUD_KEYS
    if unknown:
        raise InvalidTopology(f"{where}: unknown key(s) {sorted(unknown)}; valid: {sorted(_CLOUD_KEYS)}")
    in_placement = raw.get("in_placement", False)
    if not isinstance(in_placement, bool):
        raise InvalidTopology(f"{where}: 'in_placement' must be true or false")
    aliases_raw = raw.get("alias", {})
    if not isinstance(aliases_raw, dict):
        raise InvalidTopology(f"{where}: 'alias' must be a table of [cloud.pci.alias.NAME] tables")
    aliases = {}
    for name, alias in aliases_raw.items():
        at = f"{where}.alias.{name}"
        if not isinstance(alias, dict):
            raise InvalidTopology(f"{at}: expected a table")
        unknown = set(alias) - _ALIAS_KEYS
        if unknown:
            raise InvalidTopology(f"{at}: unknown key(s) {sorted(unknown)}; valid: {sorted(_ALIAS_KEYS)}")
        kind = alias.get("device_type")
        if kind not in DEVICE_TYPES:
            raise InvalidTopology(f"{at}: 'device_type' must be one of {sorted(DEVICE_TYPES)}, got {kind!r}")
        out = {"vendor_id": _hex4(alias, "vendor_id", at), "product_id": _hex4(alias, "product_id", at),
               "device_type": DEVICE_TYPES[kind]}
        if "numa_policy" in alias:
            if alias["numa_policy"] not in NUMA_POLICIES:
                raise InvalidTopology(f"{at}: 'numa_policy' must be one of {list(NUMA_POLICIES)}, "
                                      f"got {alias['numa_policy']!r}")
            out["numa_policy"] = alias["numa_policy"]
        if "live_migratable" in alias:
            if not isinstance(alias["live_migratable"], bool):
                raise InvalidTopology(f"{at}: 'live_migratable' must be true or false")
            out["live_migratable"] = "yes" if alias["live_migratable"] else "no"
        if not any((d.kind, d.vendor_id, d.product_id) == (kind, out["vendor_id"], out["product_id"])
                   for d in declared):
            raise InvalidTopology(f"{at}: no host declares a {kind} {out['vendor_id']}:{out['product_id']}")
        aliases[name] = out
    default = (_listed(raw["device_spec"], declared, where) if "device_spec" in raw
               else {(d.vendor_id, d.product_id) for d in declared})
    own_raw = raw.get("hosts", {})
    if not isinstance(own_raw, dict) or set(own_raw) - {h.name for h in hosts}:
        raise InvalidTopology(f"{where}: 'hosts' must be a table of [cloud.pci.hosts.NAME] tables, "
                              f"NAME one of {sorted(h.name for h in hosts)}")
    listed, per_host = set(), {}
    for host in hosts:
        own, at = own_raw.get(host.name, {}), f"{where}.hosts.{host.name}"
        if not isinstance(own, dict) or set(own) - _HOST_KEYS:
            raise InvalidTopology(f"{at}: expected a table of {sorted(_HOST_KEYS)}")
        pairs = _listed(own["device_spec"], host.pci, at) if "device_spec" in own else default
        report = own.get("report_in_placement", in_placement)
        if not isinstance(report, bool):
            raise InvalidTopology(f"{at}: 'report_in_placement' must be true or false")
        if report:
            _pf_or_vfs(host, pairs, at if own else where,
                       "" if "device_spec" in own or "device_spec" in raw else "; list device_spec")
        if own:
            per_host[host.name] = {"device_spec": pairs, "report_in_placement": report}
        listed |= pairs
    for name, alias in aliases.items():
        if (alias["vendor_id"], alias["product_id"]) not in listed:
            raise InvalidTopology(f"{where}.alias.{name}: device_spec leaves out "
                                  f"{alias['vendor_id']}:{alias['product_id']}")
    migratable = {(a["vendor_id"], a["product_id"]) for a in aliases.values()
                  if a.get("live_migratable") == "yes"}
    per_host = {h: dict(o, device_spec=_json(o["device_spec"], migratable))
                for h, o in per_host.items()}
    return PciCloud(aliases, in_placement, tuple(_json(default, migratable)), per_host)


def _json(pairs, migratable=frozenset()) -> list:
    """``[pci] device_spec``: one JSON string per (vendor, product) pair; a pair a
    ``live_migratable`` alias names is tagged so (Nova wants it on both sides)."""
    return [json.dumps({"vendor_id": v, "product_id": p,
                        **({"live_migratable": "yes"} if (v, p) in migratable else {})})
            for v, p in sorted(pairs)]


def _pf_or_vfs(host, pairs: set, where: str, hint: str) -> None:
    """Refuse a device_spec naming a PF and its VFs on a host that reports PCI in
    placement, as Nova would refuse its compute (PlacementPciDependentDeviceException)."""
    pair = {d.address: (d.vendor_id, d.product_id) for d in host.pci}
    both = next((d for d in host.pci if d.kind == "VF" and pair[d.address] in pairs
                 and pair[d.parent] in pairs), None)
    if both is not None:
        raise InvalidTopology(
            f"{where}: with in_placement Nova tracks a PF or its VFs, not both: device_spec "
            f"lists PF {':'.join(pair[both.parent])} and its VF {':'.join(pair[both.address])} "
            f"(host {host.name!r}){hint}")


def _listed(entries, declared, where: str) -> set:
    """The (vendor, product) pairs of a ``device_spec`` list, each a declared one."""
    if not isinstance(entries, list) or not entries:
        raise InvalidTopology(f"{where}: 'device_spec' must be a list of "
                              "{vendor_id, product_id} tables")
    pairs = set()
    for i, entry in enumerate(entries):
        at = f"{where}.device_spec[{i}]"
        if not isinstance(entry, dict) or set(entry) != _SPEC_KEYS:
            raise InvalidTopology(f"{at}: expected a table of exactly {sorted(_SPEC_KEYS)}")
        pair = _hex4(entry, "vendor_id", at), _hex4(entry, "product_id", at)
        if not any((d.vendor_id, d.product_id) == pair for d in declared):
            raise InvalidTopology(f"{at}: no device {pair[0]}:{pair[1]} is declared there")
        pairs.add(pair)
    return pairs


def flavor_aliases(extra_specs: dict) -> dict:
    """``pci_passthrough:alias`` (``"a:1,b:2"``) as name -> count; {} without it."""
    raw = extra_specs.get("pci_passthrough:alias")
    if not raw:
        return {}
    out = {}
    for part in raw.split(","):
        name, _, count = part.strip().partition(":")
        out[name.strip()] = int(count) if count.strip().isdigit() else 1
    return out
