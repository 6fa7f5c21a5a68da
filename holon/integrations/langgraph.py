"""A LangGraph model hook backed by a holon ledger (``pip install 'holon[langgraph]'``).

``create_react_agent(model, tools, pre_model_hook=hook.pre_model_hook,
post_model_hook=hook.post_model_hook)`` records the graph's messages in the ledger and sends
the model holon's context instead of the whole message list:

- :meth:`HolonHook.pre_model_hook` runs before every model call. It records the messages of
  the graph's state it has not recorded yet (by message id): a human message opens a holon
  turn with it as the input (ending the previous turn, whose post-turn refresh derives
  working memory and episodes), the model's messages are assistant messages and their tool
  calls tool intents (under the tool call's id as idempotency key), a tool message is its
  call's result, a system message a system message. It returns ``{"llm_input_messages":
  ...}``: the turn's prompt (:meth:`holon.runtime.Turn.context`, which records what the
  model is shown), as the chat messages :func:`holon.context.to_openai_chat` builds, then the
  graph's own messages recorded since that prompt was rendered (this turn's tool rounds, as
  they are, with their ids). When those no longer fit the budget, the prompt is rendered
  again with them in its history, and the rounds start over, as for any holon daemon.
- :meth:`HolonHook.post_model_hook` runs after every model call and records its reply (no
  state update). Without it the model's last answer of an invocation is recorded only when
  a later invocation's state shows it (with a checkpointer), or never.

Messages are told apart by id. A new hook on a ledger an earlier hook wrote (a restarted
process, whose checkpointer brings the thread's messages back) takes the messages up to
where the ledger's last turn stopped as recorded (:meth:`HolonHook._held_already`).

The graph's state keeps every message (holon does not trim it: the checkpointer's history
is the graph's, the ledger is holon's); only what the model is sent is budgeted. The tools
run in the graph, so the tool write-ahead log does not guard them: a call reaches the
ledger with its result. :meth:`HolonHook.close` ends the last turn; one hook drives one holon
agent, from one thread at a time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import convert_to_messages

import holon.records as r
from holon.context import Prompt, to_openai_chat
from holon.errors import UsageError
from holon.runtime import Agent, AgentConfig, ToolCall, Turn

__all__ = ["HolonHook"]

# The request's model field is not used: only its messages are returned.
_UNUSED_MODEL: Final = "holon"
_TRIGGER: Final = "langgraph"


def _text(content: str | list[str | dict[str, Any]]) -> str:
    """A message's text: its string content, or its text blocks joined."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block.get("text"), str):
            parts.append(block["text"])
        else:
            # An image or a file the model was shown: the ledger keeps text only.
            parts.append(f"[{block.get('type', 'block')} not recorded]")
    return "\n".join(parts)


