"""``python -m benchmarks.eval``: run the evaluation and write docs/evaluation.md."""

import sys

from benchmarks.eval import main

sys.exit(main(sys.argv[1:]))
