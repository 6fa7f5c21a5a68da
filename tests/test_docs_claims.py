"""Precise claims of the docs that a reader relies on, checked against what the code does.

Each test reads the bytes (or the behaviour) the way the doc tells a third party to, so a
change to the format or a default that the doc still describes fails here.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import json
import re
import struct
import tomllib
from pathlib import Path

import blake3
import msgspec
import pytest
import xxhash
import zstandard

import holon
from benchmarks.__main__ import OPTIONAL, SUITES
from holon import cli, errors, projections
from holon import records as r
from holon.audit import connect, run_report
from holon.context import RENDER_VERSION, Budget, RenderConfig
from holon.errors import LedgerCorrupt, UsageError
from holon.ledger import FORMAT_VERSION, Ledger
from holon.projections import (
    ARCHIVE_CHUNK,
    DEFAULT_CONFIG,
    PROJECTION_VERSION,
    CheckpointKey,
    CheckpointRejected,
    decode_archive_chunk,
    encode_checkpoint,
    fold,
)
from holon.records import Body, ContextEpisodeRecord, Message, Record, ToolIntent, ToolResult
from holon.runtime import AgentConfig, OpenReport
from holon.runtime.checkpoints import CHECKPOINT_DIR, CHUNK_DIR, KEY_CHUNK, ToolIndex, write_checkpoint
from tests.cli_support import invoke
from tests.test_audit_support import session_records, write_ledger
from tests.test_layers import ALLOWED_HOLON

# docs/ledger-format.md, "Segment file": header and frame layouts, little-endian.
SEGMENT_HEADER = struct.Struct("<8sHHIQ32sQ")
FRAME_HEAD = struct.Struct("<IIQ")


def _records() -> list[Record]:
    return [
        Record(body=Message(role="user", text="hello"), ts=1, turn=None),
        Record(body=ToolIntent(call_id="c1", tool="bash", args={"cmd": "ls"}), ts=2, turn=None),
        Record(body=ToolResult(call_id="c1", tool="bash", status="ok", output="é" * 3000), ts=3, turn=None),
    ]


def test_ledger_header_and_segment_bytes_follow_ledger_format_md(tmp_path: Path) -> None:
    with Ledger.create(tmp_path / "l", agent_id="a1") as ledger:
        for record in _records():
            ledger.append(record)
        head = ledger.head()

    header = json.loads((tmp_path / "l" / "holon-ledger.json").read_text())
    genesis = blake3.blake3(b"holon-ledger/genesis/v1\x00" + b"a1").digest()
    assert header == {
        "format": "holon-ledger",
        "format_version": 2,
        "agent_id": "a1",
        "genesis": genesis.hex(),
        "segment_bytes": 8 << 20,
        "blob_threshold": 4096,
    }

    data = (tmp_path / "l" / "segments" / ("0" * 20 + ".seg")).read_bytes()
    magic, version, reserved1, reserved2, start, prev, check = SEGMENT_HEADER.unpack_from(data)
    assert (magic, version, reserved1, reserved2, start, prev) == (b"HOLONSEG", 1, 0, 0, 0, genesis)
    assert check == xxhash.xxh3_64_intdigest(data[:56])

    at, chain, seq = 64, genesis, 0
    while at < len(data):
        n, guard, checksum = FRAME_HEAD.unpack_from(data, at)
        assert 1 <= n <= 1 << 28 and guard == n ^ 0xFFFFFFFF
        frame_prev, payload = data[at + 16 : at + 48], data[at + 48 : at + 48 + n]
        assert frame_prev == chain
        assert checksum == xxhash.xxh3_64_intdigest(frame_prev + payload, seed=n)
        envelope = msgspec.msgpack.decode(payload)
        assert list(envelope) == ["seq", "ts", "turn", "kind", "v", "body"]
        assert envelope["seq"] == seq
        chain = blake3.blake3(chain + payload).digest()
        at, seq = at + 48 + n, seq + 1
    assert at == len(data)
    assert head == (seq - 1, chain.hex())


def test_a_large_output_is_a_zstd_blob_named_by_blake3_with_a_200_char_preview(tmp_path: Path) -> None:
    output = _records()[2].body.output  # type: ignore[union-attr]
    with Ledger.create(tmp_path / "l", agent_id="a1") as ledger:
        for record in _records():
            ledger.append(record)
        stored = ledger.get(2).body
    assert isinstance(stored, ToolResult) and stored.blob is not None
    raw = output.encode()
    assert stored.output == ""
    assert stored.blob.hash == blake3.blake3(raw).hexdigest()
    assert stored.blob.size == len(raw)
    assert stored.blob.preview == output[:200]
    blob_file = tmp_path / "l" / "blobs" / stored.blob.hash[:2] / stored.blob.hash
    assert zstandard.ZstdDecompressor().decompress(blob_file.read_bytes()) == raw


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("segment_bytes", 1023),
        ("segment_bytes", (1 << 30) + 1),
        ("blob_threshold", -1),
        ("blob_threshold", (1 << 28) + 1),
    ],
)
def test_header_settings_outside_their_ranges_are_refused(tmp_path: Path, field: str, value: int) -> None:
    with pytest.raises(UsageError):
        Ledger.create(tmp_path / "l", agent_id="a1", **{field: value})
    Ledger.create(tmp_path / "ok", agent_id="a1").close()
    path = tmp_path / "ok" / "holon-ledger.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), field: value}))
    with pytest.raises(LedgerCorrupt, match=field):
        Ledger.open(tmp_path / "ok", readonly=True)


def test_checkpoint_bytes_follow_memory_model_md() -> None:
    state = fold([_at(record, seq) for seq, record in enumerate(_records())])
    data = encode_checkpoint(state, head_hash="ab" * 32)
    assert data[:8] == b"HOLONCKP"
    (key_length,) = struct.unpack_from(">I", data, 8)  # big-endian
    key = msgspec.msgpack.decode(data[12 : 12 + key_length])
    assert key["projection_version"] == PROJECTION_VERSION
    assert key["config"] == msgspec.to_builtins(DEFAULT_CONFIG)
    assert (key["seq"], key["head_hash"]) == (state.seq, "ab" * 32)
    frame = data[12 + key_length :]
    params = zstandard.get_frame_parameters(frame)
    assert params.has_checksum
    msgspec.msgpack.decode(zstandard.ZstdDecompressor().decompress(frame))


def _at(record: Record, seq: int) -> Record:
    return msgspec.structs.replace(record, seq=seq)


# ---------------------------------------------------------------- tables and lists the docs keep


ROOT = Path(__file__).resolve().parent.parent


def _section(doc: str, heading: str) -> str:
    """From ``heading`` (a whole line) to the next heading of the same or a higher level."""
    text = (ROOT / doc).read_text()
    start = text.index(f"\n{heading}\n") + 1
    level = len(heading) - len(heading.lstrip("#"))
    end = re.compile(rf"^#{{1,{level}}} ", re.MULTILINE).search(text, start + len(heading))
    return text[start : end.start() if end else len(text)]


def _rows(section: str) -> list[list[str]]:
    """The cells of a Markdown table's body rows (not the header nor its rule)."""
    rows = [line.strip().strip("|").split(" | ") for line in section.splitlines() if line.startswith("| ")]
    cells = [[cell.strip() for cell in row] for row in rows]
    return [row for row in cells[1:] if set("".join(row)) - set("-: ")]


