"""`holon init`, `append`, `import` and `export`: input checked first, nothing appended on error."""

from __future__ import annotations

import errno
import json
import logging
import os
import pty
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest

import holon.ledger.writer
from holon import records as r
from holon.cli import EXIT_OK, EXIT_USAGE, main
from holon.importers import read_transcript
from holon.ledger import Ledger
from holon.projections import ProjectionConfig
from holon.runtime import Agent, AgentConfig
from holon.search import MemorySearch
from tests.cli_support import (
    LEDGERS,
    build_ledger,
    checkpoint_at_head,
    fixture_names,
    invoke,
    live_records,
    tree_bytes,
    write_jsonl,
)
from tests.ledger_support import AGENT, child_env, message
from tests.live import replay_live
from tests.runtime_support import Tick, ledger_records, prompted_turns

IMPORTERS = Path(__file__).resolve().parent.parent / "fixtures" / "importers"

VALID = [
    ("claude-code", "session.jsonl"),
    ("openai-chat", "conversation.json"),
    ("openai-chat", "tau-bench-runs.json"),
    ("swe-agent", "function-calling.traj"),
    ("swe-agent", "thought-action.traj"),
    ("openhands", "events.json"),
    ("openhands", "runs.jsonl"),
]
MALFORMED = [
    ("claude-code", "malformed.jsonl", "line 3 of"),
    ("claude-code", "wrong-shape.jsonl", "line 2 of"),
    ("openhands", "malformed.jsonl", "line 2 of"),
    ("jsonl", "malformed.jsonl", "line 3 of"),
    ("openai-chat", "wrong-shape.json", "tool_call_id"),
    ("swe-agent", "no-history.traj", "no `history`"),
]


def _init(path: Path, agent: str = "a1") -> Path:
    result = invoke("init", path, "--agent-id", agent)
    assert result.exit_code == 0, result.stderr
    return path


def _kinds(path: Path) -> list[str]:
    with Ledger.open(path, readonly=True) as ledger:
        return [rec.kind for rec in ledger.read()]


