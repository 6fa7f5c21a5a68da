"""Prompts of runs other tools wrote: imported transcripts in each format, rendered as holon
would have sent them at every turn and after the last one.

Real runs rarely declare work items, plans or decisions; they have an operator's request,
tool calls and messages. Pinned here, for a transcript of each format (the fixtures'
``long_request`` ones are larger than an 8k and a 32k window, the ``short_request`` ones fit
any window) and at 8k, 32k and 200k:

- the operator's first request of the session, or its preview naming its record, is in the
  prompt of every turn and in the final one;
- at 200k the whole transcript is sent, as it was written;
- at 8k and 32k the fullest prompt uses at least 80% of the available tokens;
- no placeholder replaces fewer bytes than its own length.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import holon.records as r
from holon.ledger import Ledger
from holon.replay import RenderOverrides, next_prompt_of, prompt_of, turn_spans
from tests.cli_support import invoke

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "importers"
#: format, the long transcript, the short one.
RUNS = (
    ("claude-code", "long_request.jsonl", "short_request.jsonl"),
    ("openai-chat", "long_request.json", "short_request.json"),
    ("swe-agent", "long_request.traj", "short_request.traj"),
    ("openhands", "long_request.jsonl", "short_request.jsonl"),
)
#: (context window, output reserve), as the issue measured them.
BUDGETS = ((8_000, 1_000), (32_000, 2_000), (200_000, 8_000))
_CLEARED = re.compile(r"\[cleared: ([\d,]+) bytes — restore with ref (?:ledger|blob):[0-9a-f]+\]")


def _imported(tmp_path: Path, fmt: str, name: str) -> Path:
    path = tmp_path / f"{fmt}-{name}"
    result = invoke("import", path, FIXTURES / fmt / name, "--from", fmt, "--agent-id", "run")
    assert result.exit_code == 0, result.output
    return path


def _first_requests(records: list[r.Record]) -> dict[int, r.Record]:
    """For each turn, the first operator request of the session it is in."""
    first: r.Record | None = None
    session: str | None = None
    out: dict[int, r.Record] = {}
    for rec in records:
        body = rec.body
        if isinstance(body, r.ExecutionEnvironment):
            named = body.extra.get("session_id")
            if named is not None and session is not None and named != session:
                first = None
            session = named if named is not None else session
        if isinstance(body, r.Message) and body.role in ("user", "operator") and first is None:
            first = rec
        if rec.turn is not None and first is not None:
            out.setdefault(rec.turn, first)
    return out


def _prompts(path: Path, window: int, reserve: int) -> Iterator[tuple[int | None, str, int]]:
    """(turn, prompt text, tokens) of each turn's first model call, then of the next call."""
    overrides = RenderOverrides(context_window=window, output_reserve=reserve)
    with Ledger.open(path, readonly=True) as ledger:

        def read() -> Iterator[r.Record]:
            return ledger.read(0)

        agent = ledger.agent_id
        for span in turn_spans(read()):
            found = prompt_of(read, span.turn, agent_id=agent, overrides=overrides, blobs=ledger.get_blob)
            yield span.turn, found.prompt.text, found.prompt.total_tokens
        final = next_prompt_of(read, agent_id=agent, overrides=overrides, blobs=ledger.get_blob)
        yield None, final.prompt.text, final.prompt.total_tokens


def _shows(text: str, request: r.Record) -> bool:
    """The request is in the prompt whole, or as its start with the ref that restores it."""
    body = request.body
    assert isinstance(body, r.Message)
    if body.text in text:
        return True
    head = " ".join(body.text.split())[:120]
    return head in " ".join(text.split()) and f"restore with ref ledger:{request.seq}" in text


@pytest.mark.parametrize("run", RUNS, ids=[run[0] for run in RUNS])
@pytest.mark.parametrize("budget", BUDGETS, ids=[f"{b[0] // 1000}k" for b in BUDGETS])
def test_an_imported_run_keeps_its_mandate_and_uses_its_budget(
    tmp_path: Path, run: tuple[str, str, str], budget: tuple[int, int]
) -> None:
    (fmt, long, _), (window, reserve) = run, budget
    path = _imported(tmp_path, fmt, long)
    with Ledger.open(path, readonly=True) as ledger:
        records = list(ledger.read(0))
    firsts = _first_requests(records)
    last_first = next(reversed(firsts.values()))
    fullest = 0
    for turn, text, tokens in _prompts(path, window, reserve):
        request = firsts[turn] if turn is not None else last_first
        assert _shows(text, request), (turn, window)
        for match in _CLEARED.finditer(text):
            assert len(match.group(0).encode()) < int(match.group(1).replace(",", "")), match.group(0)
        assert tokens <= window - reserve
        fullest = max(fullest, tokens)
    if window < 200_000:
        # The transcript is larger than the window: the budget, not a count, is the limit.
        assert fullest >= 0.8 * (window - reserve), (fullest, window - reserve)


@pytest.mark.parametrize(("fmt", "long", "short"), RUNS, ids=[run[0] for run in RUNS])
def test_a_transcript_that_fits_is_sent_whole(tmp_path: Path, fmt: str, long: str, short: str) -> None:
    for name in (short, long):
        path = _imported(tmp_path, fmt, name)
        *_, (_, text, _) = _prompts(path, 200_000, 8_000)
        assert "earlier history" not in text and "[cleared:" not in text and "truncated:" not in text, name
        with Ledger.open(path, readonly=True) as ledger:
            messages = [rec.body for rec in ledger.read(0) if isinstance(rec.body, r.Message)]
            outputs = [
                ledger.get_blob(rec.body.blob.hash).decode() if rec.body.blob is not None else rec.body.output
                for rec in ledger.read(0)
                if isinstance(rec.body, r.ToolResult)
            ]
        # Every message and every tool output, as written.
        assert all(m.text in text for m in messages if m.text)
        assert all(out in text for out in outputs)
