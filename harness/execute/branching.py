"""Forking mechanics: CPU slots shared by a process tree, and a brancher that forks,
bounds and reaps children that carry on from where their parent stands.

What makes a forked child sound is in :mod:`harness.execute.fork`; this
module only knows processes (eventlet's hub and tpool, instance files,
watchdogs, a threads-backend process that must be alone to fork).
"""
from __future__ import annotations

import fcntl
import os
import shutil
import signal
import tempfile
import time

from harness.errors import RunTimeout


def _original(name):
    try:
        from eventlet import patcher
        return patcher.original(name)
    except ImportError:  # pragma: no cover - eventlet is always installed with nova
        return __import__(name)


_os, _time, _select = _original("os"), _original("time"), _original("select")


def _fresh_hub():
    """Give a forked child its own epoll: the parent's is shared across fork."""
    try:
        from eventlet import hubs
        select = _original("select")
    except ImportError:  # pragma: no cover
        return
    parents = set()
    try:  # tpool's OS threads do not survive fork: run libvirt calls inline
        from eventlet import tpool
        tpool._nthreads = 0
        if tpool._rsock is not None:
            # the parent's pool signals results on this socket pair: a child
            # polling it would steal the parent's wake-ups and hang it
            parents.add(tpool._rsock.fileno())
    except ImportError:  # pragma: no cover
        pass
    hub = hubs.get_hub()
    if hasattr(hub, "poll") and hasattr(select, "epoll") and type(hub.poll).__name__ == "epoll":
        hub.poll = select.epoll()
        for fileno in set(hub.listeners[hub.READ]) | set(hub.listeners[hub.WRITE]):
            if fileno not in parents:
                hub.register(fileno, new=True)


#: test hook (tests/test_soundness.py): seconds the top fork parent holds Nova
#: still at its first branch with a resize call in flight
HOLD_ENV = "NOVA_CHAOS_SELFTEST_HOLD"