def test_init_creates_an_empty_ledger(tmp_path: Path) -> None:
    result = invoke("init", tmp_path / "L", "--agent-id", "agent-7", "--json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc["agent_id"] == "agent-7" and doc["head_seq"] == -1
    with Ledger.open(tmp_path / "L", readonly=True) as ledger:
        assert ledger.agent_id == "agent-7" and ledger.head()[0] == -1
    again = invoke("init", tmp_path / "L", "--agent-id", "agent-7")
    assert again.exit_code == 2 and "not an empty directory" in again.stderr


@pytest.mark.parametrize(("fmt", "name"), VALID)
def test_import_appends_a_ledger_that_verifies(fmt: str, name: str, tmp_path: Path) -> None:
    source = IMPORTERS / fmt / name
    ledger = _init(tmp_path / "L")
    result = invoke("import", ledger, source, "--from", fmt, "--json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    imported = read_transcript(source, fmt).records
    kinds = _kinds(ledger)
    evidence = [k for k in kinds if k not in r.DERIVED_KINDS]
    assert evidence == [rec.kind for rec in imported if rec.kind not in r.DERIVED_KINDS]
    assert doc["appended"] == len(kinds) and doc["head_seq"] == len(kinds) - 1
    if fmt != "jsonl":
        assert doc["turns"] == kinds.count("turn_started")
        assert doc["derived"] == sum(k in r.DERIVED_KINDS for k in kinds)
    verified = invoke("verify", ledger)
    assert verified.exit_code == 0, verified.stdout
    assert invoke("replay", ledger, "--check").exit_code == 0


@pytest.mark.parametrize(("fmt", "name", "where"), MALFORMED)
def test_a_malformed_or_foreign_file_appends_nothing(fmt: str, name: str, where: str, tmp_path: Path) -> None:
    ledger = _init(tmp_path / "L")
    session = IMPORTERS / "claude-code" / "session.jsonl"
    assert invoke("import", ledger, session, "--from", "claude-code").exit_code == 0
    before = tree_bytes(ledger)
    result = invoke("import", ledger, IMPORTERS / fmt / name, "--from", fmt)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr
    assert name in lines[0] and where in lines[0]
    assert tree_bytes(ledger) == before


def test_import_with_the_wrong_format_names_the_file_and_the_flag(tmp_path: Path) -> None:
    ledger = _init(tmp_path / "L")
    before = tree_bytes(ledger)
    trajectory = IMPORTERS / "swe-agent" / "function-calling.traj"
    result = invoke("import", ledger, trajectory, "--from", "claude-code")
    assert result.exit_code == 2
    assert "function-calling.traj" in result.stderr and "--from claude-code" in result.stderr
    assert tree_bytes(ledger) == before
    missing = invoke("import", ledger, tmp_path / "nope.jsonl", "--from", "openhands")
    assert missing.exit_code == 2 and "cannot read" in missing.stderr


def test_append_runs_the_post_turn_refresh(tmp_path: Path) -> None:
    evidence = [rec for rec in live_records("boundary_result_checkpoint") if rec.kind not in r.DERIVED_KINDS]
    source = write_jsonl(tmp_path / "in.jsonl", evidence)
    ledger = _init(tmp_path / "L", "boundary_result_checkpoint")
    result = invoke("append", ledger, source)
    assert result.exit_code == 0, result.stderr
    assert "derived by the post-turn refresh" in result.stdout
    with Ledger.open(ledger, readonly=True) as opened:
        stored = list(opened.read())
    # Appended as the live runtime would: exactly the records of the live fixture (compared
    # in their stored form, which is what a ledger holds).
    assert [r.encode_json_record(rec) for rec in stored] == [
        r.encode_json_record(rec) for rec in live_records("boundary_result_checkpoint")
    ]
    assert invoke("verify", ledger).exit_code == 0


@pytest.mark.parametrize("name", fixture_names())
def test_every_fixture_ledger_loads_with_its_documented_command_and_replay_checks(
    name: str, tmp_path: Path
) -> None:
    # docs/cli.md: a file holding derived records is a `holon export`, copied with `holon import
    # --from jsonl`; evidence alone (a fixture: what a daemon appends) goes in with `holon append`,
    # which runs the refresh. session_multi_work and boundary_wait_boundary loaded with neither:
    # append refused their prompts (the revision the refresh before them reached, checked against
    # the state before it), and the copy holds no derived record, so `replay --check` failed.
    source = LEDGERS / f"{name}.jsonl"
    records = [r.decode_json_record(line) for line in source.read_bytes().splitlines()]
    ledger = _init(tmp_path / "L", name)
    exported = any(rec.kind in r.DERIVED_KINDS for rec in records)
    command = ("import", ledger, source, "--from", "jsonl") if exported else ("append", ledger, source)
    loaded = invoke(*command)
    assert loaded.exit_code == 0, loaded.stderr
    with Ledger.open(ledger, readonly=True) as opened:
        stored = [r.encode_json_record(rec) for rec in opened.read()]
    # The records the live runtime wrote for the fixture, derived ones included.
    assert stored == [r.encode_json_record(rec) for rec in replay_live(records).records]
    checked = invoke("replay", ledger, "--check")
    assert checked.exit_code == 0, checked.stdout + checked.stderr
    assert invoke("verify", ledger).exit_code == 0


@pytest.mark.parametrize("name", fixture_names())
def test_append_of_a_live_ledgers_evidence_gives_back_the_live_ledger(name: str, tmp_path: Path) -> None:
    # With its real prompts: each shows the revision the refresh before it reached.
    evidence = [rec for rec in live_records(name) if rec.kind not in r.DERIVED_KINDS]
    ledger = _init(tmp_path / "L", name)
    result = invoke("append", ledger, write_jsonl(tmp_path / "in.jsonl", evidence))
    assert result.exit_code == 0, result.stderr
    with Ledger.open(ledger, readonly=True) as opened:
        stored = [r.encode_json_record(rec) for rec in opened.read()]
    assert stored == [r.encode_json_record(rec) for rec in live_records(name)]


def test_append_refuses_derived_records_and_malformed_lines(tmp_path: Path) -> None:
    ledger = _init(tmp_path / "L")
    before = tree_bytes(ledger)
    derived = write_jsonl(tmp_path / "d.jsonl", live_records("boundary_result_checkpoint"))
    result = invoke("append", ledger, derived)
    assert result.exit_code == 2
    assert "working_memory_delta is a derived record" in result.stderr
    lines = (tmp_path / "d.jsonl").read_bytes().splitlines()
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"\n".join([lines[0], lines[1], b'{"seq": 2, "ts": 1, "turn": null, "kind": "message"}']))
    result = invoke("append", ledger, bad)
    assert result.exit_code == 2
    assert "line 3 of" in result.stderr and str(bad) in result.stderr
    assert tree_bytes(ledger) == before


def _turn(index: int, ts: int) -> list[r.Record]:
    return [
        r.Record(body=r.TurnStarted(trigger="user", input=f"go {index}"), ts=ts, turn=index),
        r.Record(body=r.Message(role="user", text=f"go {index}"), ts=ts + 1, turn=index),
        r.Record(body=r.TurnEnded(outcome="completed"), ts=ts + 2, turn=index),
    ]


@pytest.mark.parametrize(
    ("records", "says"),
    [
        (
            [*_turn(1, 100), *_turn(2, 50)],
            "line 4 of {file}, field `ts`: ts 50 is before the previous record's ts 102",
        ),
        (
            [r.Record(body=r.Message(role="user", text="x"), ts=-5)],
            "line 1 of {file}, field `ts`: ts -5 is out of range",
        ),
        (
            [*_turn(1, 1)[:2], *_turn(2, 5)],
            "line 3 of {file}, field `kind`: turn_started while turn 1 is still open",
        ),
        (_turn(1, 1)[2:], "line 1 of {file}, field `kind`: turn_ended with no open turn"),
        (
            [r.Record(body=r.Message(role="user", text="x"), ts=1, turn=-3)],
            "line 1 of {file}, field `turn`: turn -3",
        ),
    ],
    ids=["ts-backwards", "ts-negative", "turn-inside-turn", "end-without-start", "turn-negative"],
)
def test_append_refuses_what_the_runtime_never_writes(
    records: list[r.Record], says: str, tmp_path: Path
) -> None:
    ledger = _init(tmp_path / "L")
    before = tree_bytes(ledger)
    file = write_jsonl(tmp_path / "in.jsonl", records)
    result = invoke("append", ledger, file)
    assert result.exit_code == 2
    assert says.format(file=file) in result.stderr
    assert tree_bytes(ledger) == before


def test_a_derived_record_is_named_by_its_line(tmp_path: Path) -> None:
    ledger = _init(tmp_path / "L")
    records = list(live_records("boundary_result_checkpoint"))
    index = next(i for i, rec in enumerate(records) if rec.kind in r.DERIVED_KINDS)
    file = write_jsonl(tmp_path / "in.jsonl", records)
    result = invoke("append", ledger, file)
    assert f"line {index + 1} of {file}, field `kind`" in result.stderr


def _result(output: str = "", blob: r.BlobRef | None = None) -> list[r.Record]:
    """A turn whose tool result holds ``output`` or refers to ``blob``."""
    return [
        r.Record(body=r.TurnStarted(trigger="user", input="go"), ts=1, turn=0),
        r.Record(body=r.ToolIntent(call_id="c1", tool="bash", args={}), ts=2, turn=0),
        r.Record(
            body=r.ToolResult(call_id="c1", tool="bash", status="ok", output=output, blob=blob), ts=3, turn=0
        ),
        r.Record(body=r.TurnEnded(outcome="completed"), ts=4, turn=0),
    ]


@pytest.mark.parametrize(
    ("blob", "field", "says"),
    [
        (r.BlobRef(hash="a" * 64, size=5), "body.blob.hash", "which the blob store of ledger"),
        (r.BlobRef(hash="Z" * 64, size=5), "body.blob.hash", "is no blob name"),
    ],
    ids=["not-held", "malformed"],
)
def test_append_names_the_line_of_a_blob_reference_the_ledger_does_not_hold(
    blob: r.BlobRef, field: str, says: str, tmp_path: Path
) -> None:
    # It said "invalid record at seq 2" (the seq the record would get) and told the user of a
    # command line to "store the bytes with put_blob() first"; import --from jsonl names the line.
    ledger = _init(tmp_path / "L")
    before = tree_bytes(ledger)
    file = write_jsonl(tmp_path / "in.jsonl", _result(blob=blob))
    result = invoke("append", ledger, file)
    assert result.exit_code == 2
    assert f"invalid record at line 3 of {file}, field `{field}`: " in result.stderr
    assert says in result.stderr
    assert "`holon import NEW FILE --from jsonl`" in result.stderr and "without `blob`" in result.stderr
    assert "put_blob" not in result.stderr and "seq" not in result.stderr
    assert tree_bytes(ledger) == before


def test_append_names_the_line_of_a_blob_reference_of_the_wrong_size(tmp_path: Path) -> None:
    ledger = _init(tmp_path / "L")
    output = "x" * 20_000  # beyond the blob threshold: the ledger stores it as a blob
    assert invoke("append", ledger, write_jsonl(tmp_path / "a.jsonl", _result(output))).exit_code == 0
    with Ledger.open(ledger, readonly=True) as opened:
        ref = next(rec.body.blob for rec in opened.read() if isinstance(rec.body, r.ToolResult))
    assert ref is not None
    before = tree_bytes(ledger)
    wrong = msgspec.structs.replace(ref, size=ref.size + 1)
    records = [msgspec.structs.replace(rec, ts=rec.ts + 10, turn=1) for rec in _result(blob=wrong)]
    file = write_jsonl(tmp_path / "b.jsonl", records)
    result = invoke("append", ledger, file)
    assert result.exit_code == 2
    assert f"invalid record at line 3 of {file}, field `body.blob.size`: " in result.stderr
    assert f"holds {wrong.size:,} bytes, the ledger's blob holds {ref.size:,}: set `size` to {ref.size}," in (
        result.stderr
    )
    assert "put_blob" not in result.stderr and "seq" not in result.stderr
    assert tree_bytes(ledger) == before
    # The reference as the ledger holds it is taken.
    right = [msgspec.structs.replace(rec, ts=rec.ts + 10, turn=1) for rec in _result(blob=ref)]
    assert invoke("append", ledger, write_jsonl(tmp_path / "c.jsonl", right)).exit_code == 0


def test_a_record_too_large_is_named_by_its_input_line_or_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The ledger's check, after the input's: it named "seq 2" and asked for Ledger.put_blob.
    monkeypatch.setattr(holon.ledger.writer, "MAX_PAYLOAD", 2_000)
    ledger = _init(tmp_path / "L")
    before = tree_bytes(ledger)
    records = _result()
    records[1] = msgspec.structs.replace(
        records[1], body=r.ToolIntent(call_id="c1", tool="bash", args={"command": "y" * 3_000})
    )
    file = write_jsonl(tmp_path / "in.jsonl", records)
    result = invoke("append", ledger, file)
    assert result.exit_code == 2
    assert f"invalid record at line 2 of {file}: record is " in result.stderr
    assert "only a tool's or task's output moves to the blob store" in result.stderr
    assert "put_blob" not in result.stderr and "seq" not in result.stderr
    assert tree_bytes(ledger) == before
    # holon import names the record of the transcript (a format without lines): its turn_started,
    # whose input is the message's text (record 2: the first marks the run's session).
    transcript = tmp_path / "chat.json"
    transcript.write_text(json.dumps([{"role": "user", "content": "z" * 3_000}]))
    result = invoke("import", ledger, transcript, "--from", "openai-chat")
    assert result.exit_code == 2
    assert f"invalid record at record 2 mapped from {transcript}: record is " in result.stderr
    assert "put_blob" not in result.stderr
    assert tree_bytes(ledger) == before


def test_export_then_import_jsonl_round_trips_with_blobs(tmp_path: Path) -> None:
    evidence = [rec for rec in live_records("boundary_turn_cap") if rec.kind not in r.DERIVED_KINDS]
    big = r.Record(
        body=r.ToolResult(call_id="c-big", tool="bash", status="ok", output="x" * 10_000),
        ts=evidence[-1].ts + 1,
        turn=None,
    )
    source = _init(tmp_path / "A", "boundary_turn_cap")
    assert invoke("append", source, write_jsonl(tmp_path / "in.jsonl", [*evidence, big])).exit_code == 0
    out = tmp_path / "out.jsonl"
    result = invoke("export", source, out, "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["records"] == len(_kinds(source))
    assert len(list((tmp_path / "out.jsonl.blobs").iterdir())) == 1
    target = _init(tmp_path / "B", "boundary_turn_cap")
    assert invoke("import", target, out, "--from", "jsonl").exit_code == 0
    with Ledger.open(source, readonly=True) as a, Ledger.open(target, readonly=True) as b:
        assert list(a.read()) == list(b.read())
        assert a.head() == b.head()
    restored = invoke("get", target, f"ledger:{len(_kinds(target)) - 1}")
    assert restored.stdout_bytes == b"x" * 10_000


def test_export_parquet_writes_audit_tables(tmp_path: Path) -> None:
    ledger = build_ledger(tmp_path / "L", "boundary_wait_boundary")
    result = invoke("export", ledger, tmp_path / "pq", "--format", "parquet", "--json")
    assert result.exit_code == 0, result.stderr
    files = [Path(f) for f in json.loads(result.stdout)["files"]]
    assert files and all(f.exists() and f.suffix == ".parquet" for f in files)
    assert any("records" in f.parts for f in files)


def test_export_parquet_again_needs_overwrite_and_says_so(tmp_path: Path) -> None:
    ledger = build_ledger(tmp_path / "L", "boundary_wait_boundary")
    out = tmp_path / "pq"
    assert invoke("export", ledger, out, "--format", "parquet").exit_code == 0
    before = tree_bytes(out)
    again = invoke("export", ledger, out, "--format", "parquet")
    assert again.exit_code == 2
    (line,) = again.stderr.strip().splitlines()
    assert line.startswith("holon: error:") and "already holds these agents' tables" in line
    assert "--overwrite" in line
    assert tree_bytes(out) == before
    replaced = invoke("export", ledger, out, "--format", "parquet", "--overwrite", "--json")
    assert replaced.exit_code == 0, replaced.stderr
    files = [Path(f) for f in json.loads(replaced.stdout)["files"]]
    assert files and all(f.exists() for f in files)


def test_export_parquet_incremental_adds_what_the_ledger_appended(tmp_path: Path) -> None:
    ledger = build_ledger(tmp_path / "L", "boundary_wait_boundary")
    out = tmp_path / "pq"
    assert invoke("export", ledger, out, "--format", "parquet").exit_code == 0
    same = invoke("export", ledger, out, "--format", "parquet", "--incremental", "--json")
    assert same.exit_code == 0, same.stderr
    assert json.loads(same.stdout)["files"] == []  # nothing new, nothing written
    with Ledger.open(ledger, fsync="never") as led:
        last = led.get(led.head()[0])
        led.append(r.Record(body=r.Message(role="user", text="one more"), ts=last.ts))  # the same day
    grown = invoke("export", ledger, out, "--format", "parquet", "--incremental", "--json")
    assert grown.exit_code == 0, grown.stderr
    parts = {Path(f).relative_to(out).parts[0] for f in json.loads(grown.stdout)["files"]}
    assert parts == {"agents", "records", "messages"}
    both = invoke("export", ledger, out, "--format", "parquet", "--incremental", "--overwrite")
    assert both.exit_code == 2 and "exclude each other" in both.stderr
    jsonl = invoke("export", ledger, tmp_path / "x.jsonl", "--incremental")
    assert jsonl.exit_code == 2 and "--incremental is for --format parquet" in jsonl.stderr


def test_export_of_a_missing_ledger_writes_nothing(tmp_path: Path) -> None:
    result = invoke("export", tmp_path / "nope", tmp_path / "out.jsonl")
    assert result.exit_code == 2
    assert not (tmp_path / "out.jsonl").exists()
    result = invoke("export", tmp_path / "nope", tmp_path / "pq", "--format", "parquet")
    assert result.exit_code == 2
    assert not (tmp_path / "pq").exists()


def test_import_summary_counts_in_words(tmp_path: Path) -> None:
    # A one-turn trajectory reads "1 turn", not "1 turns"; the replay header agrees.
    source = IMPORTERS / "swe-agent" / "function-calling.traj"
    turns = sum(rec.kind == "turn_started" for rec in read_transcript(source, "swe-agent").records)
    assert turns == 1
    ledger = _init(tmp_path / "L")
    result = invoke("import", ledger, source, "--from", "swe-agent")
    assert result.exit_code == 0, result.stderr
    assert ", 1 turn, " in result.stdout
    assert " · 1 turn · " in invoke("replay", ledger).stdout


# Not jsonl: an empty file is the export of an empty ledger, which imports into an empty
# ledger as nothing (test_an_empty_ledger_round_trips_through_export_and_import); into a
# ledger with records it is refused.
@pytest.mark.parametrize("fmt", ["claude-code", "openai-chat", "swe-agent", "openhands"])
def test_an_empty_file_is_refused_the_same_way_in_every_format(fmt: str, tmp_path: Path) -> None:
    target = _init(tmp_path / "L")
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    before = tree_bytes(target)
    result = invoke("import", target, empty, "--from", fmt)
    assert result.exit_code == 2
    assert f"{empty} is empty: there is no" in result.stderr
    assert tree_bytes(target) == before


@pytest.mark.parametrize("fmt", ["openai-chat", "openhands"])
def test_a_transcript_with_no_conversation_is_refused(fmt: str, tmp_path: Path) -> None:
    target = _init(tmp_path / "L")
    nothing = tmp_path / "nothing.json"
    nothing.write_text("[]")
    result = invoke("import", target, nothing, "--from", fmt)
    assert result.exit_code == 2
    assert f"{nothing} holds no {fmt} conversation" in result.stderr


@pytest.mark.parametrize(
    "command",
    [["import", "--from", "jsonl"], ["import", "--from", "claude-code"], ["append"]],
    ids=["import-jsonl", "import-claude-code", "append"],
)
def test_swapped_arguments_are_named_and_write_nothing(tmp_path: Path, command: list[str]) -> None:
    ledger = _init(tmp_path / "L")
    records = write_jsonl(tmp_path / "in.jsonl", [r.Record(body=r.Message(role="user", text="hi"), ts=0)])
    before = tree_bytes(tmp_path)
    result = invoke(*command, records, ledger)  # FILE before PATH
    assert result.exit_code == 2
    assert f"{ledger} is a directory, not a file to read; it is a ledger, and the ledger comes first" in (
        result.stderr
    )
    assert tree_bytes(tmp_path) == before and not (tmp_path / "in.jsonl.blobs").exists()
    # A directory that is not a ledger is named as a directory, without the hint.
    result = invoke(*command, ledger, tmp_path)
    assert result.exit_code == 2 and result.stderr.strip().endswith("is a directory, not a file to read")


def test_an_openhands_v1_conversation_directory_imports(tmp_path: Path) -> None:
    # Before: refused as "is a directory, not a file to read", though read_transcript reads it.
    conversation = IMPORTERS / "openhands" / "v1-conversation"
    target = _init(tmp_path / "L")
    result = invoke("import", target, conversation, "--from", "openhands", "--json")
    assert result.exit_code == 0, result.stderr
    expected = read_transcript(conversation, "openhands")
    assert json.loads(result.stdout)["records"] == len(expected.records)
    with Ledger.open(target, readonly=True) as ledger:
        inputs = [rec.body.input for rec in ledger.read() if isinstance(rec.body, r.TurnStarted)]
    assert inputs == ["List the files."]
    # A ledger given as the conversation is still named as swapped arguments, with nothing written.
    before = tree_bytes(tmp_path)
    result = invoke("import", conversation, target, "--from", "openhands")
    assert result.exit_code == 2
    assert "it is a ledger, and the ledger comes first" in result.stderr
    assert tree_bytes(tmp_path) == before
    # Another format still wants a file.
    result = invoke("import", target, conversation, "--from", "openai-chat")
    assert result.exit_code == 2 and "is a directory, not a file to read" in result.stderr


# ---------------------------------------------------------------- an import cut short, run again

CONTINUED = [*VALID, ("openhands", "v1-conversation")]


def _stored(path: Path) -> list[bytes]:
    with Ledger.open(path, readonly=True) as ledger:
        return [r.encode_json_record(rec) for rec in ledger.read()]


def _disk_full_after(monkeypatch: pytest.MonkeyPatch, durable: int, *, torn: bool = False) -> None:
    """The next batch the ledger appends reaches the disk for its first ``durable`` records only.

    Then the write fails as a full disk fails it (ENOSPC); ``torn``: half of the next record's
    frame reached the disk too, which the next open cuts.
    """
    real = Ledger.append_many

    def append_many(self: Ledger, records: Iterable[r.Record]) -> list[int]:
        batch = list(records)
        real(self, batch[:durable])
        self.flush()
        if torn:
            segment = max((self.path / "segments").iterdir())
            with segment.open("ab") as file:
                file.write(b"\x40\x00\x00\x00\xbf\xff\xff\xff" + b"\x00" * 12)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Ledger, "append_many", append_many)


def _prior_for(fmt: str, name: str) -> tuple[str, str]:
    """Another transcript imported first, with a synthetic clock (older than any real one)."""
    other = ("swe-agent", "thought-action.traj")
    return ("openai-chat", "conversation.json") if (fmt, name) == other else other


def _cuts(records: Sequence[bytes], start: int) -> list[int]:
    """Where to cut the import of ``records[start:]``: its ends, its middle, and around each refresh."""
    batch = [r.decode_json_record(line) for line in records[start:]]
    cuts = {0, 1, len(batch) // 2, len(batch) - 1, len(batch)}
    for i, rec in enumerate(batch):
        if isinstance(rec.body, r.TurnEnded):
            cuts.update((i + 1, i + 2))  # owing the whole refresh, or its episode only
    return sorted(c for c in cuts if 0 <= c <= len(batch))


@pytest.mark.parametrize("prior", [False, True], ids=["empty-ledger", "after-another"])
@pytest.mark.parametrize(("fmt", "name"), CONTINUED)
def test_an_import_cut_short_by_a_full_disk_completes_when_run_again(
    fmt: str, name: str, prior: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Run again after space was freed, it was refused: "ts … is before the previous record's ts …
    # timestamps never go backwards" (a timestamped transcript), or "turn_started while turn 0 is
    # still open" (a synthetic clock, placed after the records it had appended itself).
    source = IMPORTERS / fmt / name
    before = _prior_for(fmt, name) if prior else None

    def fresh(path: Path) -> Path:
        _init(path)
        if before is not None:
            other, file = before
            assert invoke("import", path, IMPORTERS / other / file, "--from", other).exit_code == 0
        return path

    whole = fresh(tmp_path / "whole")
    start = len(_stored(whole))
    assert invoke("import", whole, source, "--from", fmt).exit_code == 0
    expected = _stored(whole)
    for cut in _cuts(expected, start):
        ledger = fresh(tmp_path / f"cut{cut}")
        with monkeypatch.context() as patch:
            _disk_full_after(patch, cut, torn=cut % 2 == 1)
            failed = invoke("import", ledger, source, "--from", fmt)
        assert failed.exit_code == 74, failed.stderr
        assert "no space left on the device" in failed.stderr
        again = invoke("import", ledger, source, "--from", fmt, "--json")
        assert again.exit_code == 0, (cut, again.stderr)
        doc = json.loads(again.stdout)
        held = [r.decode_json_record(line) for line in expected[start : start + cut]]
        assert doc["continued_after"] == sum(rec.kind not in r.DERIVED_KINDS for rec in held)
        assert _stored(ledger) == expected, cut  # as if imported in one go
        # Complete now: said so, exit 0, nothing appended.
        files = tree_bytes(ledger)
        done = invoke("import", ledger, source, "--from", fmt, "--json")
        assert done.exit_code == 0, done.stderr
        doc = json.loads(done.stdout)
        assert doc["already_imported"] is True and doc["appended"] == 0
        assert doc["continued_after"] == doc["records"] == len(read_transcript(source, fmt).records)
        assert tree_bytes(ledger) == files
    checked = invoke("replay", tmp_path / f"cut{cut}", "--check")
    assert checked.exit_code == 0, checked.stdout
    assert invoke("verify", tmp_path / f"cut{cut}").exit_code == 0


def _claude_session(path: Path, timestamp: str, text: str) -> Path:
    event = {
        "type": "user",
        "uuid": "e1",
        "parentUuid": None,
        "sessionId": "s2",
        "cwd": "/repo",
        "timestamp": timestamp,
        "message": {"role": "user", "content": text},
    }
    path.write_text(json.dumps(event) + "\n")
    return path


def test_another_transcript_older_than_the_ledger_is_refused_saying_why(tmp_path: Path) -> None:
    ledger = _init(tmp_path / "L")
    session = IMPORTERS / "claude-code" / "session.jsonl"
    assert invoke("import", ledger, session, "--from", "claude-code").exit_code == 0
    files = tree_bytes(ledger)
    older = _claude_session(tmp_path / "older.jsonl", "2025-02-01T00:00:00Z", "an older session")
    result = invoke("import", ledger, older, "--from", "claude-code")
    assert result.exit_code == 2
    says = f"invalid record at record 1 mapped from {older}, field `ts`: {older} starts at ts "
    assert says in result.stderr
    assert "does not end with an earlier import of this transcript" in result.stderr
    assert "import transcripts in time order, or into a new ledger" in result.stderr
    assert tree_bytes(ledger) == files
    # A newer one follows the ledger's records, as before.
    newer = _claude_session(tmp_path / "newer.jsonl", "2025-04-01T00:00:00Z", "a later session")
    doc = json.loads(invoke("import", ledger, newer, "--from", "claude-code", "--json").stdout)
    assert doc["continued_after"] == 0 and doc["already_imported"] is False and doc["appended"] > 0


def test_a_transcript_the_ledger_holds_but_does_not_end_with_is_not_taken_for_imported(
    tmp_path: Path,
) -> None:
    # Only the records the ledger ends with continue an import: after others, the transcript is a new
    # import, refused here for its time (a synthetic clock would follow the ledger's records instead).
    ledger = _init(tmp_path / "L")
    session = IMPORTERS / "claude-code" / "session.jsonl"
    assert invoke("import", ledger, session, "--from", "claude-code").exit_code == 0
    newer = _claude_session(tmp_path / "newer.jsonl", "2025-04-01T00:00:00Z", "a later session")
    assert invoke("import", ledger, newer, "--from", "claude-code").exit_code == 0
    files = tree_bytes(ledger)
    result = invoke("import", ledger, session, "--from", "claude-code")
    assert result.exit_code == 2 and "does not end with an earlier import" in result.stderr
    assert tree_bytes(ledger) == files
    chat = IMPORTERS / "openai-chat" / "conversation.json"
    assert invoke("import", ledger, chat, "--from", "openai-chat").exit_code == 0
    held = len(_stored(ledger))
    assert invoke("import", ledger, newer, "--from", "claude-code").exit_code == 2
    again = json.loads(invoke("import", ledger, chat, "--from", "openai-chat", "--json").stdout)
    assert again["already_imported"] is True and len(_stored(ledger)) == held


def test_an_import_after_an_unnumbered_turn_is_continued_where_it_was_placed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The last turn names no number: the import followed the highest turn a record names (5), and
    # so must the run that continues it, from the records before the import's first one.
    prior = [
        r.Record(body=r.TurnStarted(trigger="user_message", input="a"), ts=1, turn=5),
        r.Record(body=r.TurnEnded(outcome="completed"), ts=2, turn=5),
        r.Record(body=r.TurnStarted(trigger="timer", input=None), ts=3, turn=None),
        r.Record(body=r.TurnEnded(outcome="completed"), ts=4, turn=None),
    ]
    source = IMPORTERS / "openai-chat" / "tau-bench-runs.json"

    def fresh(path: Path) -> Path:
        _init(path)
        assert invoke("append", path, write_jsonl(tmp_path / "prior.jsonl", prior)).exit_code == 0
        return path

    whole = fresh(tmp_path / "whole")
    start = len(_stored(whole))
    assert invoke("import", whole, source, "--from", "openai-chat").exit_code == 0
    expected = _stored(whole)
    # The import's first turn follows turn 5 (its first record marks the run's session, before it).
    first_turn = next(t for line in expected[start:] if (t := r.decode_json_record(line).turn) is not None)
    assert first_turn == 6
    for cut in _cuts(expected, start):
        ledger = fresh(tmp_path / f"cut{cut}")
        with monkeypatch.context() as patch:
            _disk_full_after(patch, cut)
            assert invoke("import", ledger, source, "--from", "openai-chat").exit_code == 74
        again = invoke("import", ledger, source, "--from", "openai-chat")
        assert again.exit_code == 0, again.stderr
        assert _stored(ledger) == expected, cut


def test_an_import_whose_outputs_went_to_the_blob_store_is_continued(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The ledger holds a large output as a blob reference: compared with the transcript's text by
    # the hash of its bytes, not taken for another record.
    function = {"name": "bash", "arguments": '{"command": "cat log"}'}
    call = {"id": "c1", "type": "function", "function": function}
    chat = [
        {"role": "user", "content": "read the log"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "line\n" * 20_000},
        {"role": "assistant", "content": "read it"},
        {"role": "user", "content": "thanks"},
        {"role": "assistant", "content": "welcome"},
    ]
    source = tmp_path / "chat.json"
    source.write_text(json.dumps(chat))
    whole = _init(tmp_path / "whole")
    assert invoke("import", whole, source, "--from", "openai-chat").exit_code == 0
    expected = _stored(whole)
    results = [r.decode_json_record(line) for line in expected]
    at = next(i for i, rec in enumerate(results) if isinstance(rec.body, r.ToolResult))
    assert results[at].body.blob is not None  # type: ignore[union-attr]
    for cut in (at + 1, len(expected)):
        ledger = _init(tmp_path / f"cut{cut}")
        with monkeypatch.context() as patch:
            _disk_full_after(patch, cut)
            assert invoke("import", ledger, source, "--from", "openai-chat").exit_code == 74
        again = json.loads(invoke("import", ledger, source, "--from", "openai-chat", "--json").stdout)
        assert again["continued_after"] == sum(rec.kind not in r.DERIVED_KINDS for rec in results[:cut])
        assert _stored(ledger) == expected
    # An output that differs is another record: the ledger ends with no prefix of the edited file,
    # which is a new import, refused inside the interrupted one's open turn.
    chat[2]["content"] = "line\n" * 19_999 + "LINE\n"
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(chat))
    ledger = _init(tmp_path / "edited")
    with monkeypatch.context() as patch:
        _disk_full_after(patch, at + 1)
        assert invoke("import", ledger, source, "--from", "openai-chat").exit_code == 74
    files = tree_bytes(ledger)
    refused = invoke("import", ledger, edited, "--from", "openai-chat")
    assert refused.exit_code == 2 and "turn_started while turn 0 is still open" in refused.stderr
    assert tree_bytes(ledger) == files


# ---------------------------------------------------------------- holon import into a new ledger


def _head(path: Path) -> tuple[int, str]:
    with Ledger.open(path, readonly=True) as ledger:
        return ledger.head()


def _agent(path: Path) -> str:
    with Ledger.open(path, readonly=True) as ledger:
        return ledger.agent_id


def test_import_into_a_path_that_does_not_exist_creates_the_ledger(tmp_path: Path) -> None:
    # It failed asking for `holon init` first.
    session = IMPORTERS / "claude-code" / "session.jsonl"
    target = tmp_path / "runs" / "new"
    result = invoke("import", target, session, "--from", "claude-code", "--json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["created"] is True and doc["agent_id"] == "s1"  # the session's id
    # The ledger `holon init` with that id and the import would have made, chain and all.
    reference = _init(tmp_path / "ref", "s1")
    assert invoke("import", reference, session, "--from", "claude-code").exit_code == 0
    assert _stored(target) == _stored(reference) and _head(target) == _head(reference)
    assert invoke("verify", target).exit_code == 0
    # A format with no session id: the directory's name, unless --agent-id says.
    chat = IMPORTERS / "openai-chat" / "conversation.json"
    text = invoke("import", tmp_path / "agent-7", chat, "--from", "openai-chat")
    assert text.exit_code == 0, text.stderr
    assert text.stdout.startswith(
        f"created ledger {tmp_path / 'agent-7'} for agent agent-7 (its agent id from the directory's name)\n"
    )
    assert _agent(tmp_path / "agent-7") == "agent-7"
    assert invoke("import", tmp_path / "x", chat, "--from", "openai-chat", "--agent-id", "bot").exit_code == 0
    assert _agent(tmp_path / "x") == "bot"
    # Into a ledger that exists, --agent-id must be its own.
    files = tree_bytes(target)
    other = invoke("import", target, chat, "--from", "openai-chat", "--agent-id", "bot")
    assert other.exit_code == 2 and "belongs to agent s1, not bot" in other.stderr
    assert tree_bytes(target) == files
    assert invoke("import", target, chat, "--from", "openai-chat", "--agent-id", "s1").exit_code == 0


def test_a_holon_export_copies_into_a_new_ledger_for_the_agent_given(tmp_path: Path) -> None:
    source = build_ledger(tmp_path / "src", "boundary_turn_cap")
    out = tmp_path / "x.jsonl"
    assert invoke("export", source, out).exit_code == 0
    copy = tmp_path / "copy"
    result = invoke("import", copy, out, "--from", "jsonl", "--agent-id", "boundary_turn_cap")
    assert result.exit_code == 0, result.stderr
    assert _stored(copy) == _stored(source) and _head(copy) == _head(source)
    assert invoke("replay", copy, "--check").exit_code == 0
    # The export of an empty ledger makes an empty one.
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert invoke("import", tmp_path / "e", empty, "--from", "jsonl").exit_code == 0
    assert _head(tmp_path / "e")[0] == -1 and _agent(tmp_path / "e") == "e"


@pytest.mark.parametrize(
    ("fmt", "name"),
    [("openai-chat", "malformed.json"), ("claude-code", "wrong-shape.jsonl"), ("jsonl", "malformed.jsonl")],
)
def test_an_import_into_a_new_ledger_that_fails_on_bad_input_leaves_nothing(
    fmt: str, name: str, tmp_path: Path
) -> None:
    target = tmp_path / "made" / "for" / "it"
    result = invoke("import", target, IMPORTERS / fmt / name, "--from", fmt)
    assert result.exit_code == 2
    assert not (tmp_path / "made").exists()


def test_a_refusal_after_the_new_ledger_was_made_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Refused by the ledger once it was created (the record of a turn too large to store).
    monkeypatch.setattr(holon.ledger.writer, "MAX_PAYLOAD", 2_000)
    transcript = tmp_path / "chat.json"
    transcript.write_text(json.dumps([{"role": "user", "content": "z" * 3_000}]))
    result = invoke("import", tmp_path / "made" / "L", transcript, "--from", "openai-chat")
    assert result.exit_code == 2 and "record is " in result.stderr
    assert not (tmp_path / "made").exists()
    # An agent id the directory's name cannot give is refused before anything is made.
    tabbed = tmp_path / "a\tb"
    chat = IMPORTERS / "openai-chat" / "conversation.json"
    refused = invoke("import", tabbed, chat, "--from", "openai-chat")
    assert refused.exit_code == 2 and "give one with --agent-id ID" in refused.stderr
    assert not tabbed.exists()


def test_a_new_ledger_a_full_disk_stopped_is_kept_when_records_reached_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = IMPORTERS / "claude-code" / "session.jsonl"
    with monkeypatch.context() as patch:
        _disk_full_after(patch, 0)
        assert invoke("import", tmp_path / "none", session, "--from", "claude-code").exit_code == 74
    assert not (tmp_path / "none").exists()  # nothing reached it: as if never made
    with monkeypatch.context() as patch:
        _disk_full_after(patch, 9)
        assert invoke("import", tmp_path / "part", session, "--from", "claude-code").exit_code == 74
    assert _head(tmp_path / "part")[0] == 8
    assert invoke("import", tmp_path / "part", session, "--from", "claude-code").exit_code == 0
    whole = tmp_path / "whole"
    assert invoke("import", whole, session, "--from", "claude-code").exit_code == 0
    assert _stored(tmp_path / "part") == _stored(whole) and _head(tmp_path / "part") == _head(whole)


# --------------------------------------------------------------------------- import from a pipe


def _holon_with_stdin(data: bytes, *args: str | Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "holon.cli", *map(str, args)],
        input=data,
        capture_output=True,
        env=child_env(),
        check=False,
        timeout=120,
    )


def test_import_jsonl_reads_an_export_from_a_pipe(tmp_path: Path) -> None:
    # `zcat run.jsonl.gz | holon import L /dev/stdin --from jsonl` said "cannot read /dev/stdin:
    # no such file": the check wanted a regular file, though every other format reads a pipe.
    source = build_ledger(tmp_path / "S", "boundary_turn_cap")
    export = tmp_path / "run.jsonl"
    assert invoke("export", source, export).exit_code == 0
    target = tmp_path / "T"
    assert invoke("init", target, "--agent-id", "boundary_turn_cap").exit_code == 0
    done = _holon_with_stdin(export.read_bytes(), "import", target, "/dev/stdin", "--from", "jsonl")
    assert done.returncode == 0, done.stderr
    with Ledger.open(source, readonly=True) as a, Ledger.open(target, readonly=True) as b:
        assert a.head() == b.head()
    # A pipe holding nothing is refused like an empty file, and writes nothing.
    empty = tmp_path / "E"
    assert invoke("init", empty, "--agent-id", "e").exit_code == 0
    done = _holon_with_stdin(b"", "import", empty, "/dev/stdin", "--from", "jsonl")
    assert done.returncode == 2
    assert done.stderr.decode().strip() == (
        "holon: error: /dev/stdin is empty: there is no holon export in it to import"
    )
    with Ledger.open(empty, readonly=True) as ledger:
        assert ledger.head()[0] == -1


# --------------------------------------------------------------------------- `-` for standard input


def test_dash_reads_standard_input_for_append_and_import(tmp_path: Path) -> None:
    # `zcat run.jsonl.gz | holon append L -` said "cannot read -: No such file or directory":
    # the input file was only ever a path (and a file named "-" in the working directory
    # was read instead, when there was one).
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "a").exit_code == EXIT_OK
    records = write_jsonl(tmp_path / "in.jsonl", _turn(1, 10)).read_bytes()
    done = _holon_with_stdin(records, "append", ledger, "-")
    assert done.returncode == EXIT_OK, done.stderr
    chat = IMPORTERS / "openai-chat" / "tau-bench-runs.json"
    done = _holon_with_stdin(chat.read_bytes(), "import", ledger, "-", "--from", "openai-chat")
    assert done.returncode == EXIT_OK, done.stderr
    with Ledger.open(ledger, readonly=True) as opened:
        inputs = [rec.body.input for rec in opened.read() if isinstance(rec.body, r.TurnStarted)]
    assert inputs == ["go 1", "Change my seat.", "Book a flight."]
    # A bad line is named in standard input, and nothing is appended.
    done = _holon_with_stdin(b"not json\n", "append", ledger, "-")
    assert done.returncode == EXIT_USAGE
    assert done.stderr.decode().startswith("holon: error: invalid record at line 1 of /dev/stdin")


def test_dash_on_a_terminal_is_refused_not_a_wait(tmp_path: Path) -> None:
    # Nothing piped in: rather than wait for typing, say what `-` means.
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "a").exit_code == EXIT_OK
    controller, terminal = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "holon", "append", str(ledger), "-"],
            stdin=terminal,
            capture_output=True,
            env=child_env(),
            check=False,
            timeout=120,
        )
    finally:
        os.close(terminal)
        os.close(controller)
    assert done.returncode == EXIT_USAGE
    assert done.stderr.decode().strip() == (
        "holon: error: - reads standard input, which is a terminal here: pipe or redirect the file in "
        "(`holon append PATH - < FILE`), or pass its path"
    )


