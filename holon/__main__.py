"""``python -m holon``: the ``holon`` command, for environments without the console script."""

from holon.cli import main

main(prog_name="holon")