class Slots:
    """``jobs`` CPU slots shared by a process tree: one ``flock``-ed file each.

    The kernel drops a dead process's locks, so a child that crashes or is
    killed can never leak its slot. Each process opens the files itself
    (locks belong to open file descriptions, which fork shares).
    """

    def __init__(self, jobs: int, directory: str):
        self.paths = [os.path.join(directory, f"slot{i}") for i in range(jobs)]
        self.door = os.path.join(directory, "door")
        for path in self.paths + [self.door]:
            open(path, "a").close()
        self.fd = None

    def forget(self):
        """In a new child: the inherited slot is the parent's, not ours."""
        self.fd = None

    def acquire(self):
        """Take a free slot; if none is free, queue behind the *door*.

        Only the process holding the door looks for a slot (every 5 ms); the
        others queue for the door asleep in the kernel (measured: ten
        processes queued 5 s cost 0.3 CPU s polling each slot, 0.07 s now;
        a fork tree queues a dozen). The door is a lock too: a queued process
        that is killed leaves nothing held.
        """
        if self._take():
            return
        door = os.open(self.door, os.O_RDWR)
        try:
            fcntl.flock(door, fcntl.LOCK_EX)
            while not self._take():
                _time.sleep(0.005)
        finally:
            os.close(door)  # the next in the queue looks now

    def _take(self) -> bool:
        for path in self.paths:
            fd = os.open(path, os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self.fd = fd
            return True
        return False

    def release(self):
        if self.fd is None:  # a timeout struck while acquiring: nothing is held
            return
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        self.fd = None


#: the instance files' path every process of a fork tree is given: each process
#: resolves it through its own working directory (see :func:`_copy_instances_path`)
PER_PROCESS = "/proc/self/cwd/instances"


def per_process_files() -> bool:
    return os.path.isdir("/proc/self/cwd")


def _copy_instances_path(scratch: str) -> str:
    """A private copy of the instance files, made now (the caller is paused at a point).

    Every process of a fork tree has :data:`PER_PROCESS` as its instance
    path; the copy is a new working directory holding ``instances``, so
    the paths Nova's frames computed before the fork (migrate_disk_and_power_off
    holds ``inst_base`` across power_off) name the child's own files. A
    private path in CONF alone would leave those frames on the parent's
    files (measured: two children forked inside power_off, the second's
    rename of the instance directory failed with FileNotFoundError), which
    is why fork mode needs ``/proc/self/cwd`` (:func:`fork_supported`).
    """
    mine = tempfile.mkdtemp(prefix="fs-", dir=scratch)
    shutil.copytree(os.path.join(os.getcwd(), "instances"), os.path.join(mine, "instances"),
                    symlinks=True)
    return mine


class Brancher:
    """Fork children that queue for a shared CPU slot; reap them, now or later.

    :meth:`branch` returns the variant in the child (which carries on, holding
    a slot) and ``None`` in the parent, which carries on; :meth:`reap`
    collects exits later. ``dead`` says why a child failed.
    """

    def __init__(self, slots, timeout: float, scratch: str, limit: int, on_wait=None):
        self.slots, self.timeout, self.scratch = slots, timeout, scratch
        self.limit = limit      # children outstanding at most (bounds memory)
        self.running: dict = {}  # pid -> (variant, deadline)
        self.dead: dict = {}     # variant -> why the child did not exit cleanly
        self.on_wait = on_wait   # called while the top process waits (results stream on)
        self.refused = None      # why a fork was refused (Nova may swallow the exception)
        self._top = os.getpid()

    def branch(self, variants, where, lives=None):
        """``lives``: variant -> seconds it may live, for a child that is itself a parent."""
        try:
            for variant in variants:
                while len(self.running) >= self.limit:
                    self._wait_for_any()
                fs = _copy_instances_path(self.scratch)
                if _one_thread():
                    self._require_alone(where)
                pid = os.fork()
                if pid == 0:
                    self._in_child(fs, where, (lives or {}).get(variant, self.timeout))
                    return variant
                # it waits for a slot before its own bound starts: allow for the queue
                queued = (lives or {}).get(variant, self.timeout) + self.timeout * (1 + self.limit) + 30
                self.running[pid] = (variant, time.monotonic() + queued)
        except BaseException:  # interrupted: leave no orphan behind
            self.kill_all()
            raise
        return None

    def _require_alone(self, where):
        """Fork only a process whose one thread is this one: another's work would be lost mid-air."""
        from harness.cloud import one_thread
        others = one_thread.alone()
        if others is not None:
            self.refused = f"cannot fork at {where()}: other threads are alive: {others}"
            raise one_thread.OneThreadConflict(self.refused)

    def reap(self, block=False):
        """Collect exited children; with ``block``, all of them (slot given back)."""
        if block:
            self._wait(lambda: not self.running)
        else:
            self._poll()

    def wait_for(self, variant):
        """Wait until the child running ``variant`` has exited."""
        self._wait(lambda: all(v != variant for v, _ in self.running.values()))

    def _wait_for_any(self):
        before = len(self.running)
        self._wait(lambda: len(self.running) < before)

    def _wait(self, done):
        """Poll children until ``done()``, giving this process's slot back meanwhile."""
        self.slots.release()
        streamed = time.monotonic()
        try:
            while True:
                self._poll()
                if (self.on_wait is not None and os.getpid() == self._top
                        and time.monotonic() - streamed > 0.5):
                    self.on_wait()
                    streamed = time.monotonic()
                if done():
                    return
                self._sleep(0.5)
        finally:
            self.slots.acquire()

    def _sleep(self, most: float):
        """Until a child exits, ``most`` seconds pass or the nearest child's deadline comes.

        Asleep on the children's pidfds (Linux 5.3), woken by an exit at once
        (measured: ten parents waiting 5 s cost 0.3 CPU s polling every 3 ms,
        0.07 s now). Where pidfds are missing, it polls as before.
        """
        now = time.monotonic()
        most = max(0.0, min([most] + [deadline - now for _, deadline in self.running.values()]))
        if not hasattr(os, "pidfd_open"):  # pragma: no cover - Linux before 5.3, Python 3.8
            _time.sleep(min(most, 0.003))
            return
        fds = []
        try:
            for pid in self.running:
                try:
                    fds.append(os.pidfd_open(pid))
                except ProcessLookupError:  # exited and reaped: nothing to wait for
                    return
            poller = _select.poll()
            for fd in fds:
                poller.register(fd, _select.POLLIN)
            poller.poll(most * 1000)
        finally:
            for fd in fds:
                os.close(fd)

    def _poll(self):
        for pid, (variant, deadline) in list(self.running.items()):
            done, status = _os.waitpid(pid, os.WNOHANG)
            if done:
                del self.running[pid]
                if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
                    self.dead[variant] = f"child exited with status {status:#x}"
            elif time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                _os.waitpid(pid, 0)
                del self.running[pid]
                self.dead[variant] = "killed: past its bound (its own watchdog did not end it)"

    def kill_all(self):
        for pid in self.running:
            os.kill(pid, signal.SIGKILL)
            _os.waitpid(pid, 0)
        self.running.clear()

    def _in_child(self, fs, where, life):
        self.running = {}  # the siblings are not this child's to reap
        _fresh_hub()
        os.chdir(fs)  # PER_PROCESS now names this child's copy
        # and temporary files of its own: the parent's (Nova's NestedTempfile)
        # goes when the parent finishes, maybe before a queued child runs
        # (measured: a restarted compute's start-up check exited on it)
        tempfile.tempdir = tempfile.mkdtemp(prefix="tmp-", dir=fs)
        self.slots.forget()
        self.slots.acquire()

        self.rearm(life, where)

    @staticmethod
    def rearm(seconds: float, where):
        """Bound this process's remaining life (a forked child has no alarm of its own)."""
        def watchdog(*_):
            raise RunTimeout(f"forked process stuck for {seconds:.0f}s at {where()}")
        signal.signal(signal.SIGALRM, watchdog)
        signal.alarm(max(1, int(seconds)))


def fork_supported() -> bool:
    """Eventlet forks as it is; native threads with the cloud on one thread
    (harness.cloud.one_thread); both need each process's own instance files
    at one path (:data:`PER_PROCESS`). Elsewhere items run fresh."""
    return hasattr(os, "fork") and per_process_files()


def _one_thread() -> bool:
    from harness.cloud import nova_support
    return nova_support.current_backend() == "threads"
