"""Memoized continuations: an item whose state at VERIFY_RESIZE is the uninjected run's
inherits the rest of that run instead of running it again.

Past the move's checkpoint the rest of an item's script is fixed (its
ending, the deletes, their checks and convergence periodics), and Nova
there reads nothing but the state it left: the databases (cells, API,
placement), every compute's resource tracker, report-client provider
cache and pending work, the fake hosts' domains, and the harness's own
bookkeeping (where servers went, the NUMA cells last seen, the tracer's
counters and locks). :func:`state` captures all of it as plain data;
two processes of one fork tree whose states are equal run the same
continuation (fork shares every uuid and id made before the fork).

What the key leaves out, and why it cannot change the rest of the run:

* wall-clock values -- timestamps in rows and objects, the host's uptime
  line in a compute's stats, the report client's refresh times, the
  managers' last-periodic times: no deadline of Nova's runs on the wall
  clock in the harness's cloud (:mod:`harness.cloud.inprocess`), so only
  their order could matter, and the one order Nova's accounting reads
  (an instance's newest migration) is kept as ranks;
* an instance action's ``request_id`` (the API request's, a random uuid
  per process): only the instance-actions API reads it;
* the log: a checkpoint consumes what was logged before it;
* what follows from configuration and the fake hosts' fixed layout (the
  libvirt driver's host capabilities, Nova's module-level caches, the
  scheduler's host states -- nothing after the memo checkpoints schedules).

Anything the capture does not know how to read makes the state
:class:`Uncapturable`: that item runs in full. The continuation to inherit
comes from a *baseline* process of the same fork tree (the uninjected run,
forked at the first point; :mod:`harness.execute.fork`), stored under the
key in the sweep's scratch directory before any item reaches it.
"""
from __future__ import annotations

import dataclasses
import gc
import hashlib
import json
import os
import pickle
import re
import time
import types

_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}")
#: a compute node's scheduler counters (instances per state, project and os type, io
#: workload, running VMs; the host's uptime line): a count as of the last claim or
#: periodic, read only by the scheduler's filters and weighers -- nothing after the
#: memo checkpoint schedules -- and recounted by every periodic
_SCHEDULER_COUNTERS = ("stats", "current_workload", "running_vms")
#: per-table columns left out of the key (see the module docstring)
_VOLATILE_COLUMNS = {"instance_actions": ("request_id",)}
#: where the rows' order by time is kept (as ranks): Nova picks an instance's newest migration
_RANKED = {"migrations": ("created_at", "updated_at")}


#: a directory: every state digested is written there as JSON (diagnosis)
DUMP_ENV = "NOVA_CHAOS_MEMO_DUMP"


class Uncapturable(Exception):
    """Part of the state the key cannot read: the item runs in full."""


@dataclasses.dataclass
class Continuation:
    """What the rest of a run did, from the memo checkpoint on."""

    checkpoints: list   # runner.Checkpoint, after the memo checkpoint
    error: str | None
    stopped_at: str | None
    where: str
    trace: list         # point ids recorded after the memo checkpoint
    log: str            # Nova's log after it
    source: str         # which run it is ("the uninjected run")


@dataclasses.dataclass(frozen=True)
class Mark:
    """Where a run stood at the memo checkpoint: what comes after is the continuation."""

    key: str
    checkpoints: int
    points: int
    log: int

    @classmethod
    def of(cls, run, key: str) -> "Mark":
        return cls(key, len(run.result.checkpoints), len(run.tracer.points),
                   len(run.cloud.log_text()))

    def continuation(self, run, source: str) -> Continuation:
        return Continuation(run.result.checkpoints[self.checkpoints:], run.result.error,
                            run.result.stopped_at, run.where,
                            [p.id for p in run.tracer.points[self.points:]],
                            run.cloud.log_text()[self.log:], source)

    def joined(self, run, rest: Continuation, source: str) -> Continuation:
        """From here: what ``run`` did since, then ``rest`` (a run that inherits later)."""
        return Continuation(run.result.checkpoints[self.checkpoints:] + rest.checkpoints,
                            rest.error, rest.stopped_at, rest.where,
                            [p.id for p in run.tracer.points[self.points:]] + rest.trace,
                            run.cloud.log_text()[self.log:] + rest.log, source)


