"""The commands that write to a ledger: ``holon init``, ``holon append`` and ``holon import``."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import click

from holon.cli.group import _common
from holon.cli.ledgers import _last_turn_before, _passes, _reading, _state_to_append_to, _writing
from holon.cli.printing import _count, _echo, _echo_json, _n, _printable
from holon.errors import HolonError, InvalidRecord, UsageError
from holon.importers import FORMATS, IMPORTERS
from holon.ledger import DEFAULT_BLOB_THRESHOLD, SETTING_RANGES
from holon.progress import progress_callback, progress_total

if TYPE_CHECKING:
    import holon.records as r
    from holon.importers import ImportReport
    from holon.ledger import Ledger


@click.command()
@_common
@click.option(
    "--agent-id",
    required=True,
    metavar="ID",
    help="The agent this ledger belongs to (1-256 printable characters).",
)
@click.option(
    "--blob-threshold",
    type=click.IntRange(*SETTING_RANGES["blob_threshold"]),
    default=DEFAULT_BLOB_THRESHOLD,
    show_default=True,
    metavar="BYTES",
    help="Tool and task outputs longer than this go to the blob store.",
)
def init(path: Path, as_json: bool, agent_id: str, blob_threshold: int) -> None:
    """Create an empty ledger directory at PATH for one agent.

    PATH must not exist or be an empty directory (or hold what an init killed before it
    wrote the header left there: init finishes it).

    Example: holon init runs/agent-7 --agent-id agent-7
    """
    from holon.ledger import Ledger

    with Ledger.create(path, agent_id=agent_id, blob_threshold=blob_threshold) as ledger:
        head = ledger.head()
    if as_json:
        _echo_json({"path": str(path), "agent_id": agent_id, "head_seq": head[0], "head_hash": head[1]})
    else:
        _echo(f"created ledger {path} for agent {agent_id} (empty; genesis {head[1][:16]}…)")


def _appended(
    as_json: bool, seqs: Sequence[int], records: int, extra: dict[str, Any], ledger: Ledger
) -> None:
    head = ledger.head()
    derived = len(seqs) - records
    if as_json:
        _echo_json(
            {
                **extra,
                "appended": len(seqs),
                "derived": derived,
                "first_seq": seqs[0] if seqs else None,
                "last_seq": seqs[-1] if seqs else None,
                "head_seq": head[0],
                "head_hash": head[1],
            }
        )
        return
    if not seqs:
        _echo("nothing to append: the input holds no records")
        return
    _echo(
        f"appended {_n(len(seqs))} records (seq {seqs[0]}..{seqs[-1]}), {derived} of them derived by the "
        f"post-turn refresh; head seq {head[0]} ({head[1][:16]}…)"
    )


@click.command()
@_common
@click.argument("records_file", metavar="RECORDS.jsonl", type=click.Path(path_type=Path))
def append(path: Path, as_json: bool, records_file: Path) -> None:
    """Append evidence records from a JSONL file, as the agent runtime would.

    Each line is one record in holon's canonical JSON envelope ({"seq", "ts", "turn",
    "kind", "v", "body"}); seqs are reassigned from the ledger's head. After every
    turn_ended the post-turn refresh appends its derived records (working-memory delta,
    episode), so the ledger still verifies. Derived records in the input are refused,
    and so are records the runtime never writes: timestamps going backwards, a
    turn_ended with no open turn, a turn_started inside one or with a turn number
    not above the last turn's, inside a turn a record naming another turn (or a
    turn_ended naming none), and a prompt_rendered showing a working-memory revision
    the ledger has not reached. Every line is checked first: on any error nothing is
    appended. RECORDS.jsonl `-` reads standard input.

    To copy a whole exported ledger (derived records and blobs included), use
    `holon import PATH FILE --from jsonl`.
    """
    from holon.replay import append_evidence, state_to_append_to

    records_file = _input_file(records_file, "append")
    data = _read_input(records_file, "append")
    report = IMPORTERS["jsonl"].parse_bytes(data, source=str(records_file))
    # Record n came from the n-th non-blank line: errors name that line, as decoding does.
    lines = [number for number, line in enumerate(data.split(b"\n"), 1) if line.strip()]

    def where(n: int) -> str:
        return f"line {lines[n - 1]} of {records_file}"

    with _writing(path) as ledger:
        read, resume = _passes(ledger)
        state = state_to_append_to(read, report.records, resume, where=where)
        seqs = append_evidence(ledger, report.records, state=state, where=where)
        _appended(as_json, seqs, len(report.records), {"source": str(records_file)}, ledger)


_STDIN: Final = Path("/dev/stdin")


def _input_file(path: Path, command: str) -> Path:
    """The file an input argument names: ``-`` is standard input, as for most commands.

    Read as ``/dev/stdin``, which every reader here opens like a file (``import --from
    jsonl`` then finds no ``.blobs/`` beside it). A terminal there is refused: the user
    forgot to pipe the file in, and the command would wait for typing. ``./-`` names a
    file called ``-``.
    """
    if str(path) != "-":
        return path
    if sys.stdin is None or sys.stdin.isatty():
        raise UsageError(
            f"- reads standard input, which is a terminal here: pipe or redirect the file in "
            f"(`holon {command} PATH - < FILE`), or pass its path"
        )
    return _STDIN


def _check_input(path: Path, command: str, *, directory: bool = False) -> None:
    """Refuse an input FILE that is a directory, saying so; a ledger there means swapped arguments.

    ``directory``: the format also comes as a directory (an OpenHands V1 conversation), which
    is let through unless it is a ledger.
    """
    from holon.ledger import HEADER_NAME

    if path.is_dir():
        swapped = (path / HEADER_NAME).is_file()
        if directory and not swapped:
            return
        hint = f"; it is a ledger, and the ledger comes first: holon {command} PATH FILE" if swapped else ""
        raise UsageError(f"{path} is a directory, not a file to read{hint}")


def _read_input(path: Path, command: str) -> bytes:
    _check_input(path, command)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None


@click.command(name="import")
@_common
@click.argument("file", type=click.Path(path_type=Path))
@click.option(
    "--from",
    "fmt",
    required=True,
    type=click.Choice(FORMATS),
    help="The transcript format of FILE: "
    + "; ".join(f"{i.name}: {i.description}" for i in IMPORTERS.values()),
)
@click.option(
    "--agent-id",
    metavar="ID",
    help="The agent of the ledger created when PATH does not exist yet (1-256 printable characters). "
    "Default: the transcript's session id (Claude Code's sessionId), else PATH's directory name. A holon "
    "export names no agent: give the exported ledger's, which its prompts were rendered for. For a "
    "ledger that exists, it must be that ledger's.",
)
def import_(path: Path, as_json: bool, file: Path, fmt: str, agent_id: str | None) -> None:
    """Import a transcript FILE of another agent tool (or a holon export) into the ledger at PATH.

    Other tools' transcripts are mapped to holon records (see docs/importers.md) and
    appended like `holon append`: the post-turn refresh adds the derived records after
    every turn. Run again after it was cut short (a full disk, Ctrl-C), the same command
    appends what the ledger does not hold yet, so the ledger ends as if imported in one
    go; run again after it completed, it says the transcript is imported already and
    appends nothing (exit 0; --json: "already_imported"). `--from jsonl` copies a `holon
    export` file exactly — derived records, timestamps and blobs (from FILE.blobs/) —
    into an empty ledger (to add evidence to a ledger that has records, use `holon
    append`); run again after such a copy was interrupted, it appends the records the
    ledger does not hold yet. The empty file an empty ledger exports imports as nothing
    (exit 0).

    A PATH that does not exist yet is created, a new ledger for --agent-id; should the
    import fail, it is removed again (unless records reached it before a full disk or
    Ctrl-C stopped the import: run the command again to finish it).

    The whole file is checked before anything is written: a malformed line or a file
    of another format is reported with its line, and nothing is appended. FILE `-`
    reads standard input (for `--from jsonl`, an export without blobs).

    Example: holon import runs/agent-7 session.jsonl --from claude-code
    """
    from holon.importers import read_transcript
    from holon.replay import append_evidence, imported_prefix

    file = _input_file(file, "import")
    # An OpenHands V1 conversation is a directory of event files (read_transcript joins them).
    _check_input(file, "import", directory=fmt == "openhands")
    if fmt == "jsonl":
        _import_export(path, file, as_json=as_json, agent_id=agent_id)
        return
    report = read_transcript(file, fmt)
    held = 0  # records of this import the ledger holds already (an interrupted or complete one)

    def where(n: int) -> str:
        # A refusal (a transcript older than the ledger's last record) names the file.
        return f"record {held + n} mapped from {file}"

    with _import_target(path, agent_id, report.session_id) as (ledger, created):
        state, last_turn = _state_to_append_to(ledger, report.records, where=where)
        head = ledger.head()[0]
        records = report.records

        def placed_at(seq: int) -> tuple[r.Record, ...]:
            # As a new import places them: after the record before (its ts, the turn it leaves).
            if seq == 0:
                return report.records
            return report.after(ledger.get(seq - 1).ts, last_turn=_last_turn_before(ledger, seq)).records

        continued = imported_prefix(ledger, records, placed_at)
        if continued is not None:
            # Run again after a full disk (or a kill) cut it short, or after it completed: the
            # ledger ends with its first records, placed where it started; the rest follow them.
            held, records = continued.held, continued.records[continued.held :]
        elif head >= 0:
            # An untimestamped transcript's synthetic clock starts at 0, and every transcript's
            # turns count from 0: both continue the ledger.
            records = report.after(ledger.get(head).ts, last_turn=last_turn).records
            _check_import_time(ledger, records[0], file, where(1))
        with progress_callback(len(records), "importing") as imported:
            appended = append_evidence(ledger, records, state=state, progress=imported, where=where)
        already = continued is not None and not records
        extra = _import_figures(file, fmt, report, held=held, already=already, ledger=ledger, created=created)
        if continued is not None and not records:
            _already_imported(as_json, appended, extra, ledger, first_seq=continued.first_seq)
            return
        if not as_json:
            first_seq = continued.first_seq if continued is not None else None
            lines = _import_lines(
                path, file, fmt, report, ledger=ledger, created=created, held=held, first_seq=first_seq
            )
            for line in lines:
                _echo(line)
        _appended(as_json, appended, len(records), extra, ledger)


def _import_figures(
    file: Path,
    fmt: str,
    report: ImportReport,
    *,
    held: int,
    already: bool,
    ledger: Ledger,
    created: str | None,
) -> dict[str, Any]:
    """What `holon import` says of a transcript, besides what it appended (its --json figures)."""
    return {
        "source": str(file),
        "format": fmt,
        "records": len(report.records),
        "turns": report.turns,
        "tool_calls": report.tool_calls,
        "unmatched_intents": report.unmatched_intents,
        "skipped": report.skipped,
        "synthetic_clock": report.synthetic_clock,
        "declared_tools": list(report.declared_tools),
        "continued_after": held,
        "already_imported": already,
        "agent_id": ledger.agent_id,
        "created": created is not None,
    }


def _import_lines(
    path: Path,
    file: Path,
    fmt: str,
    report: ImportReport,
    *,
    ledger: Ledger,
    created: str | None,
    held: int,
    first_seq: int | None,
) -> list[str]:
    """What `holon import` says of a transcript before what it appended: the ledger it created, what it read.

    ``first_seq``: where the interrupted import that this one continued started (None: none).
    """
    from holon.importers import SYNTHETIC_STEP_MS

    lines: list[str] = []
    if created is not None:
        lines.append(f"created ledger {path} for agent {_printable(ledger.agent_id)} ({created})")
    skipped = ", ".join(f"{k} {v}" for k, v in report.skipped.items()) or "nothing"
    lines.append(
        f"read {file} ({fmt}): {_count(len(report.records), 'record')}, "
        f"{_count(report.turns, 'turn')}, {_count(report.tool_calls, 'tool call')} "
        f"({report.unmatched_intents} without a result); "
        f"skipped: {skipped}"
    )
    if report.declared_tools:
        lines.append(
            f"declared {_count(len(report.declared_tools), 'tool')} the transcript called without "
            f"defining (by name only): {', '.join(report.declared_tools)}"
        )
    if report.synthetic_clock:
        # Otherwise nothing says so: holon stats' hours and the audit's tool and turn
        # durations read the invented clock as if it were the agent's.
        lines.append(
            f"the transcript has no timestamps: its records are {SYNTHETIC_STEP_MS:,} ms apart on a "
            "synthetic clock, so durations (holon stats, holon audit) are not real"
        )
    if first_seq is not None:
        lines.append(
            f"continued an interrupted import: the ledger held the first {_n(held)} of the "
            f"{_n(len(report.records))} records {file} maps to (from seq {first_seq})"
        )
    return lines


def _import_export(path: Path, file: Path, *, as_json: bool, agent_id: str | None) -> None:
    """`holon import --from jsonl`: copy a `holon export` file into the ledger at ``path``."""
    from holon.ledger import import_jsonl

    empty = UsageError(f"{file} is empty: there is no holon export in it to import")
    if not file.exists():
        raise UsageError(f"cannot read {file}: no such file")
    if file.is_file() and file.stat().st_size == 0:
        _import_empty_export(path, file, as_json=as_json, agent_id=agent_id)
        return
    with _import_target(path, agent_id, None) as (ledger, created):
        held = ledger.head()[0] + 1
        with progress_total("importing") as advance:
            try:
                seqs = import_jsonl(file, ledger, require_empty=True, progress=advance)
            except InvalidRecord as exc:
                raise _not_an_export(exc, file) from None
        if not seqs:  # a pipe (`... | holon import L /dev/stdin`) that held nothing
            raise empty
        if created is not None and not as_json:
            _echo(f"created ledger {path} for agent {_printable(ledger.agent_id)} ({created})")
        if held and not as_json:
            _echo(f"continued an interrupted import: the ledger held the first {_n(held)} records of {file}")
        extra = {
            "source": str(file),
            "format": "jsonl",
            "continued_after": held,
            "agent_id": ledger.agent_id,
            "created": created is not None,
        }
        _appended(as_json, seqs, len(seqs), extra, ledger)


def _valid_agent_id(agent_id: str) -> bool:
    return 0 < len(agent_id) <= 256 and agent_id.isprintable()


@contextmanager
def _import_target(
    path: Path, agent_id: str | None, session: str | None
) -> Iterator[tuple[Ledger, str | None]]:
    """The ledger at ``path`` open for writing, and where its agent id came from if it was created.

    A ``path`` that does not exist is created, for ``agent_id``, else the transcript's
    ``session`` id, else the directory's name. When the import fails and the new ledger
    holds no record, it is removed with the directories made for it: a failed import into a
    new ledger leaves nothing. One that records reached (a full disk stopped the import
    part way) is kept, for the command run again to continue.
    """
    import shutil

    if path.exists() or path.is_symlink():
        with _writing(path) as ledger:
            if agent_id is not None and agent_id != ledger.agent_id:
                held, given = _printable(ledger.agent_id), _printable(agent_id)
                raise UsageError(
                    f"ledger {path} belongs to agent {held}, not {given}: --agent-id names the agent of a "
                    "ledger the import creates; leave it out to import into this one, or give a PATH that "
                    "does not exist yet"
                )
            yield ledger, None
        return
    if agent_id is not None:
        chosen, source = agent_id, "--agent-id"
    elif session is not None:
        chosen, source = session, "the transcript's session id"
    else:
        chosen, source = path.absolute().name, "the directory's name"
    if agent_id is None and not _valid_agent_id(chosen):
        raise UsageError(
            f"cannot take the agent id of the new ledger {path} from {source} ({chosen!r}): an agent id "
            "is 1-256 printable characters; give one with --agent-id ID"
        )
    from holon.ledger import Ledger

    made = path.absolute()
    while not made.parent.exists():
        made = made.parent
    ledger = Ledger.create(path, agent_id=chosen)
    try:
        yield ledger, f"its agent id from {source}"
    except BaseException:
        try:
            unwritten = ledger.head()[0] < 0
        finally:
            ledger.close()
        if unwritten:
            shutil.rmtree(made, ignore_errors=True)
        raise
    ledger.close()


def _check_import_time(ledger: Ledger, first: r.Record, file: Path, where: str) -> None:
    """Refuse a transcript that starts before the ledger's last record, saying why and what to do."""
    head = ledger.head()[0]
    last_ts = ledger.get(head).ts
    if first.ts < last_ts:
        raise InvalidRecord(
            f"{file} starts at ts {first.ts}, before the ledger's last record (seq {head}, ts {last_ts}): "
            "a ledger's timestamps never go backwards, so a transcript imports only after what the ledger "
            "holds, and the ledger does not end with an earlier import of this transcript that could be "
            "continued; import transcripts in time order, or into a new ledger",
            where=where,
            field="ts",
        )


