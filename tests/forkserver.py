"""One process per pytest worker and backend with Nova imported once; each ``nova-chaos``
command a test runs is a fork of it.

Why: a new ``python -m harness`` spends about 7 s of CPU before it does
anything -- importing Nova (2.5 s on 34.0.0) and what its first cloud imports
(3.9 s: the API's controllers, the scheduler, oslo.messaging, os-vif) -- and
the suite runs well over a hundred of them. A fork of this server runs the
same ``harness.front.cli.main`` in its own process, with the test's argv,
environment, working directory and output files, as a new interpreter would,
without paying the imports again. On the threads backend the server also runs one
cloud up and down on its one thread first, so that what a process's first cloud
builds once is inherited too.

A command whose environment changes what is imported (``IMPORT_TIME``), or
that asks for another backend than any server has, gets a real interpreter
(``run`` returns None). So does every command when the server cannot start
or stops serving: the fork is a shortcut, never a different answer.

Protocol (a Unix socket): the client sends one JSON line; a handler forked
off the server forks the command, sends ``{"pid": N}`` and, once it ends,
``{"code": N}``.
"""
from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading

from tests.conftest import ROOT

#: environment variables read while importing (Python's, the discovery cache's, the backend's)
IMPORT_TIME = ("PYTHONPATH", "PYTHONHOME", "PYTHONSAFEPATH", "NOVA_CHAOS_CACHE", "TMPDIR",
               "NOVA_CHAOS_BACKEND", "OS_NOVA_DISABLE_EVENTLET_PATCHING")
#: verbs that hand the environment they started with to Nova's own tests (``prove``,
#: ``recreate``): a fork starts with the backend's variable already set, which an
#: interpreter sets only when it loads Nova
INTERPRETER_VERBS = ("prove", "recreate")
#: a module only a running cloud imports: the command that ran one tells the server what to import
CLOUD_MARK = "nova.conductor.manager"
#: seconds a server may take to import Nova and listen
START_TIMEOUT = 180
_servers: dict = {}  # backend -> socket path, or None when it could not start


def run(args, env: dict, timeout: float):
    """``nova-chaos ARGS`` in a fork of this worker's server: a CompletedProcess, or None
    when the command needs a real interpreter."""
    if any(env.get(k) != os.environ.get(k) for k in IMPORT_TIME):
        return None
    if args and args[0] in INTERPRETER_VERBS:
        return None
    backend = _backend(args, env)
    path = _server(backend)
    if path is None:
        return None
    with tempfile.TemporaryDirectory(prefix="nova-chaos-fork-cli-") as tmp:
        out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
        request = {"argv": list(args), "env": env, "cwd": ROOT, "out": out, "err": err}
        code = _ask(path, request, timeout, args)
        if code is None:  # the server is gone: this and later commands get interpreters
            _servers[backend] = None
            return None
        with open(out, errors="replace") as o, open(err, errors="replace") as e:
            return subprocess.CompletedProcess(args, code, o.read(), e.read())


def _backend(args, env) -> str:
    args = list(args)
    if "--backend" in args[:-1]:
        return args[args.index("--backend") + 1]
    from harness.cloud import nova_support
    return env.get(nova_support.BACKEND_ENV) or nova_support.default_backend()[0]


