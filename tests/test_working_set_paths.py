"""Working-set paths: a file named absolutely inside the working directory and relatively is one file.

An imported SWE-agent run had `reproduce.py` and `/testbed/reproduce.py` as two working-set
entries (the editor reports absolute paths, commands name relative ones): two of the
snapshot's few file slots for one file.
"""

from __future__ import annotations

import pytest

from holon import records as r
from holon.projections import ProjectionConfig, RuntimeState, apply_runtime
from holon.projections.state import normalize_path
from tests.live import LiveLedger


def _files(*bodies: r.Body) -> list[str]:
    state = RuntimeState()
    config = ProjectionConfig()
    for seq, body in enumerate(bodies):
        state = apply_runtime(state, r.Record(body=body, ts=1000 + seq, turn=1, seq=seq), config)
    return list(state.files)


def _edit_then_run(cwd: str | None, *, workspace: str | None = None) -> list[str]:
    return _files(
        r.ExecutionEnvironment(cwd=cwd, workspace=workspace),
        r.ToolIntent(call_id="e", tool="str_replace_editor", args={"path": "/testbed/reproduce.py"}),
        r.ToolResult(
            call_id="e", tool="str_replace_editor", status="ok", touched_files=("/testbed/src/m.py",)
        ),
        r.ToolIntent(call_id="b", tool="bash", args={"file": "reproduce.py"}),
        r.ToolResult(call_id="b", tool="bash", status="ok", touched_files=("./src/m.py",)),
    )


def test_absolute_and_relative_names_of_one_file_are_one_entry_keyed_relative() -> None:
    assert _edit_then_run("/testbed") == ["reproduce.py", "src/m.py"]
    assert _edit_then_run("/testbed/") == ["reproduce.py", "src/m.py"]
    # With no cwd the workspace is the working directory.
    assert _edit_then_run(None, workspace="/testbed") == ["reproduce.py", "src/m.py"]


@pytest.mark.parametrize(
    "cwd",
    [
        None,  # no working directory declared: paths stay as written
        "testbed",  # a relative cwd says nothing about absolute paths
        "/",  # the root: every absolute path would lose its leading slash
        "/test",  # a prefix of the directory name, not a parent directory
    ],
)
def test_paths_stay_as_written_without_a_directory_that_holds_them(cwd: str | None) -> None:
    assert _edit_then_run(cwd) == ["/testbed/reproduce.py", "/testbed/src/m.py", "reproduce.py", "src/m.py"]


def test_normalize_path_keeps_paths_outside_and_the_directory_itself() -> None:
    assert normalize_path("/etc/hosts", base="/testbed") == "/etc/hosts"
    assert normalize_path("/testbed", base="/testbed") == "/testbed"
    assert normalize_path("/testbed/", base="/testbed") == "/testbed/"
    assert normalize_path(" /testbed/a/b.py ", base="/testbed") == "a/b.py"
    assert normalize_path("./a.py", base="/testbed") == "a.py"


def test_an_episode_lists_the_file_once_as_the_working_set_keys_it() -> None:
    live = LiveLedger()
    live.start_turn()
    live.render()
    live.append(r.ExecutionEnvironment(cwd="/testbed"))
    live.append(r.WorkItem(id="W1", objective="fix", state="active"))
    live.end_turn("completed")
    live.start_turn()
    live.render()
    live.append(r.ToolIntent(call_id="c", tool="bash", args={"command": "make"}))
    live.append(
        r.ToolResult(call_id="c", tool="bash", status="ok", touched_files=("/testbed/a.py", "a.py", "/etc/x"))
    )
    live.append(r.Brief(status="result", text="built"))
    records = live.end_turn("completed")
    (episode,) = [rec.body for rec in records if isinstance(rec.body, r.ContextEpisodeRecord)]
    assert episode.touched_files == ("a.py", "/etc/x")
    assert set(episode.touched_files) <= set(live.state.runtime.files)


def test_a_relative_cwd_is_taken_inside_the_workspace() -> None:
    files = _edit_then_run("src", workspace="/testbed")
    # The working directory is /testbed/src: only what lies inside it is keyed relative.
    assert files == ["/testbed/reproduce.py", "m.py", "reproduce.py", "src/m.py"]
    assert _edit_then_run("./", workspace="/testbed") == ["reproduce.py", "src/m.py"]
