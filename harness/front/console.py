"""The CLI's console: exit codes, where results go (fd 1, kept clean of Nova's
chatter), and the steps every verb that runs Nova shares (choose the
backend, load Nova quietly, read ``--jobs``)."""
from __future__ import annotations

import os
import sys
import warnings

from harness.errors import EXIT_BROKEN, EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, UsageError  # noqa: F401


def quiet():
    """Nova's import-time chatter and teardown INFO logs (to stdout!) are noise here.

    Each run's captured log (Nova's StandardLogging fixture) is unaffected.
    """
    import logging
    warnings.filterwarnings("ignore")
    root = logging.getLogger()
    root.handlers = [logging.NullHandler()]
    root.setLevel(logging.WARNING)
    sys.excepthook = sys.__excepthook__  # oslo.log routes uncaught errors into logging


#: where results go; Nova's own chatter is sent to stderr (see load)
OUT = sys.stdout
_CLAIMED = False


def claim_stdout():
    """Keep fd 1 for our results and send everything else written there to stderr.

    Some of Nova's stack logs INFO lines straight to the process's stdout
    (outside the captured test log); the table, JSON lines and replay output
    must stay clean.
    """
    global OUT, _CLAIMED
    if _CLAIMED:  # once: a second claim would take fd 1 when it is stderr already
        return OUT
    _CLAIMED = True
    sys.stdout.flush()
    OUT = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    return OUT


def load(args):
    """Choose the backend (``--backend``, else Nova's own default for nova-compute), load Nova.

    Nova's import-time chatter (eventlet's deprecation notice, start-up INFO
    lines) is held back: shown only if loading fails.
    """
    import dataclasses
    import tempfile

    from harness.cloud import nova_support
    claim_stdout()
    if args.backend:
        why = "--backend"
    else:
        args.backend, why = nova_support.default_backend()
    nova_support.select_backend(args.backend)
    warnings.filterwarnings("ignore")
    with tempfile.TemporaryFile("w+") as held:  # fd 1 is stderr too here (claim_stdout)
        sys.stderr.flush()
        sys.stdout.flush()
        saved = {fd: os.dup(fd) for fd in (1, 2)}
        for fd in saved:
            os.dup2(held.fileno(), fd)
        try:
            info = nova_support.load_nova()
        finally:
            sys.stderr.flush()
            sys.stdout.flush()
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
    quiet()
    info = dataclasses.replace(info, why=why)
    print(info.banner(), file=sys.stderr)
    return info


def jobs(args) -> int:
    from harness.execute import executor
    try:
        return executor.jobs_value(args.jobs)
    except ValueError:
        raise UsageError(f"--jobs must be a positive integer or 'auto', got {args.jobs!r}") from None
