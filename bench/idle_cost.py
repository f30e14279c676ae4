"""CPU spent by processes that only wait (issue 35): 10 queued for a held slot and 10 parents
waiting for a sleeping child, for SECONDS each; prints the waiters' CPU seconds (children's rusage).

    PYTHONPATH=. python bench/idle_cost.py LABEL
"""
import os, resource, sys, tempfile, time
from harness.execute import branching
SECONDS = 5.0

def cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime

d = tempfile.mkdtemp()
holder = branching.Slots(1, d); holder.acquire()
before = cpu()
pids = []
for _ in range(10):
    pid = os.fork()
    if pid == 0:
        s = branching.Slots(1, d); s.acquire(); s.release(); os._exit(0)
    pids.append(pid)
time.sleep(SECONDS); holder.release()
for p in pids: os.waitpid(p, 0)
slots_cpu = cpu() - before

before = cpu()
pids = []
for _ in range(10):
    pid = os.fork()
    if pid == 0:  # a parent waiting for its one sleeping child
        b = branching.Brancher(branching.Slots(10, d), 60, d, 4)
        c = os.fork()
        if c == 0:
            time.sleep(SECONDS); os._exit(0)
        b.running[c] = ("v", time.monotonic() + 60)
        b.reap(block=True); os._exit(0)
    pids.append(pid)
for p in pids: os.waitpid(p, 0)
wait_cpu = cpu() - before
print(f"{sys.argv[1]}: 10 queued for a slot {SECONDS:.0f} s: {slots_cpu:.2f} CPU s; "
      f"10 parents waiting {SECONDS:.0f} s: {wait_cpu:.2f} CPU s")
