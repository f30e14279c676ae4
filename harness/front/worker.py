"""Worker process: run the items given on stdin, one JSON result line each.

Used by the fresh-mode executor (a share of the items each) and by the
pytest plugin (one shard each, usually by fork), so neither the CLI's
parent nor pytest's processes need to import Nova themselves.
"""
from __future__ import annotations

import argparse
import json
import sys


def main() -> int:
    """Run the job; anything that stops it is one line on stderr (its parent reads it
    with :func:`harness.errors.reason_of`), never only a traceback."""
    from harness.errors import EXIT_BROKEN, EXIT_USAGE, REASON_PREFIX, UsageError
    try:
        return _work()
    except UsageError as exc:
        print(f"{REASON_PREFIX}{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
              file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:
        import traceback
        traceback.print_exc()
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        print(f"{REASON_PREFIX}worker crashed: {type(exc).__name__}: {first}", file=sys.stderr)
        return EXIT_BROKEN


def _work() -> int:
    parser = argparse.ArgumentParser(prog="harness.front.worker")
    parser.add_argument("--backend", default="eventlet")
    from harness.execute.executor import MODES
    parser.add_argument("--mode", choices=MODES, default="fresh")
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args()
    from harness.cloud import nova_support
    nova_support.select_backend(args.backend)
    job = json.load(sys.stdin)
    nova_support.load_nova()
    from harness.front.console import claim_stdout, quiet
    quiet()
    from harness.execute.item import Item
    from harness.execute.executor import ITEM_TIMEOUT, strategy
    out = claim_stdout()

    def emit(record):
        out.write(json.dumps(record.to_json()) + "\n")
        out.flush()
    items = [Item.parse(text) for text in job["items"]]
    timeout = job.get("timeout", ITEM_TIMEOUT)
    strategy(args.mode).in_worker(items, job["traces"], args.jobs, args.backend, emit, timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
