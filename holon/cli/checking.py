"""Whether a ledger is intact: ``holon verify`` (storage and derivations) and ``holon repair``
(cutting a damaged tail off the active segment).
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from holon.cli.failures import _Corrupt
from holon.cli.group import _common
from holon.cli.ledgers import _reading
from holon.cli.printing import _count, _echo, _echo_json, _n, _report
from holon.cli.replaying import _diff_lines, _diverged
from holon.errors import HolonError, LedgerCorrupt
from holon.progress import progress_items, progress_total

if TYPE_CHECKING:
    import holon.records as r
    from holon.ledger import DamagedTail, VerifyReport
    from holon.projections import ProjectionConfig, VerificationReport


@click.command()
@_common
def verify(path: Path, as_json: bool) -> None:
    """Check the whole ledger: frames, hash chain, blobs, and derived records.

    Every frame checksum and chain link, every referenced blob's hash, and replay
    verification of every derived record. Exit code 0 only if all hold: 3 when stored
    bytes are damaged (each problem is listed with its file and byte offset), 1 when
    the bytes are intact but a derived record differs from what this holon derives.
    A torn tail (bytes after the last valid frame, as a crash mid-append leaves them)
    is a warning, not a failure: the next open for writing cuts it.

    Example: holon verify runs/agent-7
    """
    report, check, projection = _verified(path)
    # Where the damage is a cut of the active tail, say so: that one has a repair.
    damaged = None if report.ok else _damaged_tail_of(path)
    with _report():
        if as_json:
            _echo_json(_verify_json(report, check, damaged))
        else:
            for line in (*_storage_lines(path, report, damaged), *_derivation_lines(check)):
                _echo(line)
    for warning in report.warnings:
        _echo(f"holon: warning: {warning}", err=True)
    if not report.ok:
        first = report.problems[0]
        raise _Corrupt(
            f"ledger {path} is corrupt: {len(report.problems)} problem(s); first: {first}",
            error_type=LedgerCorrupt.__name__,
        )
    if check is not None and not check.ok:
        raise _diverged(check, projection)


def _verified(path: Path) -> tuple[VerifyReport, VerificationReport | None, ProjectionConfig]:
    """The checks of `holon verify` (:func:`holon.replay.verify_ledger`), with progress bars.

    Returns the storage report, the derivations' (None when the storage failed, as they
    are not checked on damaged bytes) and the projection config they were folded under.
    """
    from holon.replay import verify_ledger

    with _reading(path) as ledger, contextlib.ExitStack() as storage_bar:
        advance = storage_bar.enter_context(progress_total("verifying storage"))

        def passes(records: Iterator[r.Record], count: int, label: str) -> Iterable[r.Record]:
            storage_bar.close()  # the storage's bar ends where the reads of the records begin
            return progress_items(records, length=count, label=label)

        found = verify_ledger(ledger, progress=advance, passes=passes)
    return found.storage, found.derivations, found.projection


def _verify_json(
    report: VerifyReport, check: VerificationReport | None, damaged: DamagedTail | None
) -> dict[str, Any]:
    """What `holon verify --json` prints: the verdict, every finding, and each check's report."""
    tail = report.torn_tail
    return {
        "ok": report.ok and check is not None and check.ok,
        "findings": _verify_findings(report, check),
        "storage": {
            "ok": report.ok,
            "records_checked": report.records_checked,
            "blobs_checked": report.blobs_checked,
            "head_seq": report.head[0],
            "head_hash": report.head[1],
            "problems": [
                {
                    "file": p.file,
                    "offset": p.offset,
                    "decompressed": p.decompressed,
                    "message": p.message,
                }
                for p in report.problems
            ],
            "torn_tail": None
            if tail is None
            else {
                "file": tail.file,
                "offset": tail.offset,
                "bytes": tail.length,
                "reason": tail.reason,
            },
            "warnings": report.warnings,
            "ts_out_of_range": None
            if not report.ts_out_of_range_count
            else {
                "count": report.ts_out_of_range_count,
                "examples": [{"seq": seq, "ts": ts} for seq, ts in report.ts_out_of_range],
            },
            "damaged_tail": damaged,
        },
        "derivations": check,
    }


