"""Episode boundaries: each reason, their order, epoch bumps, archive and episode fields."""

from __future__ import annotations

import pytest

from holon import records as r
from holon.projections import BOUNDARY_ORDER, EpisodeArchive, ProjectionConfig, boundary_reasons, task_job
from holon.projections.memory import ARCHIVE_CHUNK
from tests.live import LiveLedger


def _episodes(records: tuple[r.Record, ...]) -> list[r.ContextEpisodeRecord]:
    return [rec.body for rec in records if isinstance(rec.body, r.ContextEpisodeRecord)]


def _turn(live: LiveLedger, *bodies: r.Body, outcome: str = "completed") -> list[r.ContextEpisodeRecord]:
    live.start_turn()
    live.render()
    for body in bodies:
        live.append(body)
    return _episodes(live.end_turn(outcome))


def _start(live: LiveLedger) -> None:
    _turn(live, r.WorkItem(id="W1", objective="first", state="active", scope_constraints=("no deps",)))


def test_active_work_switched() -> None:
    live = LiveLedger()
    _start(live)
    (episode,) = _turn(live, r.WorkItem(id="W2", objective="second", state="active"))
    assert episode.boundary_reason == "active_work_switched"
    assert (episode.work_item_id, episode.objective, episode.scope_hints) == ("W1", "first", ("no deps",))
    assert (episode.first_turn, episode.last_turn, episode.from_seq) == (1, 2, 0)
    assert live.state.memory.builder.work_item_id == "W2"


def test_finishing_the_work_item_is_a_switch_away_from_it() -> None:
    live = LiveLedger()
    _start(live)
    (episode,) = _turn(live, r.WorkItemState(id="W1", state="done"))
    assert episode.boundary_reason == "active_work_switched"
    assert live.state.memory.builder.work_item_id is None


def test_first_activation_is_adopted_not_a_switch() -> None:
    live = LiveLedger()
    assert _turn(live, r.Message(role="user", text="hi")) == []
    assert _turn(live, r.WorkItem(id="W1", objective="o", state="active")) == []
    assert live.state.memory.builder.work_item_id == "W1"


def test_wait_boundary_by_outcome_and_by_open_wait() -> None:
    live = LiveLedger()
    _start(live)
    (episode,) = _turn(live, r.Message(role="assistant", text="over to you"), outcome="waiting")
    assert episode.boundary_reason == "wait_boundary"
    (again,) = _turn(live, r.WaitingIntent(id="w", waiting_on="ci run"))
    assert again.boundary_reason == "wait_boundary" and again.waiting == ("w: ci run",)
    # A wait opened and resolved within the turn is not a boundary.
    live.append(r.WaitingResolved(id="w"), in_turn=False)
    assert _turn(live, r.WaitingIntent(id="w2", waiting_on="x"), r.WaitingResolved(id="w2")) == []


def test_task_rejoined() -> None:
    live = LiveLedger()
    _start(live)
    _turn(live, r.TaskStarted(id="t", description="build"))
    live.append(r.TaskResult(id="t", status="ok", summary="built fine"), in_turn=False)
    (episode,) = _turn(live)
    assert episode.boundary_reason == "task_rejoined"
    assert "task t ok: built fine" in episode.summary_lines


def test_an_episode_names_the_job_of_each_task_result_it_lists() -> None:
    live = LiveLedger()
    _start(live)
    _turn(live, r.TaskStarted(id="t1", description="run the test suite"))
    live.append(r.TaskResult(id="t1", status="error", summary="3 failed"), in_turn=False)
    # A result whose start is not in the ledger (an import's) names no job.
    live.append(r.TaskResult(id="t0", status="ok", summary="from before"), in_turn=False)
    (episode,) = _turn(live)
    assert episode.task_runs == (r.TaskRun(id="t1", job=task_job("run the test suite")),)
    assert {"task t1 error: 3 failed", "task t0 ok: from before"} <= set(episode.summary_lines)
    # Runs of one job are tasks of one description.
    assert task_job("run the test suite") != task_job("run the test suite again")


def test_result_checkpoint() -> None:
    live = LiveLedger()
    _start(live)
    (episode,) = _turn(
        live,
        r.ToolIntent(call_id="c", tool="bash", args={"command": "pytest -q"}),
        r.ToolResult(call_id="c", tool="bash", status="ok", exit_code=0, touched_files=("a.py",)),
        r.Decision(id="d", text="keep it simple"),
        r.FollowUp(id="f", text="write docs", work_item_id="W1"),
        r.Brief(status="result", text="tests pass"),
    )
    assert episode.boundary_reason == "result_checkpoint"
    assert episode.touched_files == ("a.py",)
    assert episode.commands == ("pytest -q",)
    assert episode.verification == ("pytest -q: ok, exit 0",)
    assert episode.decisions == ("d: keep it simple",)
    assert episode.follow_ups == ("f: write docs",)
    assert episode.summary_lines[-2:] == ("result: tests pass", "closed by: result_checkpoint")