def _ask(path, request, timeout, args):
    """The command's exit code; None if the server is gone before taking it (it never ran)."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            conn.connect(path)
            conn.sendall(json.dumps(request).encode() + b"\n")
            conn.settimeout(START_TIMEOUT)  # the server may be importing what a cloud needs
            lines = conn.makefile("r")
            pid = json.loads(lines.readline())["pid"]
        except (OSError, ValueError, KeyError):
            return None
        conn.settimeout(timeout)
        try:
            return json.loads(lines.readline())["code"]
        except socket.timeout:
            os.kill(pid, signal.SIGKILL)  # as subprocess.run does on its timeout
            raise subprocess.TimeoutExpired(args, timeout) from None
        except (OSError, ValueError, KeyError) as exc:  # it ran: never run it twice
            raise RuntimeError(f"fork server: no exit code for nova-chaos {' '.join(args)} "
                               f"(pid {pid}): {exc!r}") from None
    finally:
        conn.close()


def _server(backend: str):
    if backend in _servers:
        return _servers[backend]
    _servers[backend] = None
    home = tempfile.mkdtemp(prefix="nova-chaos-forkserver-")
    path = os.path.join(home, "sock")
    proc = subprocess.Popen([sys.executable, "-m", "tests.forkserver", path, backend],
                            cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL,
                            env=dict(os.environ, PYTHONWARNINGS="ignore"))
    atexit.register(_stop, proc)
    ready = threading.Timer(START_TIMEOUT, proc.kill)
    ready.start()
    try:
        for line in proc.stdout:  # Nova logs its import to stdout first
            if line.strip() == b"ready":
                _servers[backend] = path
                break
    finally:
        ready.cancel()
    return _servers[backend]


def _stop(proc):
    proc.kill()
    proc.wait()


# -- the server -----------------------------------------------------------------------------

def serve(path: str, backend: str) -> None:
    """Import Nova with ``backend``, listen at ``path``, fork a handler per request."""
    from harness.cloud import nova_support
    nova_support.select_backend(backend)
    nova_support.load_nova()
    from harness.cloud import inprocess
    from harness.front import cli  # noqa: F401 - what every command imports
    inprocess._environment_class()
    if backend == "threads":
        _warm_cloud()
    if threading.active_count() != 1:  # a fork must not lose a thread
        sys.exit(3)
    modules = path + ".modules"  # what the first cloud imported: imported here once written
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    listener.settimeout(1)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # handlers are reaped as they end
    parent = os.getppid()
    print("ready", flush=True)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # nobody reads the pipe from now on
    warmed = False
    while os.getppid() == parent:  # the worker that started it is gone: stop
        if not warmed and os.path.exists(modules):  # between commands, mostly
            warmed = _warm(modules)
        try:
            conn, _ = listener.accept()
        except socket.timeout:
            continue
        if not warmed and os.path.exists(modules):
            warmed = _warm(modules)
        if os.fork() == 0:  # pragma: no cover - the handler
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            try:
                _handle(conn, modules)
            finally:
                os._exit(0)
        conn.close()


def _warm_cloud() -> None:
    """One cloud up and down, on this thread (as a fork parent runs it): what a process's
    first cloud builds once -- the databases' schema, the API's routes and validators,
    the entry points -- is built before any fork (measured: 1.5 to 2 s of CPU less
    for each command that runs a cloud, for about 4 s here)."""
    from harness import scenario
    from harness.cloud import inprocess
    cloud = inprocess.Cloud(scenario.load("pinned-only"), one_thread=True)
    cloud.setUp()
    cloud.cleanUp()


def _warm(modules: str) -> bool:
    import importlib
    with open(modules) as fh:
        names = json.load(fh)
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # a module made at run time, or one that needs a cloud: left cold
            pass
    if threading.active_count() != 1:
        sys.exit(3)  # an import started a thread: no more forks (clients use interpreters)
    return True


def _handle(conn, modules: str) -> None:
    lines = conn.makefile("r")
    request = json.loads(lines.readline())
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the command
        conn.close()
        os._exit(_command(request, modules))
    conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    _, status = os.waitpid(pid, 0)
    conn.sendall(json.dumps({"code": os.waitstatus_to_exitcode(status)}).encode() + b"\n")


def _command(request: dict, modules: str) -> int:
    from harness.cloud import nova_support
    backend = os.environ.get(nova_support._ENV)
    os.environ.clear()
    os.environ.update(request["env"])
    if backend is not None:  # as select_backend set it before Nova was imported
        os.environ[nova_support._ENV] = backend
    os.chdir(request["cwd"])
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for fd, name in ((1, "out"), (2, "err")):
        os.dup2(os.open(request[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
    sys.argv = [os.path.join(ROOT, "harness", "__main__.py"), *request["argv"]]
    code = 1
    try:
        from harness.front import cli
        code = cli.main(request["argv"])
        code = 0 if code is None else code
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback
        traceback.print_exc()
    finally:
        if CLOUD_MARK in sys.modules and not os.path.exists(modules):
            try:
                with open(modules + ".tmp", "w") as fh:
                    json.dump(sorted(n for n in sys.modules if not n.startswith("tests")), fh)
                os.replace(modules + ".tmp", modules)
            except OSError:
                pass
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
    return code


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2])
