"""Worker process: run the items given on stdin, one JSON result line each."""
from __future__ import annotations

import argparse
import json
import sys


def main() -> int:
    parser = argparse.ArgumentParser(prog="harness.worker")
    parser.add_argument("--backend", default="eventlet")
    args = parser.parse_args()
    from harness import nova_support
    nova_support.select_backend(args.backend)
    job = json.load(sys.stdin)
    nova_support.load_nova()
    from harness.cli import quiet
    quiet()
    from harness.campaign import Item, run_item
    out = sys.stdout
    for text in job["items"]:
        result = run_item(Item.parse(text), job["trace"])
        out.write(json.dumps(result.to_json()) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