class Store:
    """Continuations by key, in a directory a fork tree shares (one file each, written atomically).

    A process about to compute a continuation *claims* its key (a ``flock``
    on ``KEY.claim``): a sibling that reaches the same state meanwhile
    waits for it instead of running the same rest again (measured: with two
    jobs, 5 to 7 of 19 continuations were computed twice). The kernel drops
    a dead process's claim, so a waiter is never left waiting for a process
    that is gone; one that stopped short stores nothing, and its waiter
    runs the rest itself.
    """

    #: seconds between looks while waiting for a claimed key
    POLL = 0.02

    def __init__(self, directory: str):
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        self.claims: dict = {}  # key -> the fd holding this process's claim

    def _path(self, key: str) -> str:
        return os.path.join(self.directory, key + ".pickle")

    def put(self, key: str, continuation: Continuation) -> None:
        path = self._path(key)
        with open(path + ".tmp", "wb") as fh:
            pickle.dump(continuation, fh)
        os.replace(path + ".tmp", path)
        self.release(key)

    def get(self, key: str) -> Continuation | None:
        try:
            with open(self._path(key), "rb") as fh:
                return pickle.load(fh)
        except FileNotFoundError:
            return None

    def take(self, key: str, bound: float, idle=None) -> tuple:
        """``(the continuation stored under key, None)``, waiting at most ``bound`` seconds
        for a process that has claimed it; else ``(None, why)`` and this process holds the
        claim and runs the rest itself. ``why`` is None unless the bound was hit.

        ``idle(True)`` / ``idle(False)``: called around a wait (give the CPU slot back).
        """
        import fcntl
        found = self.get(key)
        if found is not None:
            return found, None
        fd = os.open(self._path(key) + ".claim", os.O_RDWR | os.O_CREAT, 0o600)
        started, waited = time.monotonic(), False
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:  # another process is running this rest
                    if time.monotonic() - started > bound:  # runs it unclaimed
                        os.close(fd)
                        return None, (f"waited {bound:.0f} s for key {key[:12]}, claimed by "
                                      "another process: ran the rest here")
                    if not waited and idle is not None:
                        idle(True)
                    waited = True
                    _sleep(self.POLL)
                    continue
                found = self.get(key)  # stored between the look and the lock, or by the holder
                if found is not None:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    os.close(fd)
                    return found, None
                self.claims[key] = fd
                return None, None
        finally:
            if waited and idle is not None:
                idle(False)

    def release(self, key: str) -> None:
        """Give up this process's claim on ``key`` (stored, or never will be)."""
        import fcntl
        fd = self.claims.pop(key, None)
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def release_all(self) -> None:
        """Before this process waits for its children or leaves: no claim outlives its work.

        No process forks while it holds a claim (a child would share it): claims
        are taken only past the last fork of a run, at VERIFY_RESIZE and after
        the ending."""
        for key in list(self.claims):
            self.release(key)


def _sleep(seconds: float) -> None:
    try:
        from eventlet import patcher
        patcher.original("time").sleep(seconds)
    except ImportError:  # pragma: no cover
        time.sleep(seconds)


def engines() -> list:
    """Every SQL engine alive in this process (Nova's cells and API, placement).

    Found by the garbage collector's list, so any Nova's fixtures will do;
    call it in the sweep's parent once the cloud is up (its children share them).
    """
    import sqlalchemy
    frozen = gc.get_freeze_count()
    if frozen:  # the collector does not list frozen objects: list them, freeze them again
        gc.unfreeze()
    try:
        found = [o for o in gc.get_objects() if isinstance(o, sqlalchemy.engine.Engine)]
    finally:
        if frozen:
            gc.freeze()
    return found