def _storage_lines(path: Path, report: VerifyReport, damaged: DamagedTail | None) -> list[str]:
    """The storage part of `holon verify`'s text: frames, chain and blobs, or what is damaged."""
    import holon.records as r

    lines: list[str] = []
    if report.ok:
        seq, digest = report.head
        head = f"head seq {seq} ({digest[:16]}…)" if seq >= 0 else f"empty (genesis {digest[:16]}…)"
        lines.append(f"frames and chain  ok · {_n(report.records_checked)} records · {head}")
        lines.append(f"blobs             ok · {_n(report.blobs_checked)} checked")
    else:
        lines.append(f"storage           {len(report.problems)} problem(s):")
        lines.extend(f"  {p}" for p in report.problems)
        seq, digest = report.head
        lines.append(
            f"verified          {_seq_span(0, seq)} (head {digest[:16]}…): a chain from seq 0, "
            "every frame and link checked"
            if seq >= 0
            else "verified          no record: the first problem comes before seq 0 checks out"
        )
        if damaged is not None and damaged.header:
            lines.append(
                f"repair            the active segment {damaged.file} is shorter than its header: "
                f"`holon repair {_shell_path(path)}` shows how to give it a new one"
            )
        elif damaged is not None:
            lines.append(
                f"repair            the damage at byte {damaged.offset} of {damaged.file} is in the "
                f"active segment's tail: `holon repair {_shell_path(path)}` shows what cutting it "
                "there loses"
            )
    tail = report.torn_tail
    if tail is not None:
        size = "1 byte" if tail.length == 1 else f"{_n(tail.length)} bytes"
        lines.append(
            f"torn tail         {size} after the last valid frame (byte {tail.offset} of "
            f"{tail.file}): what a crash mid-append leaves; opening for writing cuts them"
        )
    if report.ts_out_of_range_count:
        first_seq = report.ts_out_of_range[0][0]
        lines.append(
            f"record times      {_n(report.ts_out_of_range_count)} record(s) hold a ts outside "
            f"{r.MIN_TS}..{r.MAX_TS}, the first at seq {first_seq}: written before appends "
            "checked it (see the warning)"
        )
    return lines


def _derivation_lines(check: VerificationReport | None) -> list[str]:
    """The derivations part of `holon verify`'s text: ok, the first divergence, or not checked."""
    if check is None:
        return ["derivations       not checked (the stored bytes must verify first)"]
    if check.ok:
        # The writer stopped between a turn_ended and its derived records: no divergence,
        # the runtime appends them on resume (as replay --check says).
        pending = ""
        if check.pending_refresh:
            pending = " · the last turn's refresh is still to be appended"
        return [
            f"derivations       ok · {check.refreshes} post-turn refreshes re-run · "
            f"{check.derived_checked} derived records equal{pending}"
        ]
    assert check.divergence is not None
    divergence = check.divergence
    return [
        f"derivations       FAILED at seq {divergence.seq}: {divergence.describe()}",
        *_diff_lines(check.divergence),
    ]


def _verify_findings(report: VerifyReport, check: VerificationReport | None) -> list[dict[str, Any]]:
    """Every finding of `holon verify`, one shape for all: what a script acts on.

    ``severity`` is ``error`` for what fails the command (exit 3 for storage, 1 for a
    derivation) and ``warning`` for what does not (exit 0); ``kind`` says which check
    found it; ``file``, ``offset`` (``decompressed``: into a sealed segment's
    decompressed bytes) and ``seq`` locate it where known, else null; ``message`` is the
    text the report prints.
    """

    def finding(
        severity: str,
        kind: str,
        message: str,
        *,
        file: str | None = None,
        offset: int | None = None,
        decompressed: bool = False,
        seq: int | None = None,
    ) -> dict[str, Any]:
        return {
            "severity": severity,
            "kind": kind,
            "file": file,
            "offset": offset,
            "decompressed": decompressed,
            "seq": seq,
            "message": message,
        }

    out = [
        finding("error", "storage", p.message, file=p.file, offset=p.offset, decompressed=p.decompressed)
        for p in report.problems
    ]
    tail, torn = report.torn_tail, report.torn_tail_warning
    if tail is not None and torn is not None:
        out.append(finding("warning", "torn_tail", torn, file=tail.file, offset=tail.offset))
    odd_ts = report.ts_warning
    if odd_ts is not None:
        out.append(finding("warning", "ts_out_of_range", odd_ts, seq=report.ts_out_of_range[0][0]))
    out += [
        finding(
            "warning",
            "ignored_file",
            "not a blob: its name starts with a dot, as a file manager's files do (.DS_Store); holon "
            "never writes such a name, and verify skipped it",
            file=ignored,
        )
        for ignored in report.ignored
    ]
    if check is not None and check.divergence is not None:
        divergence = check.divergence
        out.append(finding("error", "derivation", divergence.describe(), seq=divergence.seq))
    return out


def _shell_path(path: Path) -> str:
    return shlex.quote(str(path))


def _damaged_tail_of(path: Path) -> DamagedTail | None:
    """The damaged active tail `holon repair` would cut, if that is where damage is."""
    from holon.ledger import inspect_tail

    try:
        return inspect_tail(path)
    except HolonError:  # damage a cut cannot repair: verify has listed it already
        return None


