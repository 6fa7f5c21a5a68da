"""What a recorded prompt's ``render_config`` says about the projection it was rendered under.

A ``PromptRendered`` records the render config (:class:`~holon.context.RenderConfig`, the
budget, the estimator's version) and, when it is not the default, the projection config the
state was folded under: replay folds the ledger under it to re-derive the same records.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from holon.errors import InvalidRecord
from holon.projections import DEFAULT_CONFIG, ProjectionConfig

__all__ = ["projection_stated", "recorded_projection"]


def recorded_projection(render_config: dict[str, Any], *, where: str) -> ProjectionConfig | None:
    """The projection config a ``PromptRendered.render_config`` records, or ``None`` if it records none.

    The renderer records it only when it is not :data:`~holon.projections.DEFAULT_CONFIG`
    (so a ledger written before it was recorded reads the same); since render version 7
    every prompt that records none was rendered under the default (see
    :func:`projection_stated`). Raises InvalidRecord (naming ``where``) when the recorded
    value does not decode.
    """
    if "projection" not in render_config:
        return None
    try:
        return msgspec.convert(render_config["projection"], ProjectionConfig)
    except (msgspec.ValidationError, ValueError) as exc:
        raise InvalidRecord(
            f"the recorded projection config does not decode ({exc})",
            where=where,
            field="body.render_config.projection",
        ) from None


# The first render version whose prompts record every non-default projection config.
_STATES_PROJECTION: Final = 7


def projection_stated(render_config: dict[str, Any], *, where: str) -> ProjectionConfig | None:
    """The projection config a prompt was rendered under, if its ``render_config`` says so.

    Explicitly (a non-default config), or by omission from render version 7 on, which
    records every non-default config. ``None`` for a prompt rendered before (version 6
    recorded it only in its later builds, and earlier versions never) or by another
    program: its config is unknown.
    """
    recorded = recorded_projection(render_config, where=where)
    if recorded is not None:
        return recorded
    version = render_config.get("version")
    return DEFAULT_CONFIG if isinstance(version, int) and version >= _STATES_PROJECTION else None