def test_turn_cap() -> None:
    live = LiveLedger(ProjectionConfig(turn_cap=3))
    _start(live)
    assert _turn(live) == []
    (episode,) = _turn(live)
    assert episode.boundary_reason == "turn_cap"
    assert (episode.first_turn, episode.last_turn) == (1, 3)
    assert _turn(live) == [] and _turn(live) == []
    (second,) = _turn(live)
    assert (second.first_turn, second.last_turn, second.episode_id) == (4, 6, 1)
    turn_four = next(rec for rec in live.records if rec.kind == "turn_started" and rec.turn == 4)
    # The next episode starts at the first evidence after the last one: derived records are skipped.
    assert second.from_seq == turn_four.seq > episode.to_seq + 1


def test_several_boundaries_finalize_one_episode_named_by_the_first_in_order() -> None:
    live = LiveLedger(ProjectionConfig(turn_cap=2))
    _start(live)
    _turn(live, r.TaskStarted(id="t", description="x"))  # turn cap fires here
    live.append(r.TaskResult(id="t", status="ok", summary="ok"), in_turn=False)
    live.start_turn()
    live.append(r.WorkItem(id="W2", objective="next", state="active"))
    live.append(r.Brief(status="result", text="done"))
    live.end_turn("waiting")
    (episode,) = _episodes(tuple(live.records[-2:]))
    assert episode.boundary_reason == "active_work_switched"
    assert BOUNDARY_ORDER == (
        "active_work_switched",
        "task_rejoined",
        "result_checkpoint",
        "wait_boundary",
        "turn_cap",
    )


def test_boundary_reasons_lists_every_reason_that_fired() -> None:
    live = LiveLedger(ProjectionConfig(turn_cap=1))
    live.start_turn()
    live.append(r.TaskResult(id="t", status="ok", summary="s"))
    live.append(r.TurnEnded(outcome="waiting"))
    assert boundary_reasons(live.state) == ("task_rejoined", "result_checkpoint", "wait_boundary", "turn_cap")


def test_finalizing_bumps_epoch_and_archives_in_order() -> None:
    live = LiveLedger(ProjectionConfig(turn_cap=1))
    for _ in range(3):
        _turn(live)
    memory = live.state.memory
    assert memory.compression_epoch == 3 == memory.archived_episodes
    assert [e.episode_id for e in memory.archive] == [0, 1, 2]
    assert memory.archive.get(1).first_turn == 2


def test_episode_lists_are_capped() -> None:
    live = LiveLedger(ProjectionConfig(episode_list_cap=2, episode_summary_cap=3))
    _start(live)
    calls = []
    for i in range(4):
        calls += [
            r.ToolIntent(call_id=f"c{i}", tool="bash", args={"command": f"cmd {i}"}),
            r.ToolResult(call_id=f"c{i}", tool="bash", status="ok", touched_files=(f"f{i}.py",)),
        ]
    (episode,) = _turn(live, *calls, r.Brief(status="result", text="r"))
    assert episode.commands == ("cmd 2", "cmd 3")
    assert episode.touched_files == ("f0.py", "f1.py")
    assert len(episode.summary_lines) == 3 and episode.summary_lines[-1] == "closed by: result_checkpoint"


def test_episode_files_are_keyed_as_the_working_set_keys_them() -> None:
    live = LiveLedger()
    _start(live)
    (episode,) = _turn(
        live,
        r.ToolIntent(call_id="c", tool="bash", args={"command": "make"}),
        r.ToolResult(
            call_id="c", tool="bash", status="ok", touched_files=("./b.py", "b.py", " ", "", " a.py")
        ),
        r.Brief(status="result", text="built"),
    )
    # One file per path the working set knows, no blank entries: `./b.py` is `b.py`.
    assert episode.touched_files == ("b.py", "a.py")
    assert set(episode.touched_files) <= set(live.state.runtime.files)


def test_archive_chunks_and_lookups() -> None:
    archive = EpisodeArchive()
    episodes = [
        r.ContextEpisodeRecord(
            episode_id=i,
            boundary_reason="turn_cap",
            work_item_id=None,
            first_turn=i,
            last_turn=i,
            from_seq=i,
            to_seq=i,
            projection_version=1,
        )
        for i in range(ARCHIVE_CHUNK * 2 + 5)
    ]
    for episode in episodes:
        archive = archive.append(episode)
    assert len(archive) == len(episodes) and list(archive) == episodes
    assert len(archive.chunks) == 3
    assert archive.get(ARCHIVE_CHUNK + 1) == episodes[ARCHIVE_CHUNK + 1]
    assert archive.latest(7) == tuple(episodes[-7:])
    assert archive.latest(1000) == tuple(episodes)
    with pytest.raises(IndexError):
        archive.get(len(episodes))


