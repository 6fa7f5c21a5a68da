"""Hypothesis profiles: the suite is reproducible by default, exploration is asked for.

``ci`` (the default) derandomizes every property: the same commit draws the same
examples, so `make test` and CI pass or fail alike and a failure reproduces by rerunning.
``explore`` draws fresh random examples each run (and keeps failures in .hypothesis/):
``HOLON_HYPOTHESIS=explore make pytest`` hunts for new counterexamples; pin each one
it finds with ``@example`` next to the fix.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HOLON_HYPOTHESIS", "ci"))