# --------------------------------------------------------------------------- importing several transcripts


def test_a_second_transcript_imported_into_a_ledger_continues_its_turn_numbers(tmp_path: Path) -> None:
    # Every import counted its turns from 0 again: two sessions imported into one agent's
    # ledger both had a turn 0, and `--at-turn 0` could only ever reach the first one.
    importers = Path(__file__).resolve().parent.parent / "fixtures" / "importers"
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "a").exit_code == 0
    first = importers / "openai-chat" / "tau-bench-runs.json"
    second = importers / "swe-agent" / "thought-action.traj"
    assert invoke("import", ledger, first, "--from", "openai-chat").exit_code == 0
    result = invoke("import", ledger, second, "--from", "swe-agent")
    assert result.exit_code == 0, result.stderr
    with Ledger.open(ledger, readonly=True) as opened:
        started = [(rec.turn, rec.body.input) for rec in opened.read() if isinstance(rec.body, r.TurnStarted)]
    turns = [turn for turn, _ in started]
    assert turns == list(range(len(turns))) and len(turns) == 3
    last_turn, last_input = started[-1]
    assert last_input is not None and last_input.startswith("ISSUE:")
    rendered = invoke("render", ledger, "--at-turn", str(last_turn))
    assert rendered.exit_code == 0, rendered.stderr
    assert last_input.encode() in rendered.stdout_bytes
    assert invoke("verify", ledger).exit_code == 0