def test_architecture_errors_table_lists_every_error_with_its_builtin_base() -> None:
    # A caller writing `except ValueError` or `except LookupError` reads the table: it said
    # nothing of InvalidRef's ValueError or RefNotFound's LookupError.
    listed: dict[str, str] = {}
    for row in _rows(_section("docs/architecture.md", "## Errors")):
        if not row[0].startswith("`"):
            continue
        name = re.match(r"`(\w+)`", row[0])
        assert name is not None, row
        also = re.search(r"\(also (.*)\)", row[0])
        listed[name.group(1)] = also.group(1) if also else ""
    expected = {}
    for name in errors.__all__:
        if name == "HolonError":
            continue
        mro = getattr(errors, name).__mro__
        bases = [b for b in mro if b.__module__ == "builtins" and b not in (Exception, BaseException, object)]
        expected[name] = " / ".join(f"`{b.__name__}`" for b in bases)
    assert listed == expected


def test_architecture_names_every_exit_code_of_the_cli() -> None:
    section = _section("docs/architecture.md", "## Errors")
    sentence = section[section.index("The CLI maps them to exit codes") :].split("\n\n", 1)[0]
    named = {int(n) for n in re.findall(r"\b(\d+)\b", sentence)}
    codes = {getattr(cli, name) for name in dir(cli) if name.startswith("EXIT_")} - {cli.EXIT_OK}
    assert named == codes, sentence


