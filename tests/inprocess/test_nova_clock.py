"""Nova's timers stand still while the harness works or waits (eventlet backend)."""
import eventlet
from eventlet import patcher

from harness import nova_clock

_time = patcher.original("time")


def test_a_timer_does_not_fire_for_the_time_the_harness_held_nova(nova):
    fired = []
    eventlet.spawn_after(1.0, fired.append, "deadline")
    with nova_clock.held():
        _time.sleep(1.5)            # longer than the deadline, Nova frozen
    eventlet.sleep(0.2)
    assert fired == []              # to Nova only ~0.2 s have passed
    eventlet.sleep(1.2)
    assert fired == ["deadline"]    # and it still fires, on Nova's time


def test_nested_holds_shift_once(nova):
    fired = []
    eventlet.spawn_after(1.0, fired.append, "deadline")
    with nova_clock.held():
        with nova_clock.held():
            _time.sleep(0.6)
        _time.sleep(0.6)
    eventlet.sleep(0.6)             # 0.6 s of Nova time: a double shift would hide nothing
    eventlet.sleep(0.6)
    assert fired == ["deadline"]    # 1.2 s of Nova time > 1.0: shifted once, not twice
