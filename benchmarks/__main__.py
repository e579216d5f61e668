"""``python -m benchmarks``: run every scenario and write ``benchmarks/results/``."""

import sys

from .run import main

sys.exit(main())
