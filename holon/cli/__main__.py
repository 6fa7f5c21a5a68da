"""``python -m holon.cli``: the ``holon`` command, as the console script runs it."""

from holon.cli import main

main()