def _already_imported(
    as_json: bool, appended: Sequence[int], extra: dict[str, Any], ledger: Ledger, *, first_seq: int
) -> None:
    """Say that a transcript is imported already (exit 0); ``appended``: the refresh it still owed."""
    if as_json:
        _appended(as_json, appended, 0, extra, ledger)
        return
    records = _n(extra["records"])
    imported = f"{extra['source']} is imported already: the ledger holds all {records} records it maps to"
    if not appended:
        _echo(f"{imported} (from seq {first_seq}); nothing appended")
        return
    _echo(
        f"{imported} (from seq {first_seq}); appended the {_count(len(appended), 'derived record')} of the "
        f"post-turn refresh its last turn still owed (seq {appended[0]}..{appended[-1]})"
    )


#: The largest file ``_not_an_export`` tries each importer on: a wrong --from on a file of
#: gigabytes should fail at once, not after parsing it with every importer.
_TRY_IMPORTERS_MAX: Final = 256 << 20


def _not_an_export(exc: InvalidRecord, file: Path) -> InvalidRecord:
    """``exc``, naming the transcript format ``file`` reads as when its first line is no holon record.

    A first line that is not a record is most often another tool's transcript given to
    ``--from jsonl`` (a `.traj`, a Claude Code session): "the record was cut off (a partly
    copied file?)" sent the user looking for damage. Each importer is tried (only on this
    error path); the message names the one that reads the file, or lists them all.
    """
    from holon.importers import read_transcript

    if exc.where is None or not exc.where.startswith("line 1 of") or not file.is_file():
        return exc  # a pipe was read once: it cannot be tried again
    readable = []
    tried = () if file.stat().st_size > _TRY_IMPORTERS_MAX else FORMATS
    for fmt in tried:
        if fmt == "jsonl":
            continue
        try:
            report = read_transcript(file, fmt)
        except (HolonError, OSError):
            continue
        if report.records:
            readable.append(fmt)
    detail = exc.detail
    if len(readable) == 1:
        return InvalidRecord(
            f"{file} is not a holon export, but it reads with --from {readable[0]}: import it with "
            f"--from {readable[0]} (read as a holon record: {detail})",
            where=exc.where,
        )
    others = ", ".join(f for f in FORMATS if f != "jsonl")
    return InvalidRecord(
        f"{detail}; {file} is not a holon export: if it is another tool's transcript, import it with "
        f"--from {others} (docs/importers.md)",
        where=exc.where,
    )


