"""A ``Session`` of the OpenAI Agents SDK backed by a holon ledger (``pip install 'holon[openai-agents]'``).

``Runner.run(agent, input, session=HolonSession(holon_agent))`` records the run in the
ledger and sends the model holon's budgeted context instead of the whole transcript:

- :meth:`HolonSession.get_items` (no ``limit``) is called by the Runner once, when a run
  starts. It ends the previous run's holon turn (so its post-turn refresh derives working
  memory and episodes), opens this run's turn, renders its prompt
  (:meth:`holon.runtime.Turn.context`, which records what the model is shown) and returns it
  as Responses input items (:func:`holon.context.to_openai_responses`): the cacheable prefix
  as a ``system`` item, the rest (working memory, history, recalled evidence) as a ``user``
  item. The Runner appends the run's new input after them, so the prompt's current-input
  section, which would say there is none yet, is left out of the items (the recorded
  prompt keeps it: ``holon render`` of that turn shows it).
- :meth:`HolonSession.add_items` records the SDK's items as holon records: a user message
  as the operator's request (it opens a new turn once the turn has the model's answer),
  a system or developer message as a system message, the model's messages as assistant
  messages, a ``function_call`` as a tool intent (``Turn.tool``, under the SDK's
  ``call_id`` as its idempotency key, so an item added twice is recorded once) and its
  ``function_call_output`` as that call's result. Other items (reasoning, hosted tools'
  calls) are not recorded; :attr:`HolonSession.skipped` counts them by type.

The ledger is append-only, so the two methods that remove are defined by appending:

- :meth:`HolonSession.pop_item` withdraws the session's newest item: it appends a channel
  message ``ledger:<seq> withdrawn: …`` and returns the item. The record stays in the ledger,
  and in holon's history, followed by that note, which tells the model to disregard it;
  the session's item list (``get_items(limit=…)``, the next ``pop_item``) no longer has it.
- :meth:`HolonSession.clear_session` starts a new session: an execution environment naming a
  new ``session_id`` (``<session_id>/<seq>``), which starts the operator's mandate and the
  declared work afresh (docs/memory-model.md) and empties the session's item list. What the
  agent learnt stays its memory (archived episodes, recall); the history shows older turns
  while they fit. To start an agent from nothing, open a new ledger.

``get_items(limit=N)`` is the session's item list as recorded, newest ``N``: the Runner
reads it to check what it saved (a resumed run, a rewind), and holon's budget does not
apply to it; leave ``SessionSettings.limit`` unset, the budget already bounds the context.

The SDK runs the tools, so the tool write-ahead log does not guard them: a
``function_call`` reaches the session after the tool ran, with its output. Records are
durable when the run's turn ends (the next run's ``get_items``, or :meth:`close`); open the
holon agent with ``AgentConfig(fsync="always")`` to make each one durable as it is added.
One session drives one holon agent, from one event loop; the ledger has one writer. It is
not for server-managed conversations (``conversation_id``, ``previous_response_id``), which
keep the history on OpenAI's side.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

import msgspec

import holon.records as r
from holon.context import InvalidToolArguments, parse_tool_arguments, to_openai_responses
from holon.errors import UsageError
from holon.runtime import Agent, AgentConfig, ToolCall, Turn

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory import SessionSettings

__all__ = ["CHANNEL", "HolonSession"]

#: The channel of the session's own notes in the ledger (a withdrawn item).
CHANNEL: Final = "agents-sdk"
_POP_NAME: Final = "pop_item"
_WITHDRAWN: Final = re.compile(r"ledger:(\d+) withdrawn")
# The Responses request's model field is not used: only its input items are returned.
_UNUSED_MODEL: Final = "holon"
_INPUT_ROLES: Final = {"user": "user", "system": "system", "developer": "system"}
_CURRENT_INPUT: Final = "current_input"


def _text(content: Any, *, where: str) -> str:
    """The text of a message's ``content``: a string, or its text, refusal and output_text parts."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise UsageError(f"{where}: `content` must be a string or a list of parts, got {content!r}")
    parts: list[str] = []
    for part in content:
        if not isinstance(part, Mapping):
            raise UsageError(f"{where}: a content part must be an object, got {part!r}")
        text = part.get("refusal") if part.get("type") == "refusal" else part.get("text")
        if isinstance(text, str):
            parts.append(text)
        else:
            # An image or a file the model was shown: the ledger keeps text only.
            parts.append(f"[{part.get('type', 'part')} not recorded]")
    return "\n".join(parts)


