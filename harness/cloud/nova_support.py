"""Find, vet and load the Nova under test, after choosing the concurrency backend.

Nova decides eventlet vs native threads when it is first imported
(``OS_NOVA_DISABLE_EVENTLET_PATCHING``), so the backend must be chosen
before anything imports it, and cannot change within a process.
"""
from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
import re
import sys

from harness.errors import NovaUnusable, UnknownChoice

BACKENDS = ("eventlet", "threads")
_ENV = "OS_NOVA_DISABLE_EVENTLET_PATCHING"

#: modules of Nova's in-process test stack the harness drives
REQUIRED = (
    "nova.tests.functional.libvirt.base",
    "nova.tests.fixtures.libvirt",
    "nova.compute.manager",
    "nova.compute.resource_tracker",
)


@dataclasses.dataclass(frozen=True)
class NovaInfo:
    version: str
    location: str
    backend: str
    why: str = ""  # why this backend (the default's reason, or "--backend")
    installed: str | None = None  # the installed distribution's version, if not this tree's

    def banner(self) -> str:
        return (f"nova {self.version} from {self.location} ({self.backend} backend"
                + (f": {self.why}" if self.why else "") + ")"
                + (f"; not the installed distribution (nova {self.installed})"
                   if self.installed else ""))


#: overrides the default backend for every verb and the pytest plugin
BACKEND_ENV = "NOVA_CHAOS_BACKEND"


def default_backend() -> tuple:
    """``(backend, why)``: the one the Nova under test runs nova-compute on, found without importing it.

    Nova fixes its backend when first imported, so the answer is read from
    the source of its nova-compute entry point (``nova/cmd/compute.py``:
    ``monkey_patch.patch(backend='threading')`` on Nova 34); a Nova without
    that line starts nova-compute on eventlet.
    """
    if os.environ.get(BACKEND_ENV):
        return os.environ[BACKEND_ENV], f"${BACKEND_ENV}"
    spec = importlib.util.find_spec("nova")
    if spec is None or not spec.submodule_search_locations:
        return "eventlet", "no Nova found to ask"
    path = os.path.join(list(spec.submodule_search_locations)[0], "cmd", "compute.py")
    try:
        with open(path) as fh:
            text = fh.read()
    except OSError:
        return "eventlet", f"{path} not readable"
    found = re.search(r"monkey_patch\.patch\(\s*backend\s*=\s*['\"](\w+)['\"]", text)
    if found and found.group(1) == "threading":
        return "threads", "nova-compute's default in this Nova (native threads)"
    return "eventlet", "nova-compute's default in this Nova (eventlet)"


def current_backend() -> str:
    return "threads" if os.environ.get(_ENV, "").lower() in ("1", "true", "yes") else "eventlet"


def select_backend(name: str) -> None:
    """Choose the backend for this process; must happen before Nova loads."""
    if name not in BACKENDS:
        raise UnknownChoice("backend", name, BACKENDS)
    if "nova" in sys.modules and current_backend() != name:
        raise NovaUnusable(
            f"backend {name!r} requested but Nova is already loaded with the "
            f"{current_backend()!r} backend in this process")
    if name == "threads":
        os.environ[_ENV] = "true"
    else:
        os.environ.pop(_ENV, None)


def load_nova() -> NovaInfo:
    """Import Nova and its test stack, or raise :class:`NovaUnusable` in one line."""
    try:
        import nova
    except ImportError as exc:
        raise NovaUnusable(
            f"cannot import nova ({exc}); install it (pip install -e .) or put "
            "a Nova checkout on PYTHONPATH") from None
    location = os.path.dirname(os.path.abspath(getattr(nova, "__file__", None) or "?"))
    for name in REQUIRED:
        try:
            importlib.import_module(name)
        except Exception as exc:  # any failure here means we cannot drive it
            raise NovaUnusable(
                f"nova at {location} is unusable: importing {name} failed: "
                f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
    from nova.compute import manager
    for attr in ("resize_instance", "finish_resize", "update_available_resource",
                 "confirm_resize", "revert_resize", "finish_revert_resize"):
        if not hasattr(manager.ComputeManager, attr):
            raise NovaUnusable(
                f"nova at {location} is unsupported: ComputeManager has no {attr}()")
    ver, installed = tree_version(location)
    return NovaInfo(ver, location, current_backend(), installed=installed)


def tree_version(location: str) -> tuple:
    """``(version of the tree imported from location, the installed distribution's if different)``.

    The installed distribution's metadata describes the tree at its own
    path only: a checkout on PYTHONPATH is described by ``git describe``
    (or "unknown"), and the banner says that the installed one differs.
    """
    import subprocess
    from importlib import metadata
    try:
        dist = metadata.distribution("nova")
        installed, home = dist.version, os.path.realpath(str(dist.locate_file("nova")))
    except metadata.PackageNotFoundError:
        installed, home = None, None
    if home == os.path.realpath(location):
        return installed, None
    root = os.path.dirname(location)
    ver = "unknown"
    if os.path.exists(os.path.join(root, ".git")):
        try:
            proc = subprocess.run(["git", "-C", root, "describe", "--tags", "--always", "--dirty"],
                                  capture_output=True, text=True, timeout=20)
            ver = proc.stdout.strip() or ver
        except (OSError, subprocess.TimeoutExpired):
            pass
    return ver, installed
