"""Review 24 of the offline audit: the projection config derived records and prompts state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import msgspec
import pytest

from holon import records as r
from holon.audit import connect, export_parquet, run_report
from holon.context.render import projection_stated
from holon.projections import ProjectionConfig
from holon.projections.config import DEFAULT_CONFIG, describe_projection, stated_config
from tests.runtime_support import ledger_records, prompted_turns
from tests.test_audit_support import write_ledger

CAPPED = ProjectionConfig(turn_cap=3, decisions_cap=2, messages_window=8)


@pytest.fixture(scope="module")
def agents(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two agents written by holon.Agent, one under the default config, one under CAPPED."""
    root = tmp_path_factory.mktemp("configs")
    paths = {"plain": root / "plain", "capped": root / "capped"}
    prompted_turns(paths["plain"], DEFAULT_CONFIG, range(13), agent_id="plain")
    prompted_turns(paths["capped"], CAPPED, range(7), agent_id="capped")
    return paths


def _config(value: dict[str, Any] | None) -> ProjectionConfig | None:
    return None if value is None else msgspec.convert(value, ProjectionConfig)


def _label(config: ProjectionConfig | None) -> str | None:
    return None if config is None else describe_projection(config)


def _stated(record: r.Record) -> ProjectionConfig | None:
    """The config a record states, as holon itself reads it."""
    if isinstance(record.body, r.PromptRendered):
        return projection_stated(record.body.render_config, where=f"seq {record.seq}")
    assert isinstance(record.body, r.WorkingMemoryDelta | r.ContextEpisodeRecord)
    return stated_config(record.body)


_TABLE_OF_KIND = {
    "working_memory_delta": "deltas",
    "context_episode": "episodes",
    "prompt_rendered": "prompts",
}


def _table_configs(
    con: duckdb.DuckDBPyConnection, agent: str
) -> dict[int, tuple[ProjectionConfig | None, str | None]]:
    got: dict[int, tuple[ProjectionConfig | None, str | None]] = {}
    for table in _TABLE_OF_KIND.values():
        rows = con.execute(
            f"SELECT seq, projection, projection_label FROM {table} WHERE agent_id = ?", [agent]
        ).fetchall()
        got.update({seq: (_config(projection), label) for seq, projection, label in rows})
    return got


def test_deltas_episodes_and_prompts_state_their_projection_config(agents: dict[str, Path]) -> None:
    # The tables had no column for it: a fleet's ledgers under different turn caps and
    # windows could not be told apart, nor their prompt sizes compared per config.
    con = connect(list(agents.values()))
    for agent, path in agents.items():
        records = [rec for rec in ledger_records(path) if rec.kind in _TABLE_OF_KIND]
        assert {rec.kind for rec in records} == set(_TABLE_OF_KIND), agent  # every kind is checked
        expected = {rec.seq: (_stated(rec), _label(_stated(rec))) for rec in records}
        assert _table_configs(con, agent) == expected
    assert {rec for (rec,) in con.execute("SELECT DISTINCT projection_label FROM prompts").fetchall()} == {
        "ProjectionConfig()",
        "ProjectionConfig(turn_cap=3, decisions_cap=2, messages_window=8)",
    }
    # A struct DuckDB filters and groups on, field by field.
    capped = con.execute("SELECT DISTINCT agent_id FROM deltas WHERE projection.turn_cap = 3").fetchall()
    assert capped == [("capped",)]
    assert con.execute(
        "SELECT agent_id, projection, projection_label, projection_configs FROM agents"
    ).fetchall() == [
        ("capped", msgspec.to_builtins(CAPPED), describe_projection(CAPPED), 1),
        ("plain", msgspec.to_builtins(DEFAULT_CONFIG), "ProjectionConfig()", 1),
    ]


def _older(records: list[r.Record]) -> list[r.Record]:
    """``records`` as an older holon wrote them: derived records state no config, prompts no render_config."""
    out = []
    for rec in records:
        body = rec.body
        if isinstance(body, r.WorkingMemoryDelta | r.ContextEpisodeRecord):
            body = msgspec.structs.replace(body, projection_version=8, projection=None)
        elif isinstance(body, r.PromptRendered):
            body = msgspec.structs.replace(body, render_config={})
        out.append(r.Record(body=body, ts=rec.ts, turn=rec.turn))
    return out


