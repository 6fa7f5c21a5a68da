"""Prompts of runs other tools wrote: imported transcripts in each format, sent call by call
as holon would have sent them.

Real runs rarely declare work items, plans or decisions; they have an operator's request,
tool calls and messages. Pinned here, for a transcript of each format (the fixtures'
``long_request`` ones are larger than an 8k and a 32k window, the ``short_request`` ones fit
any window), at 8k, 32k and 200k, on the prompt of every model call (the evaluation's
``holon`` policy: each evidence record appended and folded, the post-turn refresh appended,
each turn's prompt rendered and recorded, the turn's rounds after it, re-rendered when they
outgrow it) and on the prompt ``holon render`` gives after the last record:

- the operator's first request of the session, or its preview naming its record, is in the
  prompt of every call;
- at 200k the whole transcript is sent, as it was written;
- at 8k and 32k the fullest prompt uses at least 80% of the available tokens;
- no placeholder replaces fewer bytes than its own length.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import holon.records as r
from benchmarks.eval.policies import HolonPolicy
from benchmarks.eval.scenario import Scenario
from benchmarks.eval.trace import TokenCounter, call_positions
from holon.context import Budget
from holon.importers import read_transcript
from holon.ledger import Ledger
from holon.replay import RenderOverrides, next_prompt_of
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


def _scenario(fmt: str, name: str) -> Scenario:
    records = read_transcript(FIXTURES / fmt / name, fmt).records
    return Scenario(name=name, description=fmt, records=records, calls=call_positions(records))


def _first_request(records: tuple[r.Record, ...]) -> r.Message:
    """The operator's first request of the last session (the one every call here is in)."""
    sessions = [i for i, rec in enumerate(records) if isinstance(rec.body, r.ExecutionEnvironment)]
    start = sessions[0] if sessions else 0
    first = next(
        rec.body
        for rec in records[start:]
        if isinstance(rec.body, r.Message) and rec.body.role in ("user", "operator")
    )
    assert isinstance(first, r.Message)
    return first


def _shows(text: str, request: r.Message) -> bool:
    """The request is in the prompt whole, or as its start and the ref restoring the rest."""
    if request.text in text:
        return True
    head = " ".join(request.text.split())[:120]
    return head in " ".join(text.split()) and "[request shortened:" in text


@pytest.mark.parametrize("run", RUNS, ids=[run[0] for run in RUNS])
@pytest.mark.parametrize("budget", BUDGETS, ids=[f"{b[0] // 1000}k" for b in BUDGETS])
def test_every_call_of_an_imported_run_keeps_its_mandate_and_the_budget_is_the_limit(
    run: tuple[str, str, str], budget: tuple[int, int]
) -> None:
    (fmt, long, _), (window, reserve) = run, budget
    scenario = _scenario(fmt, long)
    request = _first_request(scenario.records)
    policy = HolonPolicy(scenario, Budget(context_window=window, output_reserve=reserve), TokenCounter())
    fullest = 0
    calls = 0
    for call in policy.prompts():
        text = call.text
        calls += 1
        assert _shows(text, request), (fmt, window, calls)
        for match in _CLEARED.finditer(text):
            assert len(match.group(0).encode()) < int(match.group(1).replace(",", "")), match.group(0)
        assert call.tokens <= window - reserve
        fullest = max(fullest, call.tokens)
    assert calls == len(scenario.calls) > 20
    if window < 200_000:
        # The transcript is larger than the window: the budget, not a count, is the limit.
        assert fullest >= 0.8 * (window - reserve), (fullest, window - reserve)


@pytest.mark.parametrize("run", RUNS, ids=[run[0] for run in RUNS])
def test_a_transcript_that_fits_is_sent_whole(tmp_path: Path, run: tuple[str, str, str]) -> None:
    fmt, long, short = run
    for name in (short, long):
        path = tmp_path / name
        assert invoke("import", path, FIXTURES / fmt / name, "--from", fmt, "--agent-id", "a").exit_code == 0
        with Ledger.open(path, readonly=True) as ledger:
            found = next_prompt_of(
                lambda ledger=ledger: ledger.read(0),  # type: ignore[misc]
                agent_id="a",
                overrides=RenderOverrides(context_window=200_000, output_reserve=8_000),
                blobs=ledger.get_blob,
            )
            text = found.prompt.text
            messages = [rec.body for rec in ledger.read(0) if isinstance(rec.body, r.Message)]
            outputs = [
                ledger.get_blob(rec.body.blob.hash).decode() if rec.body.blob is not None else rec.body.output
                for rec in ledger.read(0)
                if isinstance(rec.body, r.ToolResult)
            ]
        assert "earlier history" not in text and "[cleared:" not in text and "truncated:" not in text, name
        # Every message and every tool output, as written.
        assert all(m.text in text for m in messages if m.text), name
        assert all(out in text for out in outputs), name
