"""Forking mechanics without Nova: slots queue behind one door, a waiting parent
sleeps until a child exits (and wakes at once when one does)."""
import os
import threading
import time

from harness.execute import branching


def test_a_slot_is_handed_over_to_a_queued_process(tmp_path):
    holder, queued = branching.Slots(1, str(tmp_path)), branching.Slots(1, str(tmp_path))
    holder.acquire()
    threading.Timer(0.3, holder.release).start()
    started = time.monotonic()
    queued.acquire()  # behind the door until the holder lets go
    assert 0.25 < time.monotonic() - started < 5 and queued.fd is not None
    queued.release()


def test_a_queued_process_does_not_take_a_held_slot(tmp_path):
    holder, queued = branching.Slots(2, str(tmp_path)), branching.Slots(2, str(tmp_path))
    holder.acquire()
    other = branching.Slots(2, str(tmp_path))
    other.acquire()  # the second slot
    assert not queued._take()  # both held
    other.release()
    assert queued._take()
    holder.release(), queued.release()


def _child(seconds):
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        time.sleep(seconds)
        os._exit(0)
    return pid


def test_a_waiting_parent_wakes_when_its_child_exits(tmp_path):
    brancher = branching.Brancher(branching.Slots(1, str(tmp_path)), 60.0, str(tmp_path), 4)
    pid = _child(0.2)
    brancher.running[pid] = ("v", time.monotonic() + 60)
    started = time.monotonic()
    brancher._sleep(30.0)  # woken by the exit, not the 30 s
    assert 0.15 < time.monotonic() - started < 5
    brancher.reap(block=True)
    assert not brancher.running and not brancher.dead


def test_a_waiting_parent_still_kills_a_child_past_its_deadline(tmp_path):
    brancher = branching.Brancher(branching.Slots(1, str(tmp_path)), 60.0, str(tmp_path), 4)
    pid = _child(30)
    brancher.running[pid] = ("v", time.monotonic() + 0.3)
    started = time.monotonic()
    brancher.reap(block=True)
    assert time.monotonic() - started < 5
    assert brancher.dead == {"v": "killed: past its bound (its own watchdog did not end it)"}
