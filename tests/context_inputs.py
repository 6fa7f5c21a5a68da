"""Hand-made ContextInputs for section-level tests (no ledger needed)."""

from __future__ import annotations

import blake3

import holon.records as r
from holon.context import ContextInputs, CurrentInput
from holon.projections import MessageEntry, ToolExecution, WorkingMemorySnapshot


def execution(n: int, *, tool: str = "bash", output: str = "", blob: bytes | None = None) -> ToolExecution:
    """Tool call ``c<n>`` with intent at seq 10n and result at seq 10n+1."""
    blob_ref = None
    if blob is not None:
        blob_ref = r.BlobRef(hash=blake3.blake3(blob).hexdigest(), size=len(blob), preview=blob[:20].decode())
    result = r.ToolResult(call_id=f"c{n}", tool=tool, status="ok", output=output, blob=blob_ref, exit_code=0)
    return ToolExecution(
        call_id=f"c{n}",
        tool=tool,
        command=f"step {n}",
        turn=n,
        ts=n,
        intent_seq=10 * n,
        result_seq=10 * n + 1,
        intent=r.ToolIntent(call_id=f"c{n}", tool=tool, args={"command": f"step {n}"}),
        result=result,
    )


def inputs(**fields: object) -> ContextInputs:
    """Inputs with a small working memory and a current input; override any field."""
    base: dict[str, object] = {
        "agent_id": "a1",
        "snapshot": WorkingMemorySnapshot(
            active_work_item_id="w1", work_state="active", objective="ship the parser"
        ),
        "working_memory_revision": 2,
        "current_input": CurrentInput(text="carry on", seq=5000),
    }
    base.update(fields)
    return ContextInputs(**base)  # type: ignore[arg-type]


def message(seq: int, text: str, role: str = "user") -> MessageEntry:
    return MessageEntry(seq=seq, ts=seq, turn=seq, message=r.Message(role=role, text=text))  # type: ignore[arg-type]