def test_append_refuses_a_turn_number_that_does_not_go_up(tmp_path: Path) -> None:
    # The runtime numbers each turn one above the last. `holon append` took a second batch
    # numbered from 1 again: the ledger then held two turn 1s and `--at-turn 1` found only one.
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "a").exit_code == 0
    first = write_jsonl(tmp_path / "one.jsonl", [*_turn(1, 10), *_turn(2, 20)])
    assert invoke("append", ledger, first).exit_code == 0
    with Ledger.open(ledger, readonly=True) as opened:
        head = opened.head()
    again = write_jsonl(tmp_path / "again.jsonl", [*_turn(3, 30), *_turn(2, 40)])
    result = invoke("append", ledger, again)
    assert result.exit_code == 2
    assert (
        f"line 4 of {again}, field `turn`: turn_started for turn 2 after turn 3: turn numbers only go up"
        in result.stderr
    )
    with Ledger.open(ledger, readonly=True) as opened:
        assert opened.head() == head  # nothing appended
    assert invoke("append", ledger, write_jsonl(tmp_path / "next.jsonl", _turn(3, 30))).exit_code == 0


# --------------------------------------------------------------------------- export and import


def test_an_empty_ledger_round_trips_through_export_and_import(tmp_path: Path) -> None:
    # The export of an empty ledger is an empty file, which import refused as "empty".
    source, copy = tmp_path / "E", tmp_path / "C"
    assert invoke("init", source, "--agent-id", "a").exit_code == EXIT_OK
    assert invoke("export", source, tmp_path / "e.jsonl").exit_code == EXIT_OK
    assert invoke("init", copy, "--agent-id", "a").exit_code == EXIT_OK
    before = tree_bytes(copy)
    text = invoke("import", copy, tmp_path / "e.jsonl", "--from", "jsonl")
    assert text.exit_code == EXIT_OK, text.stderr
    assert "0 records" in text.stdout
    as_json = invoke("import", copy, tmp_path / "e.jsonl", "--from", "jsonl", "--json")
    assert as_json.exit_code == EXIT_OK, as_json.stderr
    assert json.loads(as_json.stdout)["appended"] == 0
    assert tree_bytes(copy) == before
    with Ledger.open(source, readonly=True) as a, Ledger.open(copy, readonly=True) as b:
        assert a.head() == b.head()