def test_memory_model_public_api_table_lists_every_name_of_holon_projections() -> None:
    table = _section("docs/memory-model.md", "## Public API (`holon.projections`)")
    named = set(re.findall(r"`(\w+)", table))
    assert sorted(set(projections.__all__) - named) == []


def test_memory_model_says_what_each_projection_version_changed() -> None:
    # Replay verification reports "derived by projection version N"; the page is where a
    # reader looks up what N changed, and it stopped at 5 while the code derived 7.
    section = _section("docs/memory-model.md", "## Replay verification")
    said = {int(n) for n in re.findall(r"\b(\d+) since\b", section)}
    assert said == set(range(2, PROJECTION_VERSION + 1))


def test_importers_md_quotes_what_import_from_jsonl_says_of_another_tools_transcript(tmp_path: Path) -> None:
    # The page said this path gave the codec's error "without a `--from` hint"; the CLI
    # names the format that reads the file.
    text = " ".join(_section("docs/importers.md", "## Samples").split())
    quoted = re.search(r"names the one that reads it: `(<file> [^`]+)`", text)
    assert quoted is not None
    ledger, transcript = tmp_path / "l", ROOT / "fixtures/importers/swe-agent/function-calling.traj"
    assert invoke("init", ledger, "--agent-id", "a").exit_code == 0
    result = invoke("import", ledger, transcript, "--from", "jsonl")
    assert result.exit_code == 2
    assert quoted.group(1).replace("<file>", str(transcript)) in result.stderr


def test_ledger_format_names_every_module_of_holon_ledger() -> None:
    text = (ROOT / "docs/ledger-format.md").read_text()
    intro = " ".join(text[: text.index("\n## ")].split())
    listed = set(re.findall(r"`(\w+\.py)`", intro))
    modules = {path.name for path in (ROOT / "holon/ledger").glob("*.py")} - {"__init__.py"}
    assert listed == modules


def test_context_rendering_states_the_current_render_version() -> None:
    # A reader of a recorded render_config["version"] learns here whether this holon can
    # reproduce it; the section said every past prompt re-renders byte for byte.
    section = " ".join(_section("docs/context-rendering.md", "## Reproducibility").split())
    assert f"(`RENDER_VERSION`, {RENDER_VERSION} now)" in section


def test_daemon_guide_lists_every_agent_config_field_with_its_default() -> None:
    # The guide showed AgentConfig only in its examples, so a daemon written from it did not
    # know the budget it got by default, nor that its fsync default is not the Ledger's.
    text = (ROOT / "docs/daemon-guide.md").read_text()
    table = text[text.index("`AgentConfig` (`config=`") :].split("\n\n")[1]
    names = {"Budget": Budget, "RenderConfig": RenderConfig, "DEFAULT_CONFIG": DEFAULT_CONFIG}
    listed = {row[0].strip("`"): eval(row[1].strip("`"), names) for row in _rows(table)}
    defaults = {f.name: f.default for f in msgspec.structs.fields(AgentConfig)}
    assert listed == defaults


def test_daemon_guide_lists_what_open_report_holds() -> None:
    text = " ".join((ROOT / "docs/daemon-guide.md").read_text().split())
    phrase = "(`OpenReport`) says what happened:"
    said = text[text.index(phrase) + len(phrase) :].split(". ", 1)[0]
    assert re.findall(r"`(\w+)`", said) == [f.name for f in msgspec.structs.fields(OpenReport)]


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _anchors(doc: Path) -> set[str]:
    """GitHub's anchors of a page's headings (outside code blocks)."""
    text = re.sub(r"^```.*?^```", "", doc.read_text(), flags=re.DOTALL | re.MULTILINE)
    seen: dict[str, int] = {}
    anchors = set()
    for heading in re.findall(r"^#{1,6} (.*)$", text, re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchors.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: doc.name)
def test_every_link_of_the_docs_resolves(doc: Path) -> None:
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
        if target.startswith(("http://", "https://")):
            continue
        path, _, anchor = target.partition("#")
        linked = (doc.parent / path).resolve() if path else doc
        if not linked.exists() or (anchor and linked.suffix == ".md" and anchor not in _anchors(linked)):
            broken.append(target)
    assert broken == []


