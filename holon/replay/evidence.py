"""Appending evidence the way the runtime does, so that the ledger still verifies.

:func:`append_evidence` checks every record as the runtime would have written it and
appends, after every ``turn_ended``, the derived records of the post-turn refresh;
:func:`state_to_append_to` is the state it appends onto.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Final

import msgspec

import holon.records as r
from holon.context.render import describe_projection, recorded_projection
from holon.errors import InvalidRecord, UsageError
from holon.ledger.frames import OVERSIZED_ADVICE
from holon.ledger.store import Ledger
from holon.projections import (
    DEFAULT_CONFIG,
    ProjectionConfig,
    ProjectionState,
    apply,
    derived_after,
    derived_before,
    fold,
    unstated_config_derives,
)
from holon.replay.config import ConfigScan, projection_config_of, state_after
from holon.replay.reading import Reader
from holon.replay.resume import Checkpoints, Resume, fold_all, from_checkpoint

__all__ = ["append_evidence", "state_to_append_to"]


def state_to_append_to(
    read: Reader,
    incoming: Sequence[r.Record],
    resume: Resume | Checkpoints | None = None,
    *,
    where: Callable[[int], str] | None = None,
) -> ProjectionState:
    """The state of the ledger ``read()`` gives, for :func:`append_evidence` to append ``incoming`` onto.

    Folded under the projection config the ledger's records state, else the one the first
    record of ``incoming`` stating one states (in a ledger that states none, appended
    prompts may be the first to record it), else the default; from ``resume``'s
    checkpoint when there is one. An incoming prompt stating another config is left to
    :func:`append_evidence`, whose refusal names that record (an input line, not the seq
    the record was decoded with). Given :class:`Checkpoints` whose newest checkpoint
    states the ledger's config (the rule of the whole-ledger reads, :func:`memory_of`) and
    ``incoming`` states none or the same, there is no first pass: only the records after
    the checkpoint are read. Otherwise every record is: whether the ledger states a config
    is for its records to say, not a checkpoint that found none.

    A ledger that states none and holds no derived record takes an incoming config only
    when its turns derive nothing under it either (as :func:`holon.Agent.open` lets such
    a ledger in): otherwise the records appended would state a config under which its
    own turns owe derived records it lacks, and it would fail verification from seq 0
    for good. That is an InvalidRecord naming the incoming record (``where(n)`` for the
    n-th, as :func:`append_evidence` names it) and where the derivations part.
    """
    stated = ConfigScan()
    stating = 0  # which incoming record (from 1) is the first to state a config
    for number, record in enumerate(incoming, 1):
        stated.see(record)
        if not stating and stated.first is not None:
            stating = number
    # The first config incoming states; a conflict or a config that does not decode after it
    # is append_evidence's to refuse, naming the record.
    wanted = stated.first[1] if stated.first is not None else None
    resumed = from_checkpoint(resume, None, settings=False)
    if resumed is not None and (wanted is None or wanted == resumed.state.config):
        return fold(resumed.rest, resumed.state)
    scan = ConfigScan()
    for record in read():
        scan.see(record)
        if scan.error is not None:
            break
    if scan.first is not None or scan.error is not None:
        return fold_all(read, scan.result(), resume)
    if wanted is None:
        return fold_all(read, DEFAULT_CONFIG, resume)
    state = fold_all(read, wanted, resume)
    # Under the default, the config it verifies under now, nothing changes; a derived record
    # stating one is append_evidence's to refuse.
    if wanted != DEFAULT_CONFIG and stated.first is not None and stated.first[2] is r.PromptRendered:
        named = where(stating) if where is not None else f"input record {stating}"
        _check_unstated(read, state, wanted, named)
    return state


def _check_unstated(read: Reader, state: ProjectionState, config: ProjectionConfig, where: str) -> None:
    """Refuse ``config``, stated by the incoming record ``where``, for a ledger that states none,
    when the ledger's turns would derive under it what the ledger lacks (see :func:`state_to_append_to`),
    by the rule :func:`holon.Agent.open` applies (:func:`~holon.projections.unstated_config_derives`)."""
    lacking = unstated_config_derives(state, config, read)
    if lacking is not None:
        raise InvalidRecord(
            f"the prompt records {describe_projection(config)}, but the ledger states no projection config "
            f"and holds no derived record, and under that config {lacking}: its turns were written under "
            "another config (or without the post-turn refresh), and with this prompt appended it would no "
            "longer verify from seq 0. Append it to a ledger written under its config, or start a new ledger",
            where=where,
            field="body.render_config.projection",
        )


def _tail_ts(ledger: Ledger) -> int:
    seq = ledger.head()[0]
    return ledger.get(seq).ts if seq >= 0 else 0


def _check_evidence(record: r.Record, folded: ProjectionState, last_ts: int, where: str) -> None:
    """Refuse an input record the runtime would never write (see :func:`append_evidence`)."""
    if record.kind in r.DERIVED_KINDS:
        raise InvalidRecord(
            f"{record.kind} is a derived record: the post-turn refresh appends it; "
            "to copy a whole ledger use `holon import --from jsonl`",
            where=where,
            field="kind",
        )
    if not r.MIN_TS <= record.ts <= r.MAX_TS:
        # The ledger's own range, checked here so the error names the input record.
        raise r.ts_out_of_range(record.ts, where=where)
    if record.ts < last_ts:
        raise InvalidRecord(
            f"ts {record.ts} is before the previous record's ts {last_ts}: timestamps never go "
            "backwards in a ledger; append (or import) records in time order",
            where=where,
            field="ts",
        )
    if record.turn is not None and record.turn < 0:
        raise InvalidRecord(f"turn {record.turn} is negative", where=where, field="turn")
    if isinstance(record.body, r.PromptRendered):
        _check_prompt(record.body, folded, where)
    _check_turn(record, folded, where)


def _check_prompt(body: r.PromptRendered, folded: ProjectionState, where: str) -> None:
    """Refuse a prompt under another projection config, or showing what the ledger has not derived."""
    if body.render_config:
        recorded = recorded_projection(body.render_config, where=where)
        if recorded is not None and recorded != folded.config:
            # The refresh would go on deriving under the folded config: the ledger would
            # then say one config and hold records derived under another.
            raise InvalidRecord(
                f"the prompt records {describe_projection(recorded)}, but the ledger is derived under "
                f"{describe_projection(folded.config)}; append it to a ledger derived under its config",
                where=where,
                field="body.render_config.projection",
            )
    if (
        body.working_memory_revision > folded.memory.revision
        or body.compression_epoch > folded.memory.compression_epoch
    ):
        # A prompt confirms the revision it showed: one claiming a revision the ledger has not
        # reached would confirm the next working-memory change before any prompt showed it, so
        # the model would never be told of it.
        raise InvalidRecord(
            f"the prompt records working-memory revision {body.working_memory_revision} and compression "
            f"epoch {body.compression_epoch}, but the ledger has reached revision {folded.memory.revision} "
            f"and epoch {folded.memory.compression_epoch}; a prompt can only show what was derived before "
            "it: fix the record's revision and epoch",
            where=where,
            field="body.working_memory_revision"
            if body.working_memory_revision > folded.memory.revision
            else "body.compression_epoch",
        )


def _check_turn(record: r.Record, folded: ProjectionState, where: str) -> None:
    """Refuse a record that opens, closes or names a turn as the runtime never would."""
    turn = folded.runtime.turn
    is_open = turn is not None and turn.open
    if isinstance(record.body, r.TurnEnded) and not is_open:
        raise InvalidRecord(
            "turn_ended with no open turn: append the turn's turn_started first", where=where, field="kind"
        )
    if isinstance(record.body, r.TurnStarted) and is_open:
        assert turn is not None
        raise InvalidRecord(
            f"turn_started while turn {turn.index} is still open: end it with a turn_ended first",
            where=where,
            field="kind",
        )
    if is_open and turn is not None and turn.index is not None and record.turn != turn.index:
        # The runtime writes every record of a turn with the turn's number. One that names
        # another turn (a number going backwards in an imported history) filed the turn's
        # message under that turn; a turn_ended under another number, or none, closed the
        # turn's episode as "turns 3-1" (or "3-None") and gave its derived records that turn.
        named = record.turn is not None or isinstance(record.body, r.TurnEnded)
        if named and not isinstance(record.body, r.TurnStarted):
            raise InvalidRecord(
                f"{record.kind} of turn {record.turn} while turn {turn.index} is open: a record of a "
                f"turn carries its number; give it turn {turn.index}",
                where=where,
                field="turn",
            )
    last = turn.index if turn is not None else None
    repeated = record.turn is not None and last is not None and record.turn <= last
    if isinstance(record.body, r.TurnStarted) and repeated:
        assert record.turn is not None and last is not None
        # The runtime numbers turns last + 1: a repeated number makes `--at-turn N` ambiguous.
        raise InvalidRecord(
            f"turn_started for turn {record.turn} after turn {last}: turn numbers only go up in "
            f"a ledger; number this turn {last + 1} or higher",
            where=where,
            field="turn",
        )


def _check_blob_ref(record: r.Record, ledger: Ledger, where: str) -> None:
    """Refuse an input output given as a reference to a blob ``ledger`` does not hold as it says.

    The ledger checks this too, naming the seq the record would get and asking a library
    caller to ``put_blob()`` first; evidence is given with its output inline (the ledger moves a
    large one to its blob store), so what to do is to give it so, or to copy the export the
    reference came from with its blobs.
    """
    body = record.body
    if not isinstance(body, r.ToolResult | r.TaskResult) or body.blob is None:
        return
    ref = body.blob
    instead = (
        "give the output itself in `output`, without `blob` (the ledger moves a large one to its blob "
        "store), or copy the whole `holon export` the record comes from, whose blobs come with it in "
        "FILE.blobs/, into a new ledger with `holon import NEW FILE --from jsonl`"
    )
    try:
        held = ledger.has_blob(ref.hash)
    except ValueError:  # InvalidRef: no blake3 hex digest
        raise InvalidRecord(
            f"blob {ref.hash!r} is no blob name (64 lowercase hex characters, a blake3 digest): {instead}",
            where=where,
            field="body.blob.hash",
        ) from None
    if not held:
        raise InvalidRecord(
            f"the output is a reference to blob {ref.hash}, which the blob store of ledger {ledger.path} "
            f"does not hold: {instead}",
            where=where,
            field="body.blob.hash",
        )
    size = ledger.blobs.size(ref.hash)
    if size != ref.size:
        raise InvalidRecord(
            f"the reference says blob {ref.hash[:16]}… holds {ref.size:,} bytes, the ledger's blob holds "
            f"{size:,}: set `size` to {size}, or {instead}",
            where=where,
            field="body.blob.size",
        )


#: What an oversized evidence record's sender can do (the ledger's advice is a library caller's).
_OVERSIZED_EVIDENCE: Final = (
    "only a tool's or task's output moves to the blob store (when it is longer than the ledger's blob "
    "threshold), no other field: shorten this record, or split its text over several records"
)


def _named_input(
    exc: InvalidRecord, numbers: dict[int, int], where: Callable[[int], str] | None
) -> InvalidRecord:
    """``exc``, raised by the ledger for the record it would give ``seq N``, naming the input record instead.

    ``numbers`` maps the seqs of input records to their numbers (from 1); a derived record's
    error keeps its seq.
    """
    found = re.match(r"seq (\d+)", exc.where or "")
    number = numbers.get(int(found.group(1))) if found is not None else None
    if number is None:
        return exc
    return InvalidRecord(
        exc.detail.replace(OVERSIZED_ADVICE, _OVERSIZED_EVIDENCE),
        where=where(number) if where is not None else f"input record {number}",
        field=exc.field,
    )


def _folded_to_head(ledger: Ledger, state: ProjectionState | None) -> ProjectionState:
    """``state``, or ``ledger`` folded when it is omitted; UsageError unless it is folded to the head."""
    # Two streaming reads rather than one held in memory: the config comes before the fold.
    folded = state if state is not None else state_after(ledger.read(), projection_config_of(ledger.read()))
    head = ledger.head()[0]
    if folded.seq != head:
        raise UsageError(
            f"append_evidence: the state is folded to seq {folded.seq} but the ledger's head is seq {head}"
        )
    return folded


def append_evidence(
    ledger: Ledger,
    records: Iterable[r.Record],
    *,
    state: ProjectionState | None = None,
    progress: Callable[[int], None] | None = None,
    where: Callable[[int], str] | None = None,
) -> list[int]:
    """Append evidence records as the runtime would; returns the seqs written.

    ``state`` must be the ledger folded so far (it is folded here when omitted). Each
    record gets the next seq; after every ``turn_ended`` the post-turn refresh runs and
    its derived records are appended right after it (and before a ``prompt_rendered``,
    the refresh the runtime runs before a prompt), and a refresh the ledger still owes
    (its writer died after a ``turn_ended``, or between the refresh's delta and its
    episode) is appended first. Derived records in
    the input are refused (they are the refresh's to write). Everything is checked and
    derived before the first byte is written: on any error nothing is appended.
    Refused as well, because the runtime never writes them and the projections would
    fold them into nonsense: a negative or out-of-range ``ts``, a ``ts`` before the
    previous record's (timestamps never go backwards in a ledger), a negative ``turn``,
    a ``turn_ended`` with no open turn, a ``turn_started`` while a turn is open and one
    whose turn number is not above the previous turn's, inside an open numbered
    turn a record naming another turn or a ``turn_ended`` without the turn's number, and
    a ``prompt_rendered`` showing a working-memory revision or compression epoch the
    ledger has not reached once the refresh before it ran (the revision a runtime's prompt shows).
    So is a ``prompt_rendered`` recording a projection config other than the one the
    ledger is derived under (``state.config``; when ``state`` is omitted, the config the
    ledger's prompts record). ``progress`` is called with the number of input records
    folded so far; ``where(n)``
    names input record ``n`` in errors (default ``input record n``; the CLI passes the
    line of the file).
    """
    folded = _folded_to_head(ledger, state)
    next_seq = folded.seq + 1
    out: list[r.Record] = []
    numbers: dict[int, int] = {}  # seq -> the input record's number, for the ledger's errors

    def put(record: r.Record, number: int | None = None) -> None:
        nonlocal folded
        stored = msgspec.structs.replace(record, seq=next_seq + len(out))
        folded = apply(folded, stored)
        if number is not None:
            numbers[stored.seq] = number
        out.append(stored)

    tail_ts = _tail_ts(ledger)
    # A writer that died after a turn_ended owes its refresh, or the rest of it.
    for derived in derived_before(folded, tail_ts=tail_ts):
        put(derived)
    for number, record in enumerate(records, 1):
        # Before a prompt, the refresh the runtime runs before it renders: the prompt shows the
        # revision that refresh reached (checked against the state before it, the prompt of a
        # turn whose evidence superseded working memory was refused though the runtime wrote
        # it). Were the prompt refused, nothing is written. Only a prompt is asked about: from
        # here on nothing is owed (each turn_ended's refresh follows it below), and asking
        # before every record re-ran each turn's refresh to find that out.
        if record.kind == r.PromptRendered.KIND:
            for derived in derived_before(folded, record.kind, tail_ts=out[-1].ts if out else tail_ts):
                put(derived)
        named = where(number) if where is not None else f"input record {number}"
        _check_evidence(record, folded, out[-1].ts if out else tail_ts, named)
        _check_blob_ref(record, ledger, named)
        put(record, number)
        for derived in derived_after(folded, out[-1]):  # after a turn_ended, its refresh
            put(derived)
        if progress is not None:
            progress(number)
    if not out:
        return []
    try:
        return ledger.append_many(out)
    except InvalidRecord as exc:
        # Refused before the first byte is written (a record that does not encode, or is too
        # large): named as the input's record, not by the seq it would have had.
        raise _named_input(exc, numbers, where) from None