def test_an_empty_file_into_a_ledger_with_records_is_still_refused(tmp_path: Path) -> None:
    ledger = tmp_path / "L"
    with Ledger.create(ledger, agent_id=AGENT) as held:
        held.append(message(0))
    (tmp_path / "e.jsonl").write_bytes(b"")
    before = tree_bytes(ledger)
    result = invoke("import", ledger, tmp_path / "e.jsonl", "--from", "jsonl")
    assert result.exit_code == EXIT_USAGE
    assert "is empty" in result.stderr
    assert tree_bytes(ledger) == before


# --------------------------------------------------------------------------- append from a checkpoint
# `holon append` takes the ledger's projection config from its newest verified checkpoint,
# as the whole-ledger reads do, instead of reading every record first; an incoming prompt
# stating another config is refused naming its input line.


FIXTURE = "session_multi_work"
SHORT = ProjectionConfig(turn_cap=2)


def _next_turn(path: Path, turn_offset: int = 1) -> list[r.Record]:
    records = ledger_records(path)
    ts, turn = records[-1].ts, max(x.turn for x in records if x.turn is not None) + turn_offset
    return [
        r.Record(body=r.TurnStarted(trigger="user", input="next"), ts=ts + 1, turn=turn),
        r.Record(body=r.Message(role="user", text="next"), ts=ts + 2, turn=turn),
        r.Record(body=r.TurnEnded(outcome="completed"), ts=ts + 3, turn=turn),
    ]