def test_readme_documentation_table_lists_every_page_of_docs() -> None:
    readme = (ROOT / "README.md").read_text()
    listed = set(re.findall(r"^\| \[\S+\]\(docs/([\w-]+\.md)\) \|", readme, re.MULTILINE))
    assert listed == {doc.name for doc in (ROOT / "docs").glob("*.md")}


def test_dependencies_md_explains_every_dependency_of_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"].values()
    required = [*project["dependencies"], *(requirement for extra in extras for requirement in extra)]
    text = (ROOT / "docs/dependencies.md").read_text()
    for requirement in required:
        name = re.match(r"[\w-]+", requirement)
        assert name is not None and re.search(rf"\b{name.group(0)}\b", text), requirement


# ---------------------------------------------------------------- sealed segments, checkpoints


SKIPPABLE = struct.Struct("<II")
SEEK_ENTRY = struct.Struct("<QQQ")
SEEK_TRAILER = struct.Struct("<QQIIQ8s")


def test_a_sealed_segment_follows_ledger_format_md(tmp_path: Path) -> None:
    # Read the way the page tells a third party to: the trailer at the file's end, the
    # table before it, each zstd frame decompressed on its own.
    section = " ".join(_section("docs/ledger-format.md", "## Sealed segment file").split())
    assert "u32 magic `0x184D2A50`, u32 size of the rest (24*k* + 40)" in section
    assert "u32 table version (1)" in section and "8 bytes magic `HOLONSKT`" in section
    assert "at or past 256 KiB of plain bytes" in section
    # ~3 KB each, under the blob threshold: a 1 MiB segment of them seals into several frames.
    output = "".join(f"line {n}: {n * 7919 % 104729}\n" for n in range(160))
    with Ledger.create(tmp_path / "l", agent_id="a1", segment_bytes=1 << 20) as ledger:
        for n in range(500):
            result = ToolResult(call_id=f"c{n}", tool="bash", status="ok", output=output)
            ledger.append(Record(body=result, ts=n, turn=None))
    sealed = tmp_path / "l" / "segments" / ("0" * 20 + ".seg.zst")
    data = sealed.read_bytes()
    end_seq, plain_size, k, table_version, checksum, magic = SEEK_TRAILER.unpack_from(data, len(data) - 40)
    assert (magic, table_version) == (b"HOLONSKT", 1) and k > 2  # several ~256 KiB frames
    table_at = len(data) - 40 - 24 * k - SKIPPABLE.size
    assert SKIPPABLE.unpack_from(data, table_at) == (0x184D2A50, 24 * k + 40)
    entries = [SEEK_ENTRY.unpack_from(data, table_at + 8 + 24 * i) for i in range(k)]
    assert checksum == xxhash.xxh3_64_intdigest(data[table_at + 8 : len(data) - 16])
    assert entries[0] == (0, 0, 0)
    bounds = [*entries, (end_seq, plain_size, table_at)]
    plain = b""
    for (first_seq, plain_at, at), (_, plain_end, end) in itertools.pairwise(bounds):
        frame = data[at:end]
        assert zstandard.get_frame_parameters(frame).content_size == plain_end - plain_at
        piece = zstandard.ZstdDecompressor().decompress(frame)
        if plain:  # a record frame starts with a whole record of seq first_seq
            (n,) = struct.unpack_from("<I", piece)
            assert msgspec.msgpack.decode(piece[48 : 48 + n])["seq"] == first_seq
            assert plain_end - plain_at < (256 << 10) + 4096  # closes at the first boundary past 256 KiB
        else:
            assert len(piece) == 64 and piece[:8] == b"HOLONSEG"
        plain += piece
    assert len(plain) == plain_size
    # `zstd -dc` of the whole file (one stream, the table skipped) gives the plain segment.
    reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
    assert reader.read() == plain


def test_ledger_format_md_names_the_format_version_this_holon_writes(tmp_path: Path) -> None:
    text = (ROOT / "docs/ledger-format.md").read_text()
    assert text.startswith(f"# Ledger format (version {FORMAT_VERSION})\n")
    policy = " ".join(_section("docs/ledger-format.md", "## Version policy").split())
    assert f"This holon writes version {FORMAT_VERSION} and reads versions 1 and {FORMAT_VERSION}" in policy
    table = policy[: policy.index("A reader meeting")]
    assert re.findall(r"\| (\d+) \|", table) == [str(v) for v in range(1, FORMAT_VERSION + 1)]
    Ledger.create(tmp_path / "l", agent_id="a1").close()
    assert json.loads((tmp_path / "l" / "holon-ledger.json").read_text())["format_version"] == FORMAT_VERSION


