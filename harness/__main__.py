import sys

from harness.front.cli import main

sys.exit(main())
