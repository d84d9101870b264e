"""Helpers of the tests of `gccl bench`: the command run in this process.

Imported by name (`from bench_helpers import ...`), like cli_helpers.py.
"""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from ccl_cli.bench.command import Options, run_bench_command


def run(opts: Options, inputs: list[str] | None = None, **paths: Path) -> tuple[int, str]:
    """Run the command; (exit code, what it printed on stderr)."""
    err = io.StringIO()
    code = run_bench_command(
        inputs or [],
        opts,
        quiet=True,
        out=Console(file=io.StringIO(), width=200),
        err=Console(file=err, width=200),
        **paths,
    )
    return code, err.getvalue()