def test_memory_model_names_every_field_of_the_checkpoint_key() -> None:
    # The key gained `archive` (the chunks a checkpoint names) and the page still listed four.
    section = " ".join(_section("docs/memory-model.md", "## Checkpoints").split())
    said = section[section.index("The key holds") :].split(", and can be read")[0]
    named = re.findall(r"`(\w+)`", said)
    assert named == [f.name for f in msgspec.structs.fields(CheckpointKey)]


def test_checkpoint_files_follow_daemon_guide_md(tmp_path: Path) -> None:
    # One full archive chunk and one key chunk's worth of keys: every kind of file is written.
    bodies: list[Body] = [
        ToolIntent(call_id=f"c{n}", tool="bash", idempotency_key=f"k{n}") for n in range(KEY_CHUNK)
    ]
    bodies += [
        ContextEpisodeRecord(
            episode_id=n, boundary_reason="turn_cap", work_item_id="W1", first_turn=n, last_turn=n,
            from_seq=n, to_seq=n, objective=f"objective {n}", projection_version=PROJECTION_VERSION,
        )
        for n in range(ARCHIVE_CHUNK)
    ]  # fmt: skip
    records = [Record(body=body, ts=seq, turn=None, seq=seq) for seq, body in enumerate(bodies)]
    tools = ToolIndex()
    for record in records:
        tools.apply(record)
    write_checkpoint(tmp_path, fold(records), tools, head_hash="ab" * 32, save_index=True)

    text = " ".join((ROOT / "docs/daemon-guide.md").read_text().split())
    assert "named by the seq they were taken at (`<seq>`: 12 digits, zero-padded)" in text
    assert f"one full archive chunk ({ARCHIVE_CHUNK} episodes, `encode_archive_chunk`)" in text
    assert f"{KEY_CHUNK:,} keys (`KEY_CHUNK`)" in text
    folder = tmp_path / CHECKPOINT_DIR
    seq = f"{len(records) - 1:012d}"
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [CHUNK_DIR, f"{seq}.ckpt", f"{seq}.episodes", f"{seq}.tools"]
    )
    for suffix, magic in ((".tools", b"HOLONTI2"), (".episodes", b"HOLONEPX")):
        assert f"checksum (magic `{magic.decode()}`)" in text
        data = (folder / (seq + suffix)).read_bytes()
        assert data[:8] == magic and data[8:40] == blake3.blake3(data[40:]).digest()
    listed = [row[0].strip("`") for row in _rows(_chunk_table())]
    assert listed == ["<blake3>.arc", "<blake3>.epx", "<blake3>.keys"]
    chunks = sorted((folder / CHUNK_DIR).iterdir(), key=lambda p: p.suffix)
    assert [p.suffix for p in chunks] == [".arc", ".epx", ".keys"]
    for path in chunks:
        assert path.stem == blake3.blake3(path.read_bytes()).hexdigest()
    episodes = decode_archive_chunk(chunks[0].read_bytes(), name=chunks[0].name)
    assert not isinstance(episodes, CheckpointRejected) and len(episodes) == ARCHIVE_CHUNK


def _chunk_table() -> str:
    text = (ROOT / "docs/daemon-guide.md").read_text()
    start = text.index("| chunk file | holds | written when |")
    return text[start : text.index("\n\n", start)]


def test_architecture_may_import_column_is_what_test_layers_allows() -> None:
    # The table is the reader's copy of tests/test_layers.py's rules.
    listed: dict[str, set[str]] = {}
    above: set[str] = set()
    packages = _section("docs/architecture.md", "## Packages")
    for row in _rows(packages[: packages.index("\n### ")]):
        layer = re.match(r"`holon/(\w+)", row[1])  # a module or a package
        assert layer is not None, row
        cell = row[2]
        allowed = set(above) if cell.startswith("all of the above") else set()
        words = re.findall(r"\b(\w+)\b", re.sub(r"\(.*?\)", "", cell))  # not the asides in parentheses
        allowed |= {word for word in words if word in ALLOWED_HOLON}
        allowed |= set(re.findall(r"`holon/(\w+)\.py`", cell))
        listed[layer.group(1)] = allowed - {layer.group(1)}
        above.add(layer.group(1))
    assert listed == ALLOWED_HOLON