def test_records_that_state_no_config_have_none(agents: dict[str, Path], tmp_path: Path) -> None:
    # An older holon's deltas and episodes (projection version 8) and a prompt of another
    # program state no config: NULL, not the default they may or may not have run under.
    write_ledger(tmp_path / "old", "old", _older(ledger_records(agents["capped"])))
    con = connect(tmp_path / "old")
    for table in _TABLE_OF_KIND.values():
        counts = con.execute(f"SELECT count(*), count(projection), count(projection_label) FROM {table}")
        rows, configs, labels = counts.fetchone() or (0, 0, 0)
        assert rows > 0 and configs == labels == 0, table
    assert con.execute("SELECT projection, projection_label, projection_configs FROM agents").fetchall() == [
        (None, None, 0)
    ]


def _prompt(render_config: dict[str, Any]) -> r.Record:
    body = r.PromptRendered(
        working_memory_revision=0,
        compression_epoch=0,
        cache_key="k",
        prompt_hash="h",
        total_tokens=10,
        budget=100,
        estimator="chars/4",
        render_config=render_config,
    )
    return r.Record(body=body, ts=1, turn=None)


@pytest.mark.parametrize(
    ("render_config", "expected"),
    [
        ({}, None),  # another program's prompt
        ({"version": 6}, None),  # rendered before the renderer recorded every non-default config
        ({"version": 7}, DEFAULT_CONFIG),  # the default, by omission
        ({"version": "7"}, None),
        ({"version": 13, "projection": {"turn_cap": 5}}, ProjectionConfig(turn_cap=5)),  # the rest: defaults
        ({"version": 13, "projection": "turn_cap=5"}, None),  # not a config: holon refuses to read it
    ],
)
def test_a_prompt_states_its_config_as_holon_reads_it(
    tmp_path: Path, render_config: dict[str, Any], expected: ProjectionConfig | None
) -> None:
    write_ledger(tmp_path / "l", "a", [_prompt(render_config)])
    if isinstance(render_config.get("projection"), dict | None):  # holon reads the others as errors
        assert projection_stated(render_config, where="seq 0") == expected
    got = connect(tmp_path / "l").execute("SELECT projection, projection_label FROM prompts").fetchall()
    assert got == [(None if expected is None else msgspec.to_builtins(expected), _label(expected))]


def test_a_ledger_whose_records_state_two_configs_counts_both(
    agents: dict[str, Path], tmp_path: Path
) -> None:
    # Agent.open refuses such a ledger; the audit names it (projection_configs > 1) and
    # keeps the first config stated, as replay reads the config of a ledger.
    records = ledger_records(agents["capped"])
    write_ledger(tmp_path / "mixed", "mixed", [*records, _prompt({"version": 13})])
    con = connect(tmp_path / "mixed")
    assert con.execute("SELECT projection_label, projection_configs FROM agents").fetchall() == [
        (describe_projection(CAPPED), 2)
    ]


def test_the_projection_struct_round_trips_through_parquet(agents: dict[str, Path], tmp_path: Path) -> None:
    export_parquet([agents["capped"]], tmp_path / "out")
    con = connect(agents["capped"])
    for table in ("agents", *_TABLE_OF_KIND.values()):
        files = f"{tmp_path}/out/{table}/{'*' if table == 'agents' else '*/*'}/*.parquet"
        back = duckdb.sql(
            f"SELECT projection, projection_label FROM read_parquet('{files}', hive_partitioning = true) "
            "ORDER BY ALL"
        )
        assert back.types == con.sql(f"SELECT projection, projection_label FROM {table}").types
        assert (
            back.fetchall()
            == con.execute(f"SELECT projection, projection_label FROM {table} ORDER BY ALL").fetchall()
        )


def test_the_episodes_report_groups_by_projection_config(agents: dict[str, Path]) -> None:
    # An episode's length is bounded by its config's turn_cap: the report said how long
    # episodes ran without the cap that closed them.
    con = connect(list(agents.values()))
    got = {
        (row["agent_id"], row["projection_label"], row["boundary_reason"]): row["max_turns"]
        for row in run_report(con, "episodes").as_dicts()
    }
    assert got == {
        ("capped", describe_projection(CAPPED), "turn_cap"): CAPPED.turn_cap,
        ("plain", "ProjectionConfig()", "turn_cap"): DEFAULT_CONFIG.turn_cap,
    }