def test_work_derived_from_a_request_is_an_episode_that_a_new_session_closes() -> None:
    # No work item declared: the first request of the session is the episode's work and
    # objective, and every request made during it is kept. A new session is new work.
    live = LiveLedger()
    live.append(r.ExecutionEnvironment(extra={"session_id": "s1"}))
    assert _turn(live, r.Message(role="user", text="my sister's dog is called Biscuit")) == []
    assert live.state.memory.builder.work_item_id is not None
    first = live.state.memory.builder.work_item_id
    assert first.startswith("request:")
    assert _turn(live, r.Message(role="user", text="she lives in Lisbon")) == []
    live.append(r.ExecutionEnvironment(extra={"session_id": "s2"}))
    (episode,) = _turn(live, r.Message(role="user", text="what is the weather like?"))
    assert episode.boundary_reason == "active_work_switched"
    assert episode.work_item_id == first and episode.objective == "my sister's dog is called Biscuit"
    # It ends where its session did: the new session's first turn is the next episode's.
    assert episode.requests == ("my sister's dog is called Biscuit", "she lives in Lisbon")
    session_seq = live.state.runtime.session_seq
    assert session_seq is not None and episode.to_seq < session_seq
    builder = live.state.memory.builder
    assert builder.work_item_id not in (None, first) and builder.requests == ("what is the weather like?",)
    assert builder.from_seq == session_seq


def test_a_work_item_declared_for_a_request_takes_over_its_episode() -> None:
    live = LiveLedger()
    # The request arrives first, the agent declares the work it asks for in the same turn:
    # one episode, the declared item's, not a one-turn episode of the request.
    assert (
        _turn(
            live,
            r.Message(role="user", text="fix the parser"),
            r.WorkItem(id="W1", objective="fix it", state="active"),
        )
        == []
    )
    assert live.state.memory.builder.work_item_id == "W1"


# --------------------------------------------------------------------------- waits


def _episodes_of(records: tuple[r.Record, ...]) -> list[r.ContextEpisodeRecord]:
    return [rec.body for rec in records if isinstance(rec.body, r.ContextEpisodeRecord)]


def test_a_wait_opened_and_resolved_in_a_turn_is_no_boundary_while_an_older_wait_is_open() -> None:
    # docs/memory-model.md: wait_boundary fires when "a waiting intent opened in the
    # interval is still open". It fired whenever the turn opened a wait and *any* wait was
    # open, so a long-standing wait turned every turn that opened and resolved a short one
    # into an episode boundary (and a compression_epoch bump, i.e. a cache-prefix rewrite).
    live = LiveLedger()
    live.start_turn()
    live.append(r.WaitingIntent(id="w1", waiting_on="operator approval"))
    (first,) = _episodes_of(live.end_turn("waiting"))
    assert first.boundary_reason == "wait_boundary"
    live.start_turn()
    live.append(r.WaitingIntent(id="w2", waiting_on="ci run"))
    live.append(r.WaitingResolved(id="w2"))
    assert _episodes_of(live.end_turn()) == []
    # A wait the turn opened and left open still is one, whatever else is open.
    live.start_turn()
    live.append(r.WaitingIntent(id="w3", waiting_on="review"))
    (third,) = _episodes_of(live.end_turn())
    assert third.boundary_reason == "wait_boundary"


def test_a_second_resolution_of_a_wait_does_not_make_the_turn_a_wake() -> None:
    # A wait resolved twice (the operator answered, then its timer fired) is carried the
    # second time, but it was still counted as a resolution: the turn's delta claimed
    # "wake_resumed" although nothing was waiting any more.
    live = LiveLedger()
    live.start_turn()
    live.append(r.WorkItem(id="W1", objective="o", state="active"))
    live.append(r.WaitingIntent(id="w", waiting_on="operator"))
    live.end_turn()
    live.append(r.WaitingResolved(id="w", resolution="arrived"), in_turn=False)
    live.start_turn()
    live.render()  # refreshes "waiting on w" away: the wake is shown here
    live.end_turn()
    live.start_turn()
    live.append(r.WaitingResolved(id="w", resolution="timed_out"))
    steps = (r.PlanStep(id="a", text="first"),)
    live.append(r.WorkPlan(work_item_id="W1", steps=steps))
    deltas = [rec.body for rec in live.end_turn() if isinstance(rec.body, r.WorkingMemoryDelta)]
    assert [d.reason for d in deltas] == ["plan_changed"]
    assert live.state.runtime.carried_count == 1
