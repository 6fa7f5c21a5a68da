"""The ``holon`` command line: create, fill, replay, render and inspect ledgers.

Every command is a thin layer over the public library — :mod:`holon.ledger`,
:mod:`holon.importers`, :mod:`holon.projections`, :mod:`holon.context`, and the edge
modules :mod:`holon.replay` and :mod:`holon.search` — that parses options and prints.

Conventions (docs/cli.md is generated from the ``--help`` texts of the commands):

- every command takes ``--json`` (output for scripts) and prints readable text otherwise;
- read commands open the ledger read-only (no lock, no repair, no write);
- long passes (replay, import, verify, export) show a progress bar on a terminal only (not TERM=dumb);
- errors are one line on stderr (``--debug`` adds the traceback; under ``--json`` the
  line is a JSON object); exit codes:
  0 ok, 1 a check failed, 2 usage or bad input, 3 the ledger is corrupt or locked,
  70 an internal error (a bug), 74 the system refused a read or write (a full disk, a
  read-only file system), 130 interrupted (Ctrl-C).

The package, by job: :mod:`~holon.cli.printing` (text, bytes, JSON and tables),
:mod:`~holon.cli.failures` (exit codes and the one-line errors), :mod:`~holon.cli.group`
(the click group :func:`main`, its error handling and the shared options),
:mod:`~holon.cli.ledgers` (opening a ledger and reading it in passes), and the commands:
:mod:`~holon.cli.writing` (init, append, import), :mod:`~holon.cli.exporting` (export,
simulate, report), :mod:`~holon.cli.replaying` (replay), :mod:`~holon.cli.rendering`
(render, explain, prompts), :mod:`~holon.cli.reading` (memory, episodes, get, search,
mcp, stats) and :mod:`~holon.cli.checking` (verify, repair). This module registers the
commands on :func:`main`; ``holon audit`` lives with the audit layer and is imported on
first use.

What it may import: every layer's package (``holon.ledger``, ``holon.context``, ...), never
a module inside one (tests/test_layers.py), and of its own modules what WITHIN["cli"] there
lists. Only what the option declarations and the error handling need is imported at the
top of a module, from packages that are light (the layer packages load their modules on
first use): each command imports the library it runs in its body, so `holon --help` and
`holon --version` load no ledger store, renderer, importer or DuckDB
(tests/test_cli_start.py, `python -m benchmarks cli_start`).
"""

from __future__ import annotations

from holon.cli.checking import repair, verify
from holon.cli.exporting import export, report, simulate
from holon.cli.failures import (
    EXIT_CHECK_FAILED,
    EXIT_CORRUPT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SYSTEM,
    EXIT_USAGE,
    CheckFailed,
)
from holon.cli.failures import (
    exit_code_for as exit_code_for,  # importable from holon.cli, as before the package
)
from holon.cli.group import HolonGroup, main
from holon.cli.reading import episodes, get, mcp_, memory, search, stats
from holon.cli.rendering import explain, prompts, render
from holon.cli.replaying import replay
from holon.cli.writing import append, import_, init

__all__ = [
    "EXIT_CHECK_FAILED",
    "EXIT_CORRUPT",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_SYSTEM",
    "EXIT_USAGE",
    "CheckFailed",
    "HolonGroup",
    "main",
]

# In the order the commands were registered when they were all one module: `holon --help`
# lists them sorted either way, but `main.commands` keeps this order for programs reading it.
for _command in (
    init,
    append,
    import_,
    export,
    replay,
    render,
    explain,
    prompts,
    simulate,
    memory,
    episodes,
    get,
    search,
    mcp_,
    verify,
    repair,
    stats,
    report,
):
    main.add_command(_command)
del _command

# `holon audit PATH... [--sql Q | --report NAME]` lives with the audit layer (docs/audit.md).
main.add_lazy_command(
    "audit",
    "holon.audit.commands:audit",
    summary="Audit ledgers offline in DuckDB: SQL, canned reports, or a table summary.",
)
