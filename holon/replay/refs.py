"""Restoring what a placeholder promises from a ledger: its :class:`~holon.context.RefSource`."""

from __future__ import annotations

import holon.records as r
from holon.errors import RefNotFound
from holon.ledger.store import Ledger

__all__ = ["LedgerRefSource"]


class LedgerRefSource:
    """A :class:`~holon.context.RefSource` reading records, blobs and episodes from a ledger.

    Episodes are found by scanning the ledger for ``context_episode`` records once, on
    the first episode lookup.
    """

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        self._episodes: dict[int, r.ContextEpisodeRecord] | None = None

    def record(self, seq: int) -> r.Record:
        """The record at ``seq`` (RefNotFound past the head)."""
        return self._ledger.get(seq)

    def blob(self, blob_hash: str) -> bytes:
        """A blob's original bytes, verified against its hash."""
        return self._ledger.get_blob(blob_hash)

    def episode(self, episode_id: int) -> r.ContextEpisodeRecord:
        """The archived episode with this id (RefNotFound when the ledger holds none)."""
        if self._episodes is None:
            self._episodes = {
                rec.body.episode_id: rec.body
                for rec in self._ledger.read()
                if isinstance(rec.body, r.ContextEpisodeRecord)
            }
        found = self._episodes.get(episode_id)
        if found is None:
            held = len(self._episodes)
            raise RefNotFound(
                f"episode:{episode_id} is not in ledger {self._ledger.path} "
                f"({'no episodes yet' if not held else f'it holds episodes 0..{held - 1}'}); "
                "list them with `holon episodes`"
            )
        return found
