"""Verifying a whole ledger, the library part of ``holon verify``: its stored bytes, then its derivations.

:func:`verify_ledger` checks every frame, chain link and blob (:meth:`Ledger.verify`) and,
when those hold, replays the records up to the verified head and checks every derived record
against what this holon derives from them (:func:`~holon.projections.verify_derivations`),
under the projection config the ledger's records state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import msgspec

import holon.records as r
from holon.ledger.store import Ledger
from holon.ledger.verify import VerifyReport
from holon.projections import DEFAULT_CONFIG, ProjectionConfig, VerificationReport, verify_derivations
from holon.replay.config import projection_config_of

__all__ = ["LedgerVerification", "verify_ledger"]


class LedgerVerification(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`verify_ledger` found.

    ``storage`` is the report on the stored bytes; ``derivations`` the replay verification of
    the records up to the head it verified, ``None`` when the storage is damaged (records past
    a damaged frame cannot be read, and a chain broken before them vouches for none of them);
    ``projection`` the config they were verified under (the default when not verified).
    """

    storage: VerifyReport
    derivations: VerificationReport | None
    projection: ProjectionConfig

    @property
    def ok(self) -> bool:
        """True when the stored bytes and every derived record hold."""
        return self.storage.ok and self.derivations is not None and self.derivations.ok


def verify_ledger(
    ledger: Ledger,
    *,
    progress: Callable[[int, int], None] | None = None,
    passes: Callable[[Iterator[r.Record], int, str], Iterable[r.Record]] | None = None,
) -> LedgerVerification:
    """Verify ``ledger``'s storage and, when it holds, the derived records of its records.

    ``progress(done, total)`` is :meth:`Ledger.verify`'s, called as the files are checked;
    ``passes(records, count, label)`` is given each read of the records (``count`` of them,
    labelled ``"reading prompts"`` and ``"verifying derivations"``) and returns what to read
    instead, such as the records with a progress bar (the command line's).
    """
    storage = ledger.verify(progress=progress)
    if not storage.ok:
        return LedgerVerification(storage=storage, derivations=None, projection=DEFAULT_CONFIG)
    # A pass of its own: the config is needed before the first record is folded, and the
    # records are streamed rather than held. Both stop at the head whose storage was
    # verified: an agent appending meanwhile would have the derivations checked on records
    # the report's storage figures do not hold.
    end = storage.head[0] + 1

    def read(label: str) -> Iterable[r.Record]:
        records = ledger.read(0, end)
        return passes(records, end, label) if passes is not None else records

    projection = projection_config_of(read("reading prompts"))
    derivations = verify_derivations(read("verifying derivations"), config=projection)
    return LedgerVerification(storage=storage, derivations=derivations, projection=projection)
