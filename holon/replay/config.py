"""The projection config a ledger's records were derived under, as its prompts and derived records state it.

Every fold of :mod:`holon.replay` runs under this config unless its caller names another:
:func:`projection_config_of` reads it off the records (:class:`ConfigScan`, one record at a
time, for a pass that does other work too), :func:`state_after` folds under it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final, cast

import holon.records as r
from holon.context.render import describe_projection, recorded_projection
from holon.errors import InvalidRecord
from holon.projections import DEFAULT_CONFIG, ProjectionConfig, ProjectionState, fold, stated_config

__all__ = ["projection_config_of", "state_after"]


def projection_of(
    records: Iterable[r.Record], config: ProjectionConfig | None
) -> tuple[Iterable[r.Record], ProjectionConfig]:
    """``records`` (held in a list when they must be read twice) and the config to fold them under.

    ``config`` when given, else the one the records themselves record (see
    :func:`projection_config_of`). An iterator is then held in memory to be read twice:
    to fold a long ledger in one streaming pass, pass its config.
    """
    if config is not None:
        return records, config
    held = records if isinstance(records, Sequence) else list(records)
    return held, projection_config_of(held)


def state_after(records: Iterable[r.Record], config: ProjectionConfig | None = None) -> ProjectionState:
    """The projection state after folding ``records`` in order.

    Under ``config``, or (by default) the config the records' prompts record.
    """
    records, config = projection_of(records, config)
    return fold(records, config=config)


_DERIVED: Final = frozenset({r.WorkingMemoryDelta, r.ContextEpisodeRecord})


def _stating(kind: type[r.Body]) -> str:
    """A record that states a projection config, as a message names it: ``the prompt``."""
    return "the prompt" if kind is r.PromptRendered else f"the {kind.KIND}"


class ConfigScan:
    """:func:`projection_config_of`, one record at a time, so a pass can also do other work.

    The first error is kept, not raised, so that a caller can raise it where
    :func:`projection_config_of` would have (see :meth:`result`).
    """

    def __init__(self) -> None:
        # The first record stating a config: its seq, the config, and its body type.
        self.first: tuple[int, ProjectionConfig, type[r.Body]] | None = None
        self.error: InvalidRecord | None = None

    def see(self, record: r.Record) -> None:
        if self.error is not None:
            return
        body = record.body
        kind = type(body)  # not isinstance: this runs for every record, and it is the cheaper test
        if kind is r.PromptRendered:
            prompt = cast(r.PromptRendered, body)
            if not prompt.render_config:
                return
            try:
                config = recorded_projection(prompt.render_config, where=f"seq {record.seq}")
            except InvalidRecord as exc:
                self.error = exc
                return
        elif kind in _DERIVED:
            config = stated_config(cast("r.WorkingMemoryDelta | r.ContextEpisodeRecord", body))
        else:
            return
        if config is None:
            return
        first = self.first
        if first is None:
            self.first = (record.seq, config, kind)
        elif config is not first[1] and config != first[1]:
            self.error = InvalidRecord(
                f"{_stating(kind)} records {describe_projection(config)}, but {_stating(first[2])} at seq "
                f"{first[0]} recorded {describe_projection(first[1])}: the agent's projection config changed "
                "within this ledger, so its derived records cannot be re-derived from seq 0 under "
                "either config",
                where=f"seq {record.seq}",
                field="body.render_config.projection" if kind is r.PromptRendered else "body.projection",
            )

    def result(self) -> ProjectionConfig:
        if self.error is not None:
            raise self.error
        return self.first[1] if self.first is not None else DEFAULT_CONFIG


def projection_config_of(records: Iterable[r.Record]) -> ProjectionConfig:
    """The projection config ``records`` were derived under, as their derived records and prompts state it.

    The config of the first record that states one: a delta or an episode of projection
    version 9 or later (which always states it, ``None`` being the default), or a
    ``PromptRendered`` recording one (the renderer records none for the default, and
    older ledgers record none at all); else the default. A later record stating a
    different config is an InvalidRecord naming both seqs and both configs: derived
    records under two configs cannot be re-derived from seq 0 under either one.
    """
    scan = ConfigScan()
    for record in records:
        scan.see(record)
        if scan.error is not None:
            break
    return scan.result()