def digest(run, engines_: list) -> str:
    """A digest of :func:`state` (raises :class:`Uncapturable`)."""
    text = _canon(state(run, engines_))
    dump = os.environ.get(DUMP_ENV)
    if dump:  # to see why two states differ
        name = f"{os.getpid()}-{len(os.listdir(dump))}.json"  # one file per digest
        with open(os.path.join(dump, name), "w") as fh:
            json.dump({"where": run.where, "state": json.loads(text)}, fh, indent=1,
                      sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def key(digest_: str, ending: str) -> str:
    """The memo key of the rest of a run in state ``digest_`` with ``ending``."""
    return hashlib.sha256(f"{digest_}|{ending}".encode()).hexdigest()[:32]


class Inherited:
    """A run whose rest is a stored continuation, as :func:`harness.execute.campaign.judge` reads it."""

    def __init__(self, run, continuation: Continuation, ending: str):
        self.result = dataclasses.replace(
            run.result, ending=ending,
            checkpoints=run.result.checkpoints + continuation.checkpoints,
            error=continuation.error, stopped_at=continuation.stopped_at,
            log_text=run.cloud.log_text()[run._setup_log:] + continuation.log)
        self.tracer = types.SimpleNamespace(points=list(run.tracer.points) + [
            types.SimpleNamespace(id=p) for p in continuation.trace])
        self.where = continuation.where
        self._planned = run.operation.planned(ending)

    def planned(self) -> list:
        return self._planned


def _refuse(value):
    raise Uncapturable(f"cannot capture a {type(value).__name__}")


def state(run, engines_: list) -> dict:
    """Everything the rest of ``run`` reads, as plain data (see the module docstring)."""
    cloud = run.cloud
    if not engines_:
        raise Uncapturable("no database found")
    if cloud.one_thread and cloud.one_thread.depth:
        raise Uncapturable("work in flight on the cloud's thread")
    return {
        "databases": sorted((_database(e) for e in engines_), key=_canon),
        "computes": {h.name: _compute(cloud.compute(h.name).manager)
                     for h in cloud.scenario.hosts if h.name not in cloud.down},
        "hosts": {h.name: cloud.libvirt_host(h.name).state() for h in cloud.scenario.hosts},
        "harness": _harness(run),
    }


def _canon(value) -> str:
    return json.dumps(value, sort_keys=True, default=_refuse)


def _database(engine) -> dict:
    """Every non-empty table's rows. SQLite (Nova's test databases) is read through
    its own driver: a tenth of SQLAlchemy's cost per query, and most tables are empty."""
    import sqlite3
    import sqlalchemy
    with engine.connect() as conn:
        raw = conn.connection.driver_connection
        if isinstance(raw, sqlite3.Connection):
            cursor = raw.cursor()

            def read(table):
                cursor.execute(f'SELECT * FROM "{table}"')
                columns = [d[0] for d in cursor.description]
                return [dict(zip(columns, r)) for r in cursor.fetchall()]
            names = [r[0] for r in cursor.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        else:
            def read(table):
                return [dict(r) for r in conn.execute(
                    sqlalchemy.text(f'SELECT * FROM "{table}"')).mappings()]
            names = sorted(sqlalchemy.inspect(conn).get_table_names())
        tables = {table: read(table) for table in names}
    return {table: _rows(table, rows) for table, rows in tables.items() if rows}


def _rows(table: str, rows: list) -> list:
    ranked = _RANKED.get(table, ())
    order = {}
    for column in ranked:  # the rows' order by time, without the times
        values = sorted({str(r[column]) for r in rows if r.get(column) is not None})
        order[column] = {v: i for i, v in enumerate(values)}
    out = []
    for r in rows:
        row = {}
        for column, value in r.items():
            if (column in _VOLATILE_COLUMNS.get(table, ())
                    or table == "compute_nodes" and column in _SCHEDULER_COUNTERS):
                continue
            if column in order:
                row[column] = None if value is None else order[column][str(value)]
            else:
                row[column] = _plain(value)
        out.append(row)
    return sorted(out, key=repr)  # dicts of plain values in column order: repr is canonical


def _plain(value):
    """A value as JSON-able data, wall-clock times dropped."""
    import datetime
    if isinstance(value, (datetime.datetime, datetime.date)):
        return "<time>"
    if isinstance(value, str):
        return "<time>" if _TIME.match(value) else value
    if isinstance(value, bytes):
        return value.hex()
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_plain(v) for v in value), key=_canon)
    if hasattr(value, "obj_to_primitive"):  # a Nova object, with its pending changes
        return _plain(value.obj_to_primitive())
    if type(value).__name__ == "Future" and callable(getattr(value, "done", None)):
        return _future(value)
    raise Uncapturable(f"cannot capture a {type(value).__name__}")


