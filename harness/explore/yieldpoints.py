"""What counts as a yield point: the one place that defines the set.

A yield point is a call boundary at which a production nova-compute green
thread can switch to another task, because the call does I/O or may block:

=========  ==================================================================
object     every *remotable* method of every registered Nova object (in
           production a conductor RPC: save, refresh, get_by_*, ...)
rpc        public methods of the compute/conductor/scheduler RPC APIs
placement  the report client's HTTP verbs (get/put/post/delete)
network    public methods of ``nova.network.neutron.API``
volume     public methods of ``nova.volume.cinder.API``
image      public methods of ``nova.image.glance.API``
driver     virt driver calls: ``ComputeDriver``'s public interface on the
           loaded driver class
lock       ``oslo_concurrency.lockutils.lock`` (every ``synchronized``,
           including the resource tracker's ``compute_resources``)
notify     versioned ``NotificationBase.emit`` and legacy
           ``compute.utils.notify_about_instance_usage``
=========  ==================================================================

A call nested inside another instrumented call *of the same host* is not a
separate point when the outer call is an ``object`` or ``rpc`` call (its body
runs in another service in production) or of the same kind (a driver method
calling another one, a placement helper calling ``put``).

Each entry returns ``(kind, owner, attribute, label)`` rows; ``label`` is the
callee part of a point id. Nothing here edits Nova; :mod:`harness.explore.tracer`
wraps these attributes at run time and restores them afterwards.
"""
from __future__ import annotations

import importlib
import inspect

KINDS = ("object", "rpc", "placement", "network", "volume", "image", "driver", "lock", "notify")
#: an enclosing call of these kinds hides every nested call of the same host
OPAQUE = ("object", "rpc")

_RPC_APIS = ("nova.compute.rpcapi:ComputeAPI", "nova.conductor.rpcapi:ComputeTaskAPI",
             "nova.conductor.rpcapi:ConductorAPI", "nova.scheduler.rpcapi:SchedulerAPI")
_SERVICE_APIS = (("network", "nova.network.neutron:API"), ("volume", "nova.volume.cinder:API"),
                 ("image", "nova.image.glance:API"))


def _resolve(spec: str):
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr)


def _public_methods(cls):
    for name, value in sorted(vars(cls).items()):
        if not name.startswith("_") and inspect.isfunction(value):
            yield name


def object_targets():
    from nova.objects import base
    seen = set()
    for name, versions in sorted(base.NovaObjectRegistry.obj_classes().items()):
        for cls in versions:
            if cls in seen:
                continue
            seen.add(cls)
            for attr, value in sorted(vars(cls).items()):
                fn = value.__func__ if isinstance(value, (classmethod, staticmethod)) else value
                if getattr(fn, "remotable", False):
                    yield ("object", cls, attr, f"{cls.__name__}.{attr}")


def rpc_targets():
    for spec in _RPC_APIS:
        cls = _resolve(spec)
        for attr in _public_methods(cls):
            yield ("rpc", cls, attr, f"{cls.__module__.split('.')[1]}_rpc.{attr}")


def placement_targets():
    from nova.scheduler.client.report import SchedulerReportClient
    for verb in ("get", "put", "post", "delete"):
        yield ("placement", SchedulerReportClient, verb, f"placement.{verb.upper()}")


def service_targets():
    for kind, spec in _SERVICE_APIS:
        cls = _resolve(spec)
        for attr in _public_methods(cls):
            yield (kind, cls, attr, f"{kind}.{attr}")


def driver_targets(driver_cls):
    from nova.virt.driver import ComputeDriver
    for attr in _public_methods(ComputeDriver):
        if callable(getattr(driver_cls, attr, None)):
            yield ("driver", driver_cls, attr, f"driver.{attr}")


def notify_targets():
    from nova.compute import utils as compute_utils
    from nova.notifications.objects.base import NotificationBase
    yield ("notify", NotificationBase, "emit", "notify")
    yield ("notify", compute_utils, "notify_about_instance_usage", "notify_usage")


def all_targets(driver_cls):
    """Every attribute to wrap, deterministic order. Locks are handled apart."""
    yield from object_targets()
    yield from rpc_targets()
    yield from placement_targets()
    yield from service_targets()
    yield from driver_targets(driver_cls)
    yield from notify_targets()


def label_detail(kind: str, label: str, args: tuple, kwargs: dict) -> str:
    """Make a label more readable with a stable argument (never a uuid)."""
    if label == "notify" and args:
        event = getattr(args[0], "event_type", None)
        if event is not None:
            try:
                return f"notify.{event.to_notification_event_type_field()}"
            except Exception:  # not populated: keep the plain label
                return label
    if label == "notify_usage":
        suffix = kwargs.get("event_suffix", args[3] if len(args) > 3 else "?")
        return f"notify_usage.{suffix}"
    return label
