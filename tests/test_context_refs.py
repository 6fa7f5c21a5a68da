"""Refs: the syntax the renderer emits, and restoration to the original bytes."""

from __future__ import annotations

from typing import ClassVar

import blake3
import pytest

import holon.records as r
from holon.context import Budget, build_context, parse_ref, restore, restore_bytes
from holon.errors import InvalidRef, RefNotFound
from holon.projections import WorkingMemorySnapshot
from tests.context_inputs import inputs

DATA = b"large tool output\n" * 100
DIGEST = blake3.blake3(DATA).hexdigest()
EPISODE = r.ContextEpisodeRecord(
    episode_id=0,
    boundary_reason="turn_cap",
    work_item_id=None,
    first_turn=1,
    last_turn=2,
    from_seq=0,
    to_seq=3,
    projection_version=1,
)


class Source:
    records: ClassVar[list[r.Record]] = [
        r.Record(body=r.ToolResult(call_id="c1", tool="bash", status="ok", output="héllo"), ts=1, seq=0),
        r.Record(
            body=r.ToolResult(
                call_id="c2", tool="bash", status="ok", blob=r.BlobRef(hash=DIGEST, size=len(DATA))
            ),
            ts=2,
            seq=1,
        ),
        r.Record(body=r.Decision(id="d1", text="use zstd"), ts=3, seq=2),
    ]

    def record(self, seq: int) -> r.Record:
        return self.records[seq]

    def blob(self, blob_hash: str) -> bytes:
        if blob_hash != DIGEST:
            raise KeyError(blob_hash)
        return DATA

    def episode(self, episode_id: int) -> r.ContextEpisodeRecord:
        if episode_id != 0:
            raise RefNotFound(f"episode:{episode_id}")
        return EPISODE


def test_parse_ref_accepts_the_three_schemes() -> None:
    assert str(parse_ref("ledger:12")) == "ledger:12"
    assert parse_ref(f"blob:{DIGEST}").scheme == "blob"
    assert parse_ref("episode:3").value == "3"
    # Hex in upper case is the same hash (`holon get L blob:4253D7…` was "malformed").
    assert parse_ref(f"blob:{DIGEST.upper()}") == parse_ref(f"blob:{DIGEST}")
    # So is a scheme in upper case (`holon get L LEDGER:3` was "malformed", the model's holon_get took it).
    assert str(parse_ref("LEDGER:3")) == "ledger:3" and str(parse_ref("Episode:4")) == "episode:4"
    assert str(parse_ref(f"BLOB:{DIGEST.upper()}")) == f"blob:{DIGEST}"
    # Digits of other scripts are not seqs (`\d` alone would take them).
    other_digits = ("ledger:\uff15", "episode:\u0663")
    for bad in ("ledger:", "ledger:-1", "blob:xyz", "file:/etc/passwd", "episode:3x", *other_digits):
        with pytest.raises(InvalidRef):
            parse_ref(bad)


def test_restore_bytes_gives_back_the_original_bytes() -> None:
    src = Source()
    assert restore_bytes("ledger:0", src) == "héllo".encode()
    assert restore_bytes("ledger:1", src) == DATA  # a blob-backed result restores its blob
    assert restore_bytes(f"blob:{DIGEST}", src) == DATA
    assert restore_bytes("ledger:2", src) == r.encode_json_record(Source.records[2])
    assert restore("episode:0", src) == EPISODE


def test_missing_or_tampered_targets_are_named() -> None:
    src = Source()
    with pytest.raises(RefNotFound):
        restore("blob:" + "0" * 64, src)
    with pytest.raises(RefNotFound):
        restore("episode:5", src)

    class Tampered(Source):
        def blob(self, blob_hash: str) -> bytes:
            return b"not it"

    with pytest.raises(RefNotFound, match="does not hash"):
        restore(f"blob:{DIGEST}", Tampered())


def test_a_truncated_legacy_summary_restores_to_its_text() -> None:
    text = "Earlier we moved the importer to streaming reads; " * 120 + "done — é"
    summary = r.ContextSummary(text=text, source="claude-code")

    class WithSummary(Source):
        records: ClassVar[list[r.Record]] = [*Source.records, r.Record(body=summary, ts=4, seq=3)]

    prompt = build_context(
        inputs(snapshot=WorkingMemorySnapshot(), context_summary=summary, context_summary_seq=3),
        Budget(context_window=1_200),
    )
    section = prompt.section("context_summary")
    assert section is not None and section.form == "truncated"
    assert "restore with ref ledger:3]" in section.text
    [omission] = prompt.plan.omitted
    assert restore_bytes(omission.ref, WithSummary()) == text.encode()


# --------------------------------------------------------------------------- refs of any length


@pytest.mark.parametrize("scheme", ["ledger", "episode"])
def test_a_ref_with_more_digits_than_int_converts_is_an_invalid_ref(scheme: str) -> None:
    # Python refuses to convert more than 4300 digits (sys.int_info.str_digits_check_threshold):
    # a model's or user's garbage ref must still be an InvalidRef (the recall tool and
    # `holon get` handle that), not a bare ValueError reported as an internal error.
    ref = f"{scheme}:" + "9" * 5000
    with pytest.raises(InvalidRef, match="too many digits"):
        parse_ref(ref)