def _future(future) -> dict:
    """A task's handle kept in a manager's books, by its outcome (never waited for).

    The one-thread cloud runs a submitted task before ``submit`` returns, so a
    live migration's source keeps ``(migration, future)`` in
    ``_waiting_live_migrations`` after the task popped it: read again only by
    an abort or a shutdown, never by what follows the memo checkpoints."""
    done = future.done()
    failed = done and not future.cancelled() and future.exception() is not None
    return {"future": "done" if done else "pending", "cancelled": future.cancelled(),
            "failed": failed}


def _compute(manager) -> dict:
    """A compute's in-memory state: resource tracker, provider caches, pending work."""
    rt = manager.rt
    nodes = {node: _node(cn) for node, cn in rt.compute_nodes.items()}
    old = {node: _node(cn, old=True) for node, cn in rt.old_resources.items()}
    return {
        "compute_nodes": nodes, "old_resources": old,
        "tracked_instances": sorted(rt.tracked_instances),
        "tracked_migrations": _plain(dict(rt.tracked_migrations)),
        "absent_providers": sorted(rt.absent_providers),
        "assigned_resources": _plain({k: dict(v) for k, v in rt.assigned_resources.items()}),
        "is_bfv": _plain(rt.is_bfv),
        "provider_tree": _tree(rt.provider_tree),
        "report_client_tree": _tree(manager.reportclient._provider_tree),
        "pending": _plain({name: getattr(manager, name, None) for name in (
            "_failed_tasks", "_in_progress_tasks", "_pending_dest_live_migrations",
            "_pending_dest_resizes", "_syncs_in_progress", "_waiting_live_migrations")}),
        "instance_events": _events(manager.instance_events._events),
    }


def _events(events):
    """External events a compute waits for, per instance (None: it accepts none, shutting down)."""
    if events is None:
        return None
    return {str(uuid): sorted(map(str, waiting)) for uuid, waiting in events.items()}


def _node(cn, old=False) -> dict:
    """A compute node object. ``old``: the resource tracker's copy as last saved, which
    only decides whether the node is saved again (compared without its pending changes);
    its ``mapped`` is host discovery's, set in the database (captured there)."""
    data = _plain(cn)
    fields = data.get("nova_object.data", {})
    for name in _SCHEDULER_COUNTERS + (("mapped",) if old else ()):
        fields.pop(name, None)
    if old:
        data.pop("nova_object.changes", None)
    return data


def _tree(tree) -> list:
    if tree is None:
        return []
    out = []
    for uuid in sorted(tree.get_provider_uuids()):
        data = tree.data(uuid)
        out.append({"uuid": uuid, "name": data.name, "generation": data.generation,
                    "parent": data.parent_uuid, "inventory": _plain(data.inventory),
                    "traits": sorted(data.traits), "aggregates": sorted(data.aggregates),
                    "resources": _plain({k: sorted(map(str, v))
                                         for k, v in (data.resources or {}).items()})})
    return out


def _harness(run) -> dict:
    tracer, cloud = run.tracer, run.cloud
    return {
        "placed": run.placed, "moved": run.moved, "chosen": _plain(run.chosen),
        "ending_server": run.ending_server, "ending_error": _plain(repr(run.ending_error)),
        "recovery": run.recovery, "down": sorted(cloud.down), "crashed": sorted(cloud.crashed),
        "servers": cloud.servers, "moves_ended": dict(cloud.moves_ended),
        "tracer": {"counts": sorted(tracer._counts.items()), "open": tracer.open,
                   "closed": tracer.closed, "core": tracer.core, "past_core": tracer.past_core,
                   "roles": tracer.roles, "held": sorted(tracer.held),
                   "on_release": sorted(k for k, v in tracer.on_release.items() if v),
                   "before_acquire": sorted(tracer.before_acquire),
                   "incarnations": tracer.incarnations},
    }
