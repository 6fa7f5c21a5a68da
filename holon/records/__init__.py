"""holon.records: the vocabulary layer, every fact a holon ledger can hold and its wire form.

A :class:`Record` is an envelope (``seq``, ``ts``, ``turn``, ``kind``, schema version
``v``) around a *body*, one frozen msgspec Struct per record kind. Decoding validates once,
at the edge: an unknown kind or a wrongly typed field raises
:class:`~holon.errors.InvalidRecord` naming the seq (or JSONL line) and the field, and
inner code trusts the types. Users and the other layers import from here
(``import holon.records as r``), never from the modules inside:

* :mod:`holon.records.kinds`: the vocabulary: the body Structs, :class:`Record`,
  ``SCHEMA_VERSION``, the ``ts`` range, ``BODY_TYPES``;
* :mod:`holon.records.wire`: the msgpack and JSON codecs, their decoder tables, the schema
  version check and the errors that say what a refused record holds; the checks a writer
  runs on a payload before it commits it;
* :mod:`holon.records.malformed`: what is wrong with bytes a decoder refused (text that is
  not UTF-8, half a surrogate pair, a value cut off), found in the bytes themselves.

What it may import: msgspec, the stdlib and :mod:`holon.errors`, nothing else of holon;
it does no I/O (``tests/test_layers.py``). Inside, ``kinds`` imports no other module of the
package and ``malformed`` only the stdlib and the errors; ``wire`` imports both.
"""

from __future__ import annotations

from holon.records.kinds import (
    BODY_TYPES,
    DERIVED_KINDS,
    MAX_TS,
    MIN_TS,
    SCHEMA_VERSION,
    BlobRef,
    Body,
    Brief,
    ContextEpisodeRecord,
    ContextSummary,
    Decision,
    ExecutionEnvironment,
    FollowUp,
    HistoryAnchor,
    Message,
    ModelCall,
    Omission,
    PlanStep,
    ProjectionConfig,
    PromptRendered,
    Record,
    SectionTokens,
    SystemPolicy,
    TaskResult,
    TaskRun,
    TaskStarted,
    ToolDefinition,
    ToolIntent,
    ToolResult,
    TurnEnded,
    TurnStarted,
    WaitingIntent,
    WaitingResolved,
    WorkingMemoryDelta,
    WorkItem,
    WorkItemState,
    WorkPlan,
    kind_of,
)
from holon.records.kinds import JSON as JSON  # free-form fields' alias: r.JSON, not in __all__
from holon.records.malformed import json_cut_off, lone_surrogate, utf8_error
from holon.records.wire import (
    DECODE_ERRORS,
    check_json_fields,
    check_payload,
    decode_json_record,
    decode_msgpack_record,
    encode_json_record,
    encode_msgpack_record,
    encode_msgpack_record_into,
    non_json_value,
    ts_out_of_range,
)

__all__ = [
    "BODY_TYPES",
    "DECODE_ERRORS",
    "DERIVED_KINDS",
    "MAX_TS",
    "MIN_TS",
    "SCHEMA_VERSION",
    "BlobRef",
    "Body",
    "Brief",
    "ContextEpisodeRecord",
    "ContextSummary",
    "Decision",
    "ExecutionEnvironment",
    "FollowUp",
    "HistoryAnchor",
    "Message",
    "ModelCall",
    "Omission",
    "PlanStep",
    "ProjectionConfig",
    "PromptRendered",
    "Record",
    "SectionTokens",
    "SystemPolicy",
    "TaskResult",
    "TaskRun",
    "TaskStarted",
    "ToolDefinition",
    "ToolIntent",
    "ToolResult",
    "TurnEnded",
    "TurnStarted",
    "WaitingIntent",
    "WaitingResolved",
    "WorkItem",
    "WorkItemState",
    "WorkPlan",
    "WorkingMemoryDelta",
    "check_json_fields",
    "check_payload",
    "decode_json_record",
    "decode_msgpack_record",
    "encode_json_record",
    "encode_msgpack_record",
    "encode_msgpack_record_into",
    "json_cut_off",
    "kind_of",
    "lone_surrogate",
    "non_json_value",
    "ts_out_of_range",
    "utf8_error",
]
