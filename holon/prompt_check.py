"""Deprecated: the prompt check moved to :mod:`holon.replay` (``holon.replay.prompts``).

``from holon.prompt_check import check_prompts`` still works for one release, with a
DeprecationWarning; import the same names from :mod:`holon.replay` instead.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from holon.replay import prompts as _prompts
from holon.replay.prompts import (
    APPENDED,
    PromptCheck,
    PromptsSummary,
    PromptStatus,
    check_prompts,
    check_prompts_of,
    shared_prefix,
)

__all__ = [
    "APPENDED",
    "PromptCheck",
    "PromptStatus",
    "PromptsSummary",
    "check_prompts",
    "check_prompts_of",
    "shared_prefix",
]

warnings.warn(
    "holon.prompt_check is deprecated: import its names from holon.replay", DeprecationWarning, stacklevel=2
)


# Not seen by type checkers: a name missing from here stays an error for them.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        """Any other name the module held (``config_from_recorded``, ``Reader``, ...), from its new home."""
        if name.startswith("__"):
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        try:
            return getattr(_prompts, name)
        except AttributeError:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
