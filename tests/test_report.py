"""`holon report`: one self-contained HTML page per run, checked in a real browser and against the audit.

The browser is headless Chromium from the system packages, driven by selenium through
the system chromedriver (docs/dependencies.md). `make test` installs it when it is
missing and sets HOLON_REQUIRE_BROWSER=1, so there a missing browser fails these tests;
a developer without Chromium sees them skipped.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import holon.records as r
from holon.audit import connect
from holon.cli import main
from holon.ledger import Ledger
from holon.report import CostSeries, page, read_run, report_html
from holon.report.data import RESTORE_TOOL, SIMULATED_SERIES
from holon.report.svg import number
from holon.runtime import RECALL_TOOL_NAMES
from holon.simulate import simulate_ledger, simulation_budget
from tests.test_audit_support import session_records, write_ledger

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
except ImportError:  # without selenium the browser tests skip, or fail where the browser is required
    webdriver = None

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
CHROMEDRIVER = shutil.which("chromedriver")
REQUIRED = os.environ.get("HOLON_REQUIRE_BROWSER") == "1"


@pytest.fixture(scope="module")
def ledgers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("report")
    records, blobs = session_records(30)
    write_ledger(root / "session", "agent-7", records, blobs=blobs)
    # An imported transcript's shape: turns, messages and tool calls, no prompt rendered.
    write_ledger(
        root / "imported", "imported", [x for x in records if x.kind != r.PromptRendered.KIND], blobs=blobs
    )
    # `holon simulate` of the imported run: holon's prompts for its calls, and both series.
    with Ledger.open(root / "imported", readonly=True) as imported:
        simulate_ledger(imported, root / "simulated", simulation_budget(8_000))
    return {"session": root / "session", "imported": root / "imported", "simulated": root / "simulated"}


def _report(path: Path, out: Path) -> str:
    result = CliRunner().invoke(main, ["report", str(path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert f"to {out}" in result.output
    return out.read_text()


def _embedded(html: str) -> dict[str, Any]:
    found = re.search(r'<script type="application/json" id="holon-report-data">(.*?)</script>', html, re.S)
    assert found is not None, "the page embeds its figures as JSON"
    data: dict[str, Any] = json.loads(found.group(1))
    return data


def _audit(path: Path, *args: str) -> list[dict[str, Any]]:
    result = CliRunner().invoke(main, ["audit", str(path), "--json", *args])
    assert result.exit_code == 0, result.output
    rows: list[dict[str, Any]] = json.loads(result.output)
    return rows


def _count(path: Path, sql: str) -> int:
    return int(next(iter(_audit(path, "--sql", sql)[0].values())))


def test_the_page_figures_are_the_audits(ledgers: dict[str, Path], tmp_path: Path) -> None:
    path = ledgers["session"]
    figures = _embedded(_report(path, tmp_path / "report.html"))
    calls = _audit(path, "--report", "calls")
    tokens = sum(c["total_tokens"] for c in calls)
    cached = sum(c["cached_tokens"] for c in calls)
    assert len(calls) > 20 and cached > 0  # a run worth drawing
    assert figures["agent_id"] == "agent-7"
    assert figures["calls"] == len(calls) == _count(path, "SELECT count(*) FROM prompts")
    assert figures["tokens"] == tokens
    assert figures["cached_tokens"] == cached
    assert figures["cached_share"] == round(cached / tokens, 4)
    assert figures["prefix_breaks"] == sum(1 for c in calls if c["prefix_break"])
    assert figures["evictions"] == _count(path, "SELECT count(*) FROM omissions") > 0
    assert figures["tool_calls"] == _count(path, "SELECT count(*) FROM tool_calls") > 0
    restores = f"SELECT count(*) FROM tool_calls WHERE tool = '{RESTORE_TOOL}'"
    assert figures["restores"] == _count(path, restores)
    assert figures["turns"] == _count(path, "SELECT count(*) FROM turns")
    assert figures["episodes"] == _count(path, "SELECT count(*) FROM episodes")
    assert RESTORE_TOOL in RECALL_TOOL_NAMES


def test_the_same_ledger_gives_the_same_page(ledgers: dict[str, Path], tmp_path: Path) -> None:
    first = _report(ledgers["session"], tmp_path / "a.html")
    assert _report(ledgers["session"], tmp_path / "b.html") == first


def test_a_page_names_the_run_and_draws_every_chart(ledgers: dict[str, Path], tmp_path: Path) -> None:
    html = _report(ledgers["session"], tmp_path / "report.html")
    assert "<title>holon report: agent-7</title>" in html
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC to .* · 30 turns · \d+ model calls", html)
    for title in (
        "prompt tokens per model call, by section",
        "cached share per model call",
        "evictions and restores per turn",
        "tool calls by tool and outcome",
        "episodes over the run",
    ):
        assert f'aria-label="{title}"' in html, title
    assert 'class="legend"' in html and "tokens per call" in html and "model call (in order)" in html
    assert "<script>" not in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "")


def test_a_ledger_without_prompts_says_how_to_get_them(ledgers: dict[str, Path], tmp_path: Path) -> None:
    html = _report(ledgers["imported"], tmp_path / "report.html")
    assert "This ledger records no prompts" in html
    assert "holon simulate LEDGER --budget N -o OUT" in html and "holon report OUT" in html
    assert 'aria-label="tool calls by tool and outcome"' in html
    assert "No prompt left anything out" in html
    assert _embedded(html)["calls"] == 0


def test_a_transcript_without_times_is_not_dated_1970(tmp_path: Path) -> None:
    # An importer stamps a transcript without timestamps from 0 (holon.importers' synthetic clock).
    bodies: list[r.Body] = [
        r.TurnStarted(trigger="user", input="fix it"),
        r.ToolIntent(call_id="c1", tool="bash", args={"command": "make"}),
        r.ToolResult(call_id="c1", tool="bash", status="ok", output="done"),
        r.TurnEnded(outcome="completed"),
    ]
    write_ledger(
        tmp_path / "l", "clockless", [r.Record(body=b, ts=1000 * i, turn=1) for i, b in enumerate(bodies)]
    )
    html = _report(tmp_path / "l", tmp_path / "report.html")
    assert "no real times (the imported transcript had none" in html
    assert "1970" not in html


def test_a_long_run_is_drawn_in_buckets_and_says_so(
    ledgers: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(page, "MAX_CALL_POINTS", 8)
    html = _report(ledgers["session"], tmp_path / "report.html")
    figures = _embedded(html)
    size = -(-figures["calls"] // 8)
    assert f"calls drawn as {-(-figures['calls'] // size)} buckets of {size} consecutive calls" in html
    # The figures stay those of every call.
    calls = _audit(ledgers["session"], "--report", "calls")
    assert figures["tokens"] == sum(c["total_tokens"] for c in calls)


def test_a_stand_in_series_is_a_cost_row_and_a_line_of_each_per_call_chart(ledgers: dict[str, Path]) -> None:
    # Where a full-history stand-in for the same calls goes (holon simulate records one).
    con = connect(ledgers["session"])
    data = read_run(con)
    con.close()
    calls = len(data.calls)
    stand_in = CostSeries(
        name="full history",
        tokens=tuple(3000 + 100 * i for i in range(calls)),
        cached=(0, *(3000 + 100 * i for i in range(calls - 1))),
        written=(3000,) + (100,) * (calls - 1),
    )
    html = report_html(data, comparisons=[stand_in])
    total = sum(stand_in.tokens)
    cached = sum(stand_in.cached)
    cost = 0.1 * cached + 1.25 * sum(stand_in.written) + (total - cached - sum(stand_in.written))
    row = f'<td>full history</td><td class="n">{calls:,}</td><td class="n">{total:,}</td>'
    assert row in html and f"{number(round(cost, 1))}</td>" in html
    assert html.count("<title>full history") == 2  # its tokens and its cached share, dashed
    assert "full history (total, dashed)" in html and "full history (dashed)" in html
    assert _embedded(html) == _embedded(report_html(data))  # the run's own figures stay its own


def test_a_simulated_ledger_is_drawn_with_holons_series_beside_its_tools(
    ledgers: dict[str, Path], tmp_path: Path
) -> None:
    # `holon simulate` on the imported run: the page prices both of its series, as the
    # audit's simulated_calls holds them, beside each other.
    out = tmp_path / "simulated"
    args = ["simulate", str(ledgers["imported"]), "-o", str(out), "--budget", "8000"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    html = _report(out, tmp_path / "simulated.html")
    for series, name in SIMULATED_SERIES.items():
        sql = f"SELECT count(*) AS n, sum(tokens) AS t FROM simulated_calls WHERE series = '{series}'"
        rows = _audit(out, "--sql", sql)
        calls, tokens = int(rows[0]["n"]), int(rows[0]["t"])
        assert calls > 0
        assert f'<td>{name}</td><td class="n">{calls:,}</td><td class="n">{tokens:,}</td>' in html
    # A ledger holon wrote itself has no simulation: no such rows.
    assert SIMULATED_SERIES["tool"] not in _report(ledgers["session"], tmp_path / "session.html")


def test_a_report_is_never_written_into_the_ledger(ledgers: dict[str, Path]) -> None:
    path = ledgers["session"]
    before = sorted((p.name, p.stat().st_size) for p in path.rglob("*"))
    result = CliRunner().invoke(main, ["report", str(path), "-o", str(path / "report.html")])
    assert result.exit_code == 2
    assert "is inside the ledger" in result.output
    assert sorted((p.name, p.stat().st_size) for p in path.rglob("*")) == before


# --------------------------------------------------------------------------- in a browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    missing = [
        what
        for what, found in (("chromium", CHROMIUM), ("chromedriver", CHROMEDRIVER), ("selenium", webdriver))
        if found is None
    ]
    if missing:
        message = (
            f"no {', '.join(missing)}: install the browser with `apt-get install chromium chromium-driver` "
            "and selenium with `pip install selenium` (`make test` does both)"
        )
        if REQUIRED:
            pytest.fail(f"HOLON_REQUIRE_BROWSER=1 but {message}")
        pytest.skip(message)
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1100,900"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    # The system chromedriver, named: selenium does not look for (or download) one.
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _load(browser: Any, page_file: Path) -> list[str]:
    """Open ``page_file``; returns the URLs it requested (the page itself included)."""
    browser.get_log("performance")  # drop what earlier pages logged
    browser.get_log("browser")
    browser.get(page_file.as_uri())
    assert browser.execute_script("return document.readyState") == "complete"
    requested = []
    for entry in browser.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            requested.append(message["params"]["request"]["url"])
    return requested


@pytest.mark.parametrize("which", ["session", "imported", "simulated"])
def test_chromium_loads_the_page_offline_without_errors(
    browser: Any, ledgers: dict[str, Path], tmp_path: Path, which: str
) -> None:
    out = tmp_path / "report.html"
    html = _report(ledgers[which], out)
    requested = _load(browser, out)
    assert requested == [out.as_uri()], f"the page fetched more than itself: {requested}"
    assert browser.get_log("browser") == []  # no console message at all, errors included
    # What a reader sees: the title, the charts drawn, and the figures the page embeds.
    assert browser.find_element("tag name", "h1").text == f"holon report: {_embedded(html)['agent_id']}"
    charts = browser.find_elements("css selector", "svg[role=img]")
    # An imported run has no prompts, so nothing per call and nothing left out of one.
    of_prompts = {
        "prompt tokens per model call, by section",
        "cached share per model call",
        "evictions and restores per turn",
    }
    drawn = {
        "tool calls by tool and outcome",
        "tool calls over time: duration and outcome",
        "episodes over the run",
    }
    assert {chart.get_attribute("aria-label") for chart in charts} == (
        drawn if which == "imported" else drawn | of_prompts
    )
    for chart in charts:
        size = chart.size
        assert size["width"] > 500 and size["height"] > 100
    embedded = browser.execute_script("return JSON.parse(document.getElementById('holon-report-data').text)")
    assert embedded == _embedded(html)