def _field(item: Mapping[str, Any], key: str, *, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value:
        raise UsageError(
            f"{where}: a `{item.get('type')}` item needs a non-empty string `{key}`, got {value!r}"
        )
    return value


class HolonSession:
    """The OpenAI Agents SDK's ``Session`` protocol over a :class:`holon.Agent`'s ledger.

    Pass an open agent (the session records through it and leaves closing it to you), or
    use :meth:`open`, whose agent :meth:`close` closes. ``session_id`` defaults to the
    agent's id.
    """

    session_settings: SessionSettings | None = None

    def __init__(self, agent: Agent, *, session_id: str | None = None) -> None:
        self.agent = agent
        self.session_id = session_id if session_id is not None else agent.agent_id
        if not self.session_id:
            raise UsageError("HolonSession: session_id must be a non-empty string")
        #: Items :meth:`add_items` did not record, by type (``reasoning``, ``web_search_call``, ...).
        self.skipped: Counter[str] = Counter()
        self._owned = False
        self._turn: Turn | None = None
        self._answered = False  # the open turn holds the model's output, not only its input
        self._calls: dict[str, ToolCall] = {}  # the SDK's call_id -> a call whose output is to come

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        agent_id: str | None = None,
        session_id: str | None = None,
        config: AgentConfig | None = None,
    ) -> HolonSession:
        """A session over the ledger at ``path`` (created for ``agent_id`` when there is none)."""
        session = cls(Agent.open(path, agent_id=agent_id, config=config), session_id=session_id)
        session._owned = True
        return session

    # ------------------------------------------------------------------ the Session protocol

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """holon's context for the run that starts now; with ``limit``, the newest items as recorded.

        The item list is read back from the ledger from the session's start, each call (the
        Runner asks for it only to check a resumed write or a rewind).
        """
        if limit is not None:
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
                raise UsageError(f"get_items: limit must be None or an integer >= 0, got {limit!r}")
            items = [item for _seq, item in self._items()]
            return cast("list[TResponseInputItem]", items[len(items) - limit :] if limit else [])
        self._end_turn()
        turn = self._open_turn()
        prompt = turn.context()
        # The run's input is not recorded yet: the Runner appends it after these items. The
        # section standing for it would tell the model there is none ("no new input: continue").
        shown = msgspec.structs.replace(
            prompt, sections=tuple(s for s in prompt.sections if s.name != _CURRENT_INPUT)
        )
        return cast("list[TResponseInputItem]", to_openai_responses(shown, model=_UNUSED_MODEL)["input"])

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Record the SDK's items in the ledger, in order (see the module's docstring for the mapping)."""
        if not isinstance(items, list):
            raise UsageError(f"add_items takes a list of items, got {type(items).__name__}")
        # Every item is checked before any is recorded: a bad batch leaves the ledger as it was.
        checked = self._checked(items)
        for where, item in checked:
            self._add(item, where=where)

    async def pop_item(self) -> TResponseInputItem | None:
        """Withdraw the session's newest item by appending a note; return it (None when there is none)."""
        items = self._items()
        if not items:
            return None
        seq, item = items[-1]
        kind = item.get("type") or f"{item['role']} message"
        turn = self._turn or self._open_turn()
        turn.record(
            r.Message(
                role="channel",
                channel=CHANNEL,
                name=_POP_NAME,
                text=f"ledger:{seq} withdrawn: the application took back its last item (a {kind}); "
                "disregard it",
            )
        )
        call_id = item.get("call_id")
        if item.get("type") == "function_call" and isinstance(call_id, str):
            self._calls.pop(call_id, None)
        return cast("TResponseInputItem", item)

    async def clear_session(self) -> None:
        """Start a new session in the ledger: the item list is empty, the operator's mandate starts afresh."""
        self._end_turn()
        turn = self._open_turn()
        self._mark_session(turn, f"{self.session_id}/{self.agent.seq + 1}")
        self._end_turn()

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """End the open turn (recording the run's end); close the agent if :meth:`open` made it."""
        self._end_turn()
        if self._owned:
            self.agent.close()

    def __enter__(self) -> HolonSession:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ internals

    def _ours(self, session: str | None) -> bool:
        mine = self.session_id
        return session is not None and (session == mine or session.startswith(mine + "/"))

    def _open_turn(self) -> Turn:
        turn = self.agent.turn(trigger=CHANNEL)
        self._turn, self._answered = turn, False
        if not self._ours(self.agent.state.session):
            # The ledger was in another session (or none named): this one starts here.
            self._mark_session(turn, self.session_id)
        return turn

    def _mark_session(self, turn: Turn, session: str) -> None:
        # Where the agent works is kept: only the session it is in changes.
        current = self.agent.state.environment
        env = current.environment if current is not None else r.ExecutionEnvironment()
        extra = {**env.extra, "session_id": session}
        turn.set_environment(workspace=env.workspace, cwd=env.cwd, branch=env.branch, extra=extra)

    def _end_turn(self) -> None:
        turn, self._turn = self._turn, None
        self._calls.clear()
        if turn is not None and not turn.ended:
            # A turn here spans several calls from the framework, so no `with` block holds it:
            # it is left by hand, as the block would leave it (turn_ended, refresh, flush).
            turn.__exit__(None, None, None)

    def _turn_for_input(self) -> Turn:
        """The turn a user message goes in: the open one until the model answered in it."""
        if self._turn is not None and not self._answered:
            return self._turn
        self._end_turn()
        return self._open_turn()

    def _turn_for_output(self) -> Turn:
        if self._turn is None:
            self._open_turn()
        assert self._turn is not None
        self._answered = True
        return self._turn

    def _checked(self, items: list[Any]) -> list[tuple[str, Mapping[str, Any]]]:
        """The items with where each is, once each has the shape its type needs (UsageError otherwise)."""
        calls = set(self._calls)
        checked: list[tuple[str, Mapping[str, Any]]] = []
        for index, item in enumerate(items):
            where = f"add_items item {index}"
            if not isinstance(item, Mapping):
                raise UsageError(f"{where}: an item must be a dict (a Responses input item), got {item!r}")
            kind = item.get("type", "message" if "role" in item else None)
            if kind == "message":
                role = item.get("role")
                if role != "assistant" and role not in _INPUT_ROLES:
                    raise UsageError(
                        f"{where}: a message's role must be user, assistant, system or developer, "
                        f"got {role!r}"
                    )
                _text(item.get("content"), where=where)
            elif kind == "function_call":
                _field(item, "name", where=where)
                calls.add(_field(item, "call_id", where=where))
            elif kind == "function_call_output":
                call_id = _field(item, "call_id", where=where)
                _text(item.get("output", ""), where=where)
                if call_id not in calls and self.agent.recorded_call(call_id) is None:
                    raise UsageError(
                        f"{where}: a function_call_output for call_id {call_id!r}, whose function_call this "
                        "session has not recorded: add the function_call item first (in the same or an "
                        "earlier add_items); nothing was recorded"
                    )
            elif not isinstance(kind, str):
                raise UsageError(f"{where}: an item needs a `type` (or a `role`), got {dict(item)!r}")
            checked.append((where, item))
        return checked

    def _add(self, item: Mapping[str, Any], *, where: str) -> None:
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            role = item.get("role")
            text = _text(item.get("content"), where=where)
            if role == "assistant":
                self._turn_for_output().record_message(text)
            else:
                turn = self._turn_for_input()
                turn.record(r.Message(role=_INPUT_ROLES[str(role)], text=text))  # type: ignore[arg-type]
        elif kind == "function_call":
            self._add_call(item, where=where)
        elif kind == "function_call_output":
            self._add_output(item, where=where)
        else:
            self.skipped[str(kind)] += 1

    def _add_call(self, item: Mapping[str, Any], *, where: str) -> None:
        call_id = _field(item, "call_id", where=where)
        name = _field(item, "name", where=where)
        if call_id in self._calls:
            return  # added again before its output: recorded once
        raw = item.get("arguments")
        try:
            args = parse_tool_arguments(name, raw if isinstance(raw, str | Mapping) else None)
        except InvalidToolArguments:
            # The call happened with what the model wrote; kept whole, as the importers keep it.
            args = {"arguments": raw}
        call = self._turn_for_output().tool(name, args, idempotency_key=call_id)
        if call.result is None:
            self._calls[call_id] = call

    def _add_output(self, item: Mapping[str, Any], *, where: str) -> None:
        call_id = _field(item, "call_id", where=where)
        output = _text(item.get("output", ""), where=where)
        call = self._calls.pop(call_id, None)
        # None: recorded already (checked), the same output added again.
        if call is not None:
            call.finish(output)

    def _items(self) -> list[tuple[int, dict[str, Any]]]:
        """The session's items as recorded since it started, with their seqs, less the withdrawn ones."""
        start = self.agent.state.session_seq if self._ours(self.agent.state.session) else None
        items: list[tuple[int, dict[str, Any]]] = []
        withdrawn: set[int] = set()
        for seq, item in self._recorded(start or 0):
            if item is None:
                withdrawn.add(seq)
            else:
                items.append((seq, item))
        return [(seq, item) for seq, item in items if seq not in withdrawn]

    def _recorded(self, start: int) -> Iterator[tuple[int, dict[str, Any] | None]]:
        """Each record from ``start`` that is an item, as the item; a withdrawal as (its target, None)."""
        keys: dict[str, str] = {}  # holon call_id -> the SDK's call_id
        ledger = self.agent.ledger
        for record in ledger.read(start, self.agent.seq + 1):
            body = record.body
            if isinstance(body, r.Message) and body.task_id is None:
                if body.role == "channel":
                    found = _WITHDRAWN.match(body.text)
                    if body.channel == CHANNEL and body.name == _POP_NAME and found:
                        yield int(found.group(1)), None
                    continue
                role = "user" if body.role == "operator" else body.role
                yield record.seq, {"role": role, "content": body.text}
            elif isinstance(body, r.ToolIntent) and body.task_id is None:
                key = body.idempotency_key or body.call_id
                keys[body.call_id] = key
                arguments = json.dumps(body.args, ensure_ascii=False, separators=(",", ":"))
                yield record.seq, {
                    "type": "function_call",
                    "call_id": key,
                    "name": body.tool,
                    "arguments": arguments,
                }
            elif isinstance(body, r.ToolResult) and body.task_id is None:
                output = self.agent.output_of(body)
                yield record.seq, {
                    "type": "function_call_output",
                    "call_id": keys.get(body.call_id, body.call_id),
                    "output": output,
                }