def _import_empty_export(path: Path, file: Path, *, as_json: bool, agent_id: str | None) -> None:
    """Import an empty JSONL file: the export of an empty ledger, so into an empty ledger a no-op.

    The ledger is only read (nothing to write, no lock to take). Into a ledger that holds
    records it is refused, as any copy of an export is; a pipe that brought nothing is
    refused by the caller (a command before it that failed, not an export). A ``path`` that
    does not exist becomes the empty ledger (for ``agent_id``, else the directory's name).
    """
    if not (path.exists() or path.is_symlink()):
        with _import_target(path, agent_id, None) as (ledger, created):
            extra = {"source": str(file), "format": "jsonl", "continued_after": 0}
            extra |= {"agent_id": ledger.agent_id, "created": True}
            if as_json:
                _appended(as_json, [], 0, extra, ledger)
            else:
                _echo(
                    f"imported 0 records: {file} is empty, the export of an empty ledger; created {path}, an "
                    f"empty ledger for agent {_printable(ledger.agent_id)} ({created})"
                )
        return
    with _reading(path) as ledger:
        head = ledger.head()[0]
        if head >= 0:
            raise UsageError(
                f"{file} is empty: there is no holon export in it to import (an empty file is the export of "
                f"an empty ledger, and {path} holds records up to seq {head})"
            )
        if as_json:
            _appended(as_json, [], 0, {"source": str(file), "format": "jsonl", "continued_after": 0}, ledger)
        else:
            _echo(f"imported 0 records: {file} is empty, the export of an empty ledger; {path} stays empty")