# Each report's columns past its grouping keys, as the report table of docs/audit.md names them.
REPORT_KEYS = {
    "tokens": ("agent_id", "section"),
    "tools": ("agent_id", "tool"),
    "evictions": ("agent_id", "section", "cause"),
    "episodes": ("agent_id", "boundary_reason"),
}


@pytest.mark.parametrize("name", sorted(REPORT_KEYS))
def test_audit_md_names_every_column_of_a_report(tmp_path: Path, name: str) -> None:
    # The tokens report gained scope and prompts; a reader of the table learns the columns there.
    records, blobs = session_records(30)
    write_ledger(tmp_path / "a", "agent-7", records, blobs=blobs)
    columns = run_report(connect([tmp_path / "a"]), name).columns
    reports = _section("docs/audit.md", "## Canned reports")
    row = next(line for line in reports.splitlines() if line.startswith(f"| `{name}` |"))
    named = [column for column in columns if f"`{column}`" in row]
    assert named == [column for column in columns if column not in REPORT_KEYS[name]]


def test_every_benchmark_command_the_docs_give_runs_a_suite_that_exists() -> None:
    text = " ".join(doc.read_text() for doc in DOCS)
    for suite in re.findall(r"python -m benchmarks (\w+)", text):
        assert suite in SUITES + OPTIONAL or suite == "NAME", suite
    for module, argument in re.findall(r"python -m benchmarks\.(\w+)(?: (\w+))?", text):
        assert importlib.util.find_spec(f"benchmarks.{module}") is not None, module
        if argument:  # benchmarks.runtime footprint / longrun run the function of that name
            assert module == "runtime" and argument in {"footprint", "longrun"}, (module, argument)
            assert callable(getattr(importlib.import_module(f"benchmarks.{module}"), argument))


# --------------------------------------------------------------------------- the record kinds, the facade


def _rows_with_empty_cells(section: str) -> list[list[str]]:
    """The cells of a Markdown table's body rows, an empty cell (``|  |``) kept as ``""``."""
    rows = [line.strip().strip("|").split("|") for line in section.splitlines() if line.startswith("| ")]
    cells = [[cell.strip() for cell in row] for row in rows]
    return [row for row in cells[1:] if set("".join(row)) != {"-"}]  # not the header nor its rule


def test_ledger_format_lists_every_record_kind_with_its_fields() -> None:
    # No page listed the record kinds: a newcomer writing `holon append` input read
    # holon/records.py to learn what a line may hold.
    section = _section("docs/ledger-format.md", "## Record kinds")
    listed = {}
    for kind, body, required, optional, what in _rows_with_empty_cells(section):
        listed[kind.strip("`")] = (body.strip("`"), required, optional, what)
    assert list(listed) == list(r.BODY_TYPES), "every kind, in the order holon.records declares them"
    for kind, cls in r.BODY_TYPES.items():
        body, required, optional, what = listed[kind]
        fields = msgspec.inspect.type_info(cls).fields  # type: ignore[attr-defined]
        assert body == cls.__name__ and getattr(holon, body) is cls
        assert required == ", ".join(f.name for f in fields if f.required), kind
        assert optional == ", ".join(f.name for f in fields if not f.required), kind
        group = "derived" if kind in r.DERIVED_KINDS else "runtime" if kind in RUNTIME_KINDS else "evidence"
        assert what.endswith(f"({group})"), kind
    example = re.search(r"```json\n(.*?)\n```", section, re.DOTALL)
    assert example is not None
    record = r.decode_json_record(example.group(1).encode(), where="ledger-format.md")
    assert record.body == r.Message(role="user", text="hi") and record.v == r.SCHEMA_VERSION


RUNTIME_KINDS = ("turn_started", "turn_ended", "prompt_rendered", "model_call")


def test_architecture_lists_every_name_import_holon_gives() -> None:
    section = _section("docs/architecture.md", "### The facade: `import holon`")
    names = [name for row in _rows(section) for name in re.findall(r"`(\w+)`", row[1])]
    assert len(names) == len(set(names)), "each name once"
    assert sorted(names) == sorted(holon.__all__)