def _seq_span(first: int, last: int) -> str:
    return f"seq {first}" if first == last else f"seqs {first}-{last}"


def _header_repair_lines(path: Path, found: DamagedTail) -> list[str]:
    """What `holon repair` shows for an active segment shorter than its header."""
    return [
        f"damaged segment   {found.file}: {_n(found.length)} bytes, shorter than its segment header",
        "holds             no record (a segment's records follow its header); holon writes a header "
        "whole, so a copy tool or a full disk cut this file",
        f"lost              records from seq {found.first_seq} on, if the segment held any, went with its "
        "bytes: if the ledger is a copy, copy it again from its source (or a backup) instead",
        f"to repair         holon repair {_shell_path(path)} --cut-at 0  (writes a new header, committing "
        f"to {f'seq {found.first_seq - 1}' if found.first_seq else 'the genesis hash'}; the bytes are kept "
        "in the ledger's cut/ directory)",
    ]


@click.command()
@_common
@click.option(
    "--cut-at",
    "cut_at",
    type=click.IntRange(min=0),
    metavar="OFFSET",
    help="Cut the active segment at this byte, where the damage starts (as shown without it).",
)
def repair(path: Path, as_json: bool, cut_at: int | None) -> None:
    """Cut a damaged tail off the active segment (after a power loss under fsync batch/never).

    Opening refuses an active segment whose damaged frame has intact frames after it:
    a power loss can write the unsynced tail back out of order, but only you know
    whether those records were acknowledged. Without --cut-at, nothing is changed: it
    shows where the damage starts and which seqs a cut there loses, and exits 3 (the
    ledger is corrupt until cut; 0 when there is nothing to cut). With --cut-at OFFSET
    (that byte), it checks everything an open for writing checks, keeps the bytes it
    cuts in PATH/cut/, truncates, and exits 0. Damage anywhere else is not a cut
    (`holon verify` lists it).

    Example: holon repair runs/agent-7 --cut-at 964
    """
    from holon.ledger import cut_tail, inspect_tail

    found = inspect_tail(path)
    if cut_at is None:
        _show_damaged_tail(path, found, as_json)
        if found is not None:
            what = "an active segment shorter than its header" if found.header else "a damaged tail"
            raise _Corrupt(
                f"ledger {path} has {what} (nothing was changed); cut it with "
                f"`holon repair {_shell_path(path)} --cut-at {found.offset}`",
                error_type=LedgerCorrupt.__name__,
            )
        return
    action = cut_tail(path, cut_at)
    assert found is not None  # cut_tail refuses an offset where inspect_tail found nothing
    with _report():
        if as_json:
            # seqs: the first and last the cut lost; none for a header (the file held no record).
            _echo_json({"cut": action, "seqs": [] if found.header else [found.first_seq, found.last_seq]})
        elif found.header:
            _echo(f"new header        {action.file} ({_n(action.bytes_cut)} bytes it held cut)")
            _echo(f"kept in           {action.kept}")
            _echo(f"next seq          {found.first_seq}")
        else:
            _echo(
                f"cut               {_n(action.bytes_cut)} bytes at byte {action.offset} of {action.file} "
                f"({_seq_span(found.first_seq, found.last_seq)})"
            )
            _echo(f"kept in           {action.kept}")
            _echo(f"next seq          {found.first_seq}")


def _show_damaged_tail(path: Path, found: DamagedTail | None, as_json: bool) -> None:
    with _report():
        if as_json:
            _echo_json({"damaged_tail": found, "cut_at": None if found is None else found.offset})
            return
        if found is None:
            _echo(
                "nothing to cut: the active segment's frames are valid to its end or to a torn tail "
                "(which any open for writing cuts); `holon verify` checks the rest"
            )
            return
        if found.header:
            for line in _header_repair_lines(path, found):
                _echo(line)
            return
        after = found.later_seqs
        _echo(f"damaged frame     {found.file} at byte {found.offset}: {found.damage}")
        _echo(
            f"after it          {_n(found.length)} bytes to the end of the file; "
            + (
                f"{_count(len(after), 'intact frame')} ({_seq_span(after[0], after[-1])})"
                if after
                else "no intact frame found"
            )
        )
        _echo(
            f"a cut loses       {_seq_span(found.first_seq, found.last_seq)}. After a power loss under "
            f'fsync "batch" or "never", none was acknowledged if your last flush() returned before '
            f"seq {found.first_seq} was appended; otherwise acknowledged records were damaged"
        )
        _echo(
            f"to cut            holon repair {_shell_path(path)} --cut-at {found.offset}"
            "  (the bytes cut are kept in the ledger's cut/ directory)"
        )