def test_append_onto_a_checkpointed_ledger_reads_only_the_records_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: every `holon append` read the whole ledger for its projection config (8.6-9.1 s
    # on a 1M-record ledger checkpointed at its head; now 0.9-1.3 s).
    checkpointed = build_ledger(tmp_path / "c", FIXTURE)
    with Ledger.open(checkpointed) as writer:
        checkpoint_at_head(writer)
    plain = build_ledger(tmp_path / "p", FIXTURE)
    evidence = write_jsonl(tmp_path / "turn.jsonl", _next_turn(plain))
    read = Ledger.read
    counted: list[int] = []

    def counting(self: Ledger, from_seq: int = 0, to_seq: int | None = None) -> Iterator[r.Record]:
        for record in read(self, from_seq, to_seq):
            counted.append(record.seq)
            yield record

    monkeypatch.setattr(Ledger, "read", counting)
    appended = invoke("append", checkpointed, evidence, "--json")
    assert appended.exit_code == 0, appended.stderr
    assert counted == []
    monkeypatch.undo()
    # The same records as the full fold appends onto the same ledger without a checkpoint.
    assert invoke("append", plain, evidence).exit_code == 0
    assert ledger_records(checkpointed) == ledger_records(plain)
    assert json.loads(appended.stdout)["head_hash"] == Ledger.open(plain, readonly=True).head()[1]
    assert invoke("verify", checkpointed).exit_code == 0


def _prompt_stating(path: Path, projection: ProjectionConfig) -> list[r.Record]:
    """The next turn of the agent ledger at ``path``, with a prompt recording ``projection``."""
    records = ledger_records(path)
    body = [x.body for x in records if isinstance(x.body, r.PromptRendered)][-1]
    config = dict(body.render_config, projection=msgspec.to_builtins(projection))
    turn = _next_turn(path)
    prompt = r.Record(
        body=msgspec.structs.replace(body, render_config=config), ts=turn[1].ts, turn=turn[1].turn
    )
    return [turn[0], prompt, *turn[1:]]


def test_append_of_a_prompt_stating_the_ledgers_config_is_derived_under_it(tmp_path: Path) -> None:
    path = tmp_path / "agent"
    prompted_turns(path, SHORT, range(4), agent_id="pc", checkpoint_every=2)
    appended = invoke("append", path, write_jsonl(tmp_path / "t.jsonl", _prompt_stating(path, SHORT)))
    assert appended.exit_code == 0, appended.stderr
    assert invoke("verify", path).exit_code == 0


def test_append_of_a_prompt_stating_another_config_names_its_line(tmp_path: Path) -> None:
    # Before: "invalid record at seq -1" (the seq an input record is decoded with), which
    # names nothing in the file or the ledger.
    path = tmp_path / "agent"
    prompted_turns(path, SHORT, range(4), agent_id="pc", checkpoint_every=2)
    before = ledger_records(path)
    other = ProjectionConfig(turn_cap=3)
    source = write_jsonl(tmp_path / "t.jsonl", _prompt_stating(path, other))
    refused = invoke("append", path, source)
    assert refused.exit_code == 2
    assert f"line 2 of {source}" in refused.stderr
    assert (
        "ProjectionConfig(turn_cap=3)" in refused.stderr and "ProjectionConfig(turn_cap=2)" in refused.stderr
    )
    assert "seq -1" not in refused.stderr
    assert ledger_records(path) == before


# --------------------------------------------------------------------------- library warnings


def test_a_torn_tail_cut_by_a_writing_command_is_a_warning_line(tmp_path: Path) -> None:
    # Before: Python's last-resort logging printed the ledger's bare message ("ledger recovery:
    # truncated_torn_tail ..."), not the `holon: warning:` line docs/cli.md promises.
    path = build_ledger(tmp_path / "l", FIXTURE)
    segment = sorted((path / "segments").iterdir())[-1]
    with segment.open("r+b") as f:
        f.truncate(segment.stat().st_size - 7)
    evidence = write_jsonl(tmp_path / "turn.jsonl", _next_turn(path))
    appended = invoke("append", path, evidence, "--json")
    assert appended.exit_code == 0, appended.stderr
    lines = appended.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("holon: warning: ledger recovery: truncated_torn_tail ")
    assert segment.name in lines[0]
    json.loads(appended.stdout)
    assert invoke("verify", path).exit_code == 0


# ------------------------------------------------- holon append of a prompt onto a ledger stating no config


def _quiet_turns(path: Path, *, turn_cap: int, turns: int, prompted: bool) -> None:
    """An agent's timer turns that change no working memory (they derive nothing under a high cap)."""
    config = AgentConfig(projection=ProjectionConfig(turn_cap=turn_cap))
    with Agent.open(path, agent_id="quiet", config=config, clock=Tick()) as agent:
        for _ in range(turns):
            with agent.turn(trigger="timer") as turn:
                if prompted:
                    turn.context()


def _prompted_turn(tmp_path: Path, *, turn_cap: int, turn: int, ts: int) -> Path:
    """A JSONL file of one turn whose prompt states ProjectionConfig(turn_cap=turn_cap), as
    another holon writer under that config recorded it: for `holon append`."""
    source = tmp_path / f"writer-{turn_cap}"
    _quiet_turns(source, turn_cap=turn_cap, turns=1, prompted=True)
    with Ledger.open(source, readonly=True) as ledger:
        evidence = [rec for rec in ledger.read(0) if rec.kind not in r.DERIVED_KINDS]
    assert [rec.kind for rec in evidence] == ["turn_started", "prompt_rendered", "turn_ended"]
    moved = [msgspec.structs.replace(rec, turn=turn, ts=ts + i * 1000) for i, rec in enumerate(evidence)]
    return write_jsonl(tmp_path / f"turn-{turn_cap}.jsonl", moved)


def test_append_refuses_a_prompt_whose_config_the_ledgers_quiet_turns_would_derive_under(
    tmp_path: Path,
) -> None:
    # Two quiet timer turns (no delta, no episode: the ledger states no config), then
    # `holon append` of a turn whose prompt states turn_cap=1: the ledger was folded
    # under turn_cap=1 and the append went through, but under turn_cap=1 turn 1 owes an
    # episode it lacks, so `holon verify` failed for good ("its writer appended evidence
    # without the post-turn refresh"). Agent.open refuses that reopen (_check_unstated);
    # holon append now does as well, naming the input line, and writes nothing.
    ledger = tmp_path / "ledger"
    _quiet_turns(ledger, turn_cap=12, turns=2, prompted=False)
    incoming = _prompted_turn(tmp_path, turn_cap=1, turn=3, ts=1_800_000_000_000)
    before = tree_bytes(ledger)

    result = invoke("append", ledger, incoming)

    assert result.exit_code == 2, result.output + result.stderr
    assert f"line 2 of {incoming}" in result.stderr, result.stderr
    assert "ProjectionConfig(turn_cap=1)" in result.stderr
    assert "after the turn_ended at seq 1" in result.stderr
    assert tree_bytes(ledger) == before
    verified = invoke("verify", ledger)
    assert verified.exit_code == 0, verified.output + verified.stderr


def test_append_takes_a_prompts_config_when_the_ledgers_turns_derive_nothing_under_it(tmp_path: Path) -> None:
    # The case the config scan is for: a ledger written elsewhere whose appended prompts
    # are the first to state its config. Under turn_cap=5 two quiet turns derive nothing.
    ledger = tmp_path / "ledger"
    _quiet_turns(ledger, turn_cap=12, turns=2, prompted=False)
    incoming = _prompted_turn(tmp_path, turn_cap=5, turn=3, ts=1_800_000_000_000)

    result = invoke("append", ledger, incoming)

    assert result.exit_code == 0, result.output + result.stderr
    verified = invoke("verify", ledger)
    assert verified.exit_code == 0, verified.output + verified.stderr
    audit = invoke("audit", ledger, "--json", "--sql", "select projection_label from agents")
    assert audit.exit_code == 0, audit.stderr
    assert "ProjectionConfig(turn_cap=5)" in audit.output


# --------------------------------------------------------------- library warnings, commands in threads


def test_a_library_warning_is_one_line_while_another_command_runs_in_another_thread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A program (a test harness, a notebook server) running two commands in-process at
    # once: each added its own handler to the `holon` logger, so the torn tail `holon
    # append` cut was reported twice, once per command running.
    searched = tmp_path / "searched"
    _quiet_turns(searched, turn_cap=12, turns=1, prompted=False)
    torn = tmp_path / "torn"
    _quiet_turns(torn, turn_cap=12, turns=1, prompted=False)
    segment = sorted((torn / "segments").iterdir())[-1]
    with segment.open("ab") as f:
        f.write(b"\x00\x01torn")
    turn = [
        r.Record(body=r.TurnStarted(trigger="timer"), ts=1_800_000_000_000, turn=5),
        r.Record(body=r.TurnEnded(outcome="completed"), ts=1_800_000_001_000, turn=5),
    ]
    evidence = write_jsonl(tmp_path / "turn.jsonl", turn)

    searching, appended = threading.Event(), threading.Event()
    search = MemorySearch.search

    def held_search(self: MemorySearch, *args: Any, **kwargs: Any) -> list[Any]:
        searching.set()  # the search command is running, its warnings shown
        assert appended.wait(30)
        return search(self, *args, **kwargs)

    monkeypatch.setattr(MemorySearch, "search", held_search)

    def run(*args: str | Path) -> None:
        main.main([str(a) for a in args], standalone_mode=False)

    other = threading.Thread(target=run, args=("search", searched, "timer", "--json"))
    other.start()
    try:
        assert searching.wait(30)
        run("append", torn, evidence, "--json")
    finally:
        appended.set()
        other.join(30)
    warnings = [line for line in capsys.readouterr().err.splitlines() if "ledger recovery" in line]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("holon: warning: ledger recovery: ")
    assert not logging.getLogger("holon").handlers  # and none is left behind
