"""References the renderer leaves behind, and their restoration to the original bytes.

Every omission, truncation or cleared tool result in a prompt names a ref:

- ``ledger:<seq>`` — the record at that seq (a cleared tool output restores to the
  output, a truncated message, input or legacy summary to its text; anything else to
  its canonical JSONL line);
- ``blob:<hash>`` — a blob in the content-addressed store (lowercase blake3 hex);
- ``episode:<id>`` — an archived :class:`~holon.records.ContextEpisodeRecord`.

:func:`restore` is pure: it reads through a :class:`RefSource` (``holon.replay.LedgerRefSource``
over a ledger, the runtime's over its ledger and episode index, a dict-backed one in
tests), so restoration is specified once, here.
"""

from __future__ import annotations

import re
from typing import Final, Literal, Protocol

import blake3
import msgspec

import holon.records as r
from holon.errors import InvalidRef, LedgerCorrupt, RefNotFound

__all__ = [
    "Ref",
    "RefSource",
    "blob_ref",
    "episode_ref",
    "ledger_ref",
    "parse_ref",
    "restore",
    "restore_bytes",
]

# ASCII only: `\d` alone also matches other scripts' digits (fullwidth, Arabic-Indic, ...).
# The scheme and hex are read in either case (a ref copied through a tool that upper-cases
# it still names the same thing: `holon get LEDGER:3` as the model's holon_get reads it);
# parse_ref returns them in lowercase, as the blob store names blobs.
_REF: Final = re.compile(
    r"(ledger):(\d+)|(blob):([0-9a-fA-F]{64})|(episode):(\d+)", re.ASCII | re.IGNORECASE
)


class Ref(msgspec.Struct, frozen=True, kw_only=True):
    """A parsed reference: its scheme and the seq, hash or episode id it names."""

    scheme: Literal["ledger", "blob", "episode"]
    value: str

    def __str__(self) -> str:
        return f"{self.scheme}:{self.value}"


def ledger_ref(seq: int) -> str:
    """The ref of the record at ``seq``."""
    return f"ledger:{seq}"


def blob_ref(blob_hash: str) -> str:
    """The ref of a blob by its blake3 hex digest."""
    return f"blob:{blob_hash}"


def episode_ref(episode_id: int) -> str:
    """The ref of an archived episode."""
    return f"episode:{episode_id}"


def parse_ref(text: str) -> Ref:
    """Parse ``ledger:<seq>``, ``blob:<hash>`` or ``episode:<id>``, scheme and hex in any case.

    Raises :class:`InvalidRef` otherwise.
    """
    match = _REF.fullmatch(text.strip())
    if match is None:
        raise InvalidRef(
            f"malformed ref {text!r}: expected ledger:<seq>, blob:<64 hex blake3> or episode:<id>"
        )
    groups = match.groups()
    if groups[2]:
        return Ref(scheme="blob", value=groups[3].lower())
    scheme: Literal["ledger", "episode"] = "ledger" if groups[0] else "episode"
    digits = groups[1] if groups[0] else groups[5]
    try:
        number = int(digits)
    except ValueError:
        # int() refuses more than sys.get_int_max_str_digits() digits (4300 by default)
        # with a bare ValueError; such a ref names nothing and is the caller's mistake.
        raise InvalidRef(
            f"malformed ref {scheme}:<{len(digits):,} digits>: too many digits for a "
            f"{'seq' if scheme == 'ledger' else 'episode id'}; check the ref"
        ) from None
    return Ref(scheme=scheme, value=str(number))


class RefSource(Protocol):
    """Where refs are looked up: records by seq, blobs by hash, episodes by id.

    Each method raises :class:`~holon.errors.RefNotFound` (or ``LookupError``) when the
    thing does not exist.
    """

    def record(self, seq: int) -> r.Record: ...

    def blob(self, blob_hash: str) -> bytes: ...

    def episode(self, episode_id: int) -> r.ContextEpisodeRecord: ...


def restore(ref: str, source: RefSource) -> r.Record | bytes | r.ContextEpisodeRecord:
    """The thing a ref names: a record, a blob's bytes (hash-checked) or an episode."""
    parsed = parse_ref(ref)
    try:
        if parsed.scheme == "ledger":
            return source.record(int(parsed.value))
        if parsed.scheme == "episode":
            return source.episode(int(parsed.value))
        data = source.blob(parsed.value)
    except RefNotFound:
        raise
    except LookupError as exc:
        raise RefNotFound(f"{ref} names nothing in this ledger ({exc})") from None
    if blake3.blake3(data).hexdigest() != parsed.value:
        raise RefNotFound(f"{ref}: the stored blob does not hash to its name; run `holon verify`")
    return data


def restore_bytes(ref: str, source: RefSource) -> bytes:
    """The original bytes behind a ref, as a placeholder promises them.

    A tool result restores to its output (inline, or the blob it points to); a message,
    brief or legacy summary to its text; a turn's input to the input; any other record
    to its canonical JSONL line; an episode to its JSON encoding; a blob to its content.
    """
    found = restore(ref, source)
    if isinstance(found, bytes):
        return found
    if isinstance(found, r.ContextEpisodeRecord):
        return msgspec.json.encode(found)
    body = found.body
    if isinstance(body, r.ToolResult):
        if body.blob is not None and not body.output:
            try:
                return restore_bytes(blob_ref(body.blob.hash), source)
            except RefNotFound:
                # The record is in the ledger and names the blob: its absence is damage to
                # the ledger, not a bad ref (and exits like corruption on the command line).
                raise LedgerCorrupt(
                    f"{ref} keeps its output in blob {body.blob.hash}, which is missing",
                    file="the blob store",
                ) from None
        return body.output.encode()
    if isinstance(body, r.Message | r.Brief | r.ContextSummary):
        return body.text.encode()
    if isinstance(body, r.TurnStarted) and body.input is not None:
        return body.input.encode()
    return r.encode_json_record(found)
