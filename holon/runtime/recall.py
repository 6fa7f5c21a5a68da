"""Recall tools: how the model itself restores what its prompt left out.

Every omission in a prompt names a ref (``[cleared: 3,832 bytes — restore with ref
ledger:1234]``), and the history's first line says ``restore any ref with holon get
<ref> or find it with holon search``. A person runs those commands; the model needs
them as tools. This module defines the two tools with those names and the text each
returns to the model:

- ``holon_get`` (``ref``, ``offset``) — the original text behind a ref, a page at a
  time (:func:`get_text`): a cleared 50 KB output must not flood the window it was
  cleared from.
- ``holon_search`` (``query``, ``limit``) — memory search (:mod:`holon.search`) over the
  agent's archived episodes and evidence, each hit with the ref ``holon_get`` restores and
  why it matched, near-duplicates as one hit with every ref (:func:`holon.search.search_text`,
  re-exported here).

:meth:`holon.runtime.Turn.recall` records such a call through the tool write-ahead log
like any other tool call, so the restored text is in the ledger and the replayed
prompts are what the model saw.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Final

import holon.records as r
from holon.context import EpisodeIndex, RefSource, parse_ref, restore_bytes
from holon.errors import HolonError, InvalidRef, RefNotFound, UsageError
from holon.ledger import Ledger
from holon.search import BlobText, search_text

__all__ = [
    "GET_TOOL",
    "NOTE_CHARS",
    "RECALL_PAGE_CHARS",
    "RECALL_TOOLS",
    "RECALL_TOOL_NAMES",
    "SEARCH_LIMIT",
    "SEARCH_TOOL",
    "AgentRefSource",
    "RestoredText",
    "blob_text_of",
    "get_text",
    "is_recall",
    "model_ref",
    "recall_args",
    "search_text",
]

# ~2k tokens: enough for most cleared outputs in one call, small enough that restoring a
# 50 KB log does not undo the clearing that made room for the turn.
RECALL_PAGE_CHARS: Final = 8_000
SEARCH_LIMIT: Final = 8
#: The most characters a paged holon_get result has beyond its page of text: the line
#: break before its note and the note ("[blob:<64 hex>, characters 8,000-16,000 of
#: 12,500,000; call holon_get with offset 16000 for the next part]"), for any text under
#: 10**12 characters. Kept out of the page's text, not taken from it, so page boundaries
#: do not depend on the note and a page_chars below it still pages.
NOTE_CHARS: Final = 200
_MAX_SEARCH_LIMIT: Final = 25
# What a model copies around a ref it takes from the prompt: the bracket or parenthesis
# that closes the note ("restore with ref ledger:42]"), Markdown backticks ("`holon get
# episode:3`"), quotes, a sentence's full stop, the comma of a list of refs.
_AROUND_REF: Final = " \t\r\n`'\"()[]{}<>.,;:!?"
# The most memory (sys.getsizeof) of the one restored text RestoredText keeps: paging
# through a larger text restores it again for each page, as before.
_KEPT_BYTES: Final = 64 * 1024 * 1024

GET_TOOL: Final = r.ToolDefinition(
    name="holon_get",
    description=(
        "Restore something your context left out. Every note like '[cleared: … — "
        "restore with ref …]', '(… not shown — restore with ref …)' or 'holon get <ref>' names a "
        "ref: ledger:<seq>, blob:<hash> or episode:<id>. Returns its original text "
        "(a tool's full output, a message, a plan or decision record, an episode) one page at "
        "a time: a longer text ends with a note giving the offset to pass for the next part."
    ),
    parameters={
        "type": "object",
        "properties": {
            "ref": {"type": "string", "description": "ledger:<seq>, blob:<hash> or episode:<id>"},
            "offset": {
                "type": "integer",
                "minimum": 0,
                "description": "character offset to start at (default 0)",
            },
        },
        "required": ["ref"],
        "additionalProperties": False,
    },
)

SEARCH_TOOL: Final = r.ToolDefinition(
    name="holon_search",
    description=(
        "Search everything this agent recorded — past messages, tool calls and their outputs, "
        "plans, decisions, waits and finished episodes of work — by words (BM25). Each hit "
        "shows where it came from, its best-matching line and the ref holon_get restores."
    ),
    parameters={
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "words to look for"},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": _MAX_SEARCH_LIMIT,
                "description": f"most hits returned (default {SEARCH_LIMIT})",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    },
)

RECALL_TOOLS: Final = (GET_TOOL, SEARCH_TOOL)
RECALL_TOOL_NAMES: Final = frozenset(tool.name for tool in RECALL_TOOLS)


def is_recall(record: r.Record) -> bool:
    """Whether ``record`` is a recall call's intent or result, which memory search leaves out.

    A search would find its own query, and a text restored by ``holon_get`` twice.
    """
    body = record.body
    return isinstance(body, r.ToolIntent | r.ToolResult) and body.tool in RECALL_TOOL_NAMES


def blob_text_of(ledger: Ledger) -> BlobText:
    """What memory search reads a blob-stored output's text with: the blob, verified, as text.

    A blob that is missing or damaged gives None (the search indexes its preview and
    counts it in ``MemorySearch.unread_blobs``): one bad blob must not make a whole
    ledger unsearchable, and ``holon verify`` is what names it. Bytes that are not UTF-8
    (a tool's Latin-1 file name, a blob another program stored) are read with U+FFFD in
    their place, as :meth:`holon.Agent.output_of` reads them: the blob is intact, so
    calling it unreadable sent the user to a ``holon verify`` that finds nothing, and the
    rest of its text went unsearched.
    """

    def read(blob: r.BlobRef) -> str | None:
        try:
            return ledger.get_blob(blob.hash).decode("utf-8", errors="replace")
        except (HolonError, OSError):
            return None

    return read


class AgentRefSource:
    """A :class:`~holon.context.RefSource` over an agent's ledger and its episode index.

    Episodes come from the index the agent keeps current, so no ledger scan is needed.
    """

    def __init__(self, ledger: Ledger, episodes: EpisodeIndex) -> None:
        self._ledger = ledger
        self._episodes = episodes

    def record(self, seq: int) -> r.Record:
        """The record at ``seq``; past the head, RefNotFound naming the newest seq.

        The ledger's own message names its directory and is written for the daemon; this
        one is read by the model, which can act only on the refs that exist.
        """
        try:
            return self._ledger.get(seq)
        except RefNotFound:
            newest = self._ledger.head()[0]
            if seq <= newest:
                raise
            raise RefNotFound(
                f"ledger:{seq} does not exist: the newest record is ledger:{newest}; "
                "check the seq against the note that named it"
            ) from None

    def blob(self, blob_hash: str) -> bytes:
        """A blob's bytes, verified against its hash; RefNotFound without the store's path."""
        try:
            return self._ledger.get_blob(blob_hash)
        except RefNotFound:
            raise RefNotFound(
                f"blob:{blob_hash} does not exist: this agent recorded no blob with that hash; "
                "check the hash against the note that named it"
            ) from None

    def episode(self, episode_id: int) -> r.ContextEpisodeRecord:
        """The archived episode with this id (RefNotFound when there is none)."""
        found = self._episodes.get(episode_id)
        if found is None:
            held = len(self._episodes)
            raise RefNotFound(
                f"episode:{episode_id} does not exist "
                f"({'no episode is archived yet' if not held else f'episodes 0..{held - 1} are archived'})"
            )
        return found


def model_ref(text: str) -> str:
    """The one ref in ``text`` as a model passes it, in its canonical form; InvalidRef otherwise.

    A ref copied from the prompt often comes with what surrounds it there: a closing
    bracket or parenthesis, backticks, a full stop, the command (``holon get ledger:42``).
    The words and characters around a single ref are dropped; text naming several refs is
    refused with the refs listed (one call restores one), and text naming none with what a
    ref looks like. The scheme and hex are read in any case (``LEDGER:3``), as :func:`parse_ref` reads them.
    """
    try:
        return str(parse_ref(text.strip(_AROUND_REF)))
    except InvalidRef as exc:
        malformed = exc
    found: list[str] = []
    for word in text.replace(",", " ").split():
        try:
            found.append(str(parse_ref(word.strip(_AROUND_REF))))
        except InvalidRef:
            continue
    refs = list(dict.fromkeys(found))
    if len(refs) == 1:
        return refs[0]
    if refs:
        raise InvalidRef(
            f"{text!r} names {len(refs)} refs; holon_get restores one ref per call: "
            f"call it once with each of {', '.join(refs)}"
        )
    raise malformed


class RestoredText:
    """The last text ``holon_get`` restored, kept so paging through it restores it once.

    Without it each page read, hashed and decoded the whole text again: 1,700 pages of a
    13.7 MB output took ~31 ms each, ~53 s in all. One text is kept, by canonical ref, and
    only up to :data:`_KEPT_BYTES` of memory; the owner drops it when the turn ends.
    Serving a page from it is sound because what a ref names never changes (records are
    append-only, a blob is named by its hash, an episode by its id) and the text kept was
    verified when it was restored: no page comes from bytes that were not checked.
    """

    def __init__(self, max_bytes: int = _KEPT_BYTES) -> None:
        self._max = max_bytes
        self._ref: str | None = None
        self._text = ""

    def get(self, ref: str) -> str | None:
        """The text kept for ``ref`` (canonical form), or None."""
        return self._text if ref == self._ref else None

    def keep(self, ref: str, text: str) -> None:
        """Keep ``text`` as the text behind ``ref``, in place of the one kept (not when too large)."""
        self.clear()
        if sys.getsizeof(text) <= self._max:
            self._ref, self._text = ref, text

    def clear(self) -> None:
        """Drop the kept text."""
        self._ref, self._text = None, ""


def get_text(
    ref: str,
    source: RefSource,
    *,
    offset: int = 0,
    page_chars: int = RECALL_PAGE_CHARS,
    kept: RestoredText | None = None,
) -> str:
    """What ``holon_get`` returns: the text behind ``ref`` from ``offset``, one page of it.

    A text that fits is returned exactly as :func:`~holon.context.restore_bytes` gives
    it (so a restored output is byte-identical to the original). A longer one is cut at
    ``offset + page_chars`` characters, or at the last line break in the page's second
    half, and ends with a line naming the offset of the next part.
    Binary data is described, not dumped; a text with a few byte sequences that are not
    UTF-8 (at most 10% of its characters, no NUL) is shown with U+FFFD in their place
    (and, when it fits one page, a note after it saying so); an empty text is said to be
    empty (an empty result reads as a tool that failed to answer). ``ref`` may come as
    the model copied it (see :func:`model_ref`); the notes name it in its canonical form.
    ``page_chars`` bounds the characters of the text a call returns; a paged text also
    ends with that note, one line of at most :data:`NOTE_CHARS` characters (the page stays
    ``page_chars`` of text, so pages and offsets do not depend on how long the note is).
    ``kept``, when given, serves later pages of the same ref without restoring it again.
    Raises InvalidRef, RefNotFound and UsageError (an offset past the end) with messages
    meant for the model.
    """
    ref = model_ref(ref)
    if offset < 0:
        raise UsageError(f"offset {offset} is negative: pass 0 to read {ref} from the start")
    text = kept.get(ref) if kept is not None else None
    odd = 0
    if text is None:
        data = restore_bytes(ref, source)
        readable = _readable(data)
        if readable is None:
            return f"[{ref} is {len(data):,} bytes of binary data, not text; it is not shown]"
        text, odd = readable
        del data
        if kept is not None and len(text) > page_chars:  # only a text that is paged is read again
            kept.keep(ref, text)
    page = _page(ref, text, offset, page_chars)
    # Said of a text that fits one page: a paged one already ends with its page note, and
    # a page plus its notes stays within NOTE_CHARS of page_chars (U+FFFD speaks for itself).
    if not odd or offset or len(text) > page_chars:
        return page
    note = f"[{ref} is not all UTF-8: {odd:,} byte sequences show as U+FFFD]"
    return page + ("" if page.endswith("\n") else "\n") + note


def _readable(data: bytes) -> tuple[str, int] | None:
    """``data`` as text and how many of its byte sequences are not UTF-8; None for binary data.

    A log with some Latin-1 bytes (a file name, accented words: a few percent of its
    characters) is text the model needs (memory search finds it by its words); NUL bytes,
    or more than 10% of characters undecodable, is data (an image, an archive: random
    bytes are mostly invalid UTF-8) whose dump would only cost tokens.
    """
    try:
        return data.decode(), 0
    except UnicodeDecodeError:
        pass
    if b"\0" in data:
        return None
    text = data.decode("utf-8", errors="replace")
    odd = text.count("\ufffd")
    return (text, odd) if odd * 10 <= len(text) else None


def _page(ref: str, text: str, offset: int, page_chars: int) -> str:
    """The page of ``text`` from ``offset`` that :func:`get_text` returns, with its note."""
    total = len(text)
    if total == 0 and offset == 0:
        return f"[{ref} is empty: the text behind it has no characters]"
    if offset == 0 and total <= page_chars:
        return text
    if offset >= total:
        raise UsageError(f"offset {offset:,} is past the end of {ref} ({total:,} characters)")
    end = min(offset + page_chars, total)
    if end < total:
        # End the page at a line break when one is in its second half: the model reads
        # whole lines, and the next offset still continues exactly where this page ends.
        newline = text.rfind("\n", offset + page_chars // 2, end)
        if newline >= 0:
            end = newline + 1
    page = text[offset:end]
    if end < total:
        note = (
            f"[{ref}, characters {offset:,}-{end:,} of {total:,}; call holon_get with offset {end} "
            "for the next part]"
        )
    else:
        note = f"[{ref}, characters {offset:,}-{end:,} of {total:,}: the end]"
    return page + ("" if page.endswith("\n") else "\n") + note


def recall_args(name: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """Check a recall tool call's arguments as the model sent them; UsageError says what is wrong.

    Returns the keyword arguments with their defaults filled in: ``ref``/``offset`` for
    ``holon_get``, ``query``/``limit`` for ``holon_search``.
    """
    if name not in RECALL_TOOL_NAMES:
        raise UsageError(f"{name!r} is not a recall tool (they are {', '.join(sorted(RECALL_TOOL_NAMES))})")
    if name == GET_TOOL.name:
        fields = {"ref": (str, None), "offset": (int, 0)}
    else:
        fields = {"query": (str, None), "limit": (int, SEARCH_LIMIT)}
    # Keys that are not strings (a daemon's own dict; JSON has none) are named by repr.
    unknown = sorted(key if isinstance(key, str) else repr(key) for key in set(args) - set(fields))
    if unknown:
        raise UsageError(f"{name} takes {', '.join(fields)}; it got unknown argument(s) {', '.join(unknown)}")
    out: dict[str, Any] = {}
    for key, (kind, default) in fields.items():
        value = args.get(key, default)
        # bool is an int in Python, never a valid offset or limit.
        if value is None or isinstance(value, bool) or not isinstance(value, kind):
            what = "a string" if kind is str else "an integer"
            raise UsageError(f"{name}: `{key}` must be {what}, got {value!r}")
        out[key] = value
    if name == SEARCH_TOOL.name and not 1 <= out["limit"] <= _MAX_SEARCH_LIMIT:
        raise UsageError(f"holon_search: `limit` must be 1..{_MAX_SEARCH_LIMIT}, got {out['limit']}")
    return out