class HolonHook:
    """The ``pre_model_hook`` / ``post_model_hook`` pair of ``create_react_agent``, over a holon agent.

    Pass an open :class:`holon.Agent` (closing it stays yours) or use :meth:`open`, whose
    agent :meth:`close` closes.
    """

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self._owned = False
        self._turn: Turn | None = None
        self._recorded: set[str] = set()  # ids of the graph's messages recorded
        self._calls: dict[str, ToolCall] = {}  # tool call id -> a call whose result is to come
        self._prompt: Prompt | None = None
        self._rounds: list[str] = []  # ids of messages recorded after the prompt, in order
        self._resuming = True  # the first state seen may hold what an earlier hook recorded

    @classmethod
    def open(
        cls, path: str | Path, *, agent_id: str | None = None, config: AgentConfig | None = None
    ) -> HolonHook:
        """A hook over the ledger at ``path`` (created for ``agent_id`` when there is none)."""
        hook = cls(Agent.open(path, agent_id=agent_id, config=config))
        hook._owned = True
        return hook

    # ------------------------------------------------------------------ the graph's hooks

    def pre_model_hook(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """Record the state's new messages; return holon's context as ``llm_input_messages``."""
        messages = self._messages(state)
        self.record(messages)
        if self._turn is None:
            raise UsageError(
                "pre_model_hook: the graph's state holds no human message to start a turn with; "
                "invoke the graph with {'messages': [('user', ...)]}"
            )
        prompt = self._turn.context()
        if prompt is not self._prompt:
            # Rendered again: everything recorded so far is in its history.
            self._prompt, self._rounds = prompt, []
        rounds = set(self._rounds)
        head = convert_to_messages(to_openai_chat(prompt, model=_UNUSED_MODEL)["messages"])
        return {"llm_input_messages": [*head, *(m for m in messages if m.id in rounds)]}

    def post_model_hook(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """Record the model's reply (and anything else new); update nothing in the state."""
        self.record(self._messages(state))
        return {}

    # ------------------------------------------------------------------ recording

    def record(self, messages: Sequence[BaseMessage]) -> int:
        """Record the messages not recorded yet, in order; returns how many were recorded.

        Every message is checked before any is recorded: an unknown kind, a message without
        an id or a tool message whose call was never recorded is a UsageError, and the
        ledger is left as it was.
        """
        if self._resuming:
            self._resuming = False
            self._recorded.update(str(m.id) for m in self._held_already(messages))
        new = [m for m in messages if m.id not in self._recorded]
        calls = set(self._calls)
        for message in new:
            if not isinstance(message.id, str) or not message.id:
                raise UsageError(
                    f"a {type(message).__name__} without an id: HolonHook tells recorded messages by "
                    "their id, which the graph's `messages` reducer (add_messages) gives each one"
                )
            if isinstance(message, AIMessage):
                calls.update(str(call["id"]) for call in message.tool_calls)
            elif isinstance(message, ToolMessage):
                known = message.tool_call_id in calls or self.agent.recorded_call(message.tool_call_id)
                if not known:
                    raise UsageError(
                        f"tool message {message.id} answers tool call {message.tool_call_id!r}, which no "
                        "recorded AI message made; nothing was recorded"
                    )
            elif not isinstance(message, HumanMessage | SystemMessage):
                raise UsageError(
                    f"{type(message).__name__} {message.id}: HolonHook records human, AI, tool and system "
                    "messages; nothing was recorded"
                )
        for message in new:
            self._record(message)
            self._recorded.add(str(message.id))
        return len(new)

    def _held_already(self, messages: Sequence[BaseMessage]) -> Sequence[BaseMessage]:
        """The messages of a state a hook meets first that an earlier hook on this ledger recorded.

        A hook remembers the messages it recorded by id, in memory; after a restart, a
        checkpointer's thread brings back every message of its earlier invocations. The
        ledger's last turn says where the earlier hook stopped: a turn this hook's kind
        opened with the input of the state's last human message (the invocation was under
        way) or of the one before it (it had finished). What comes before that point was
        recorded; the rest is new. Anything else (a ledger or a thread new to the other) is
        all new, and recorded.
        """
        turn = self.agent.state.turn
        if turn is None or turn.trigger != _TRIGGER or turn.started_seq is None:
            return ()
        # Agent.turn appends a turn's input right after its turn_started, in one append.
        opening = self.agent.ledger.get(turn.started_seq + 1) if turn.started_seq < self.agent.seq else None
        if opening is None or not isinstance(opening.body, r.Message) or opening.turn != turn.index:
            return ()
        started_with = opening.body.text
        humans = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
        if humans and _text(messages[humans[-1]].content) == started_with:
            return messages[: humans[-1] + 1]
        if len(humans) > 1 and _text(messages[humans[-2]].content) == started_with:
            return messages[: humans[-1]]
        return ()

    def _record(self, message: BaseMessage) -> None:
        if isinstance(message, HumanMessage):
            self._end_turn()
            self._turn = self.agent.turn(input=_text(message.content), trigger=_TRIGGER)
            return
        turn = self._turn
        if turn is None:  # the model or a tool before any human message: a turn of its own
            turn = self._turn = self.agent.turn(trigger=_TRIGGER)
        if isinstance(message, SystemMessage):
            turn.record(r.Message(role="system", text=_text(message.content)))
        elif isinstance(message, AIMessage):
            text = _text(message.content)
            if text or not message.tool_calls:
                turn.record_message(text)
            for tool_call in message.tool_calls:
                call_id = str(tool_call["id"])
                call = turn.tool(tool_call["name"], dict(tool_call["args"]), idempotency_key=call_id)
                if call.result is None:
                    self._calls[call_id] = call
        elif isinstance(message, ToolMessage):
            pending = self._calls.pop(message.tool_call_id, None)
            if pending is not None:  # None: its result is recorded already
                pending.finish(_text(message.content), status="error" if message.status == "error" else "ok")
        if self._prompt is not None:
            self._rounds.append(str(message.id))

    def _messages(self, state: Mapping[str, Any]) -> list[BaseMessage]:
        messages = state.get("messages") if isinstance(state, Mapping) else getattr(state, "messages", None)
        if not isinstance(messages, list):
            raise UsageError(f"the graph's state has no `messages` list: got {type(state).__name__}")
        return messages

    def _end_turn(self) -> None:
        turn, self._turn = self._turn, None
        self._calls.clear()
        self._prompt, self._rounds = None, []
        if turn is not None and not turn.ended:
            # A turn here spans several calls from the framework, so no `with` block holds it:
            # it is left by hand, as the block would leave it (turn_ended, refresh, flush).
            turn.__exit__(None, None, None)

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """End the open turn; close the agent if :meth:`open` made it."""
        self._end_turn()
        if self._owned:
            self.agent.close()

    def __enter__(self) -> HolonHook:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
