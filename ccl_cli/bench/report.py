"""The benchmark's reports: the console table, --json, --csv and the --plot bar chart.

Every report shows the same records. Speed-ups compare with OpenCV on the
same case, level and batch size: connectedComponentsWithStats in binary
mode, floodFill region growing in tau mode (the way to do tau mode with it).
"""

from __future__ import annotations

import csv
import json
import math
import statistics
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .records import COLUMNS, LEVELS, Record

BASELINE = "opencv"
#: The default report's width: a terminal of 100 columns, or a log file, reads it whole.
REPORT_COLUMNS = 100
#: The full table's width (--wide).
WIDE_REPORT_COLUMNS = 150
#: Marks an engine whose library lacks the mode and which stands in for it (see the footnote).
EMULATED = "*"


def add_speedups(records: Sequence[Record]) -> None:
    """Fill speedup_vs_opencv of every measured record that has an OpenCV counterpart.

    End to end, OpenCV's script has no batches: every batch size compares
    with its one run over the same files.
    """
    baseline = {
        (r.case, r.level, r.batch if r.level == "kernel" else None): r.median_ms
        for r in records
        if r.engine == BASELINE and r.status == "ok" and r.median_ms
    }
    for record in records:
        batch = record.batch if record.level == "kernel" else None
        reference = baseline.get((record.case, record.level, batch))
        if record.status == "ok" and record.median_ms and reference:
            record.speedup_vs_opencv = reference / record.median_ms


def print_report(
    console: Console,
    records: Sequence[Record],
    machine: Mapping[str, str],
    engines: Mapping[str, str],
    wide: bool = False,
    work: Mapping[str, tuple[str, ...]] | None = None,
) -> None:
    """Machine, engines, one table per level, what was not measured and why, then a
    summary line per engine, and gccl against each peer it ran (peer_rows).

    engines: name -> what was timed (or why the engine is unavailable). wide: every
    column (about WIDE_REPORT_COLUMNS); else the table fits REPORT_COLUMNS, each case
    on a line of its own above its rows. work: name -> what one call computes
    (engines.BenchEngine.work).
    """
    for key, value in machine.items():
        _wrapped(console, f"{key}: {value}", "    ")
    console.print(Text("engines:"))
    for name, description in engines.items():
        _wrapped(console, f"  {name}: {description}", "      ")
    for level in LEVELS:
        rows = [r for r in records if r.level == level and r.status != "skipped"]
        if rows:
            console.print(_wide_table(level, rows) if wide else _table(level, rows))
    emulations = {r.emulation: r.engine for r in records if r.emulation and r.status != "skipped"}
    for emulation, engine in emulations.items():
        console.print(Text(f"{engine}{EMULATED}: emulated with {emulation}"))
    skipped = [r for r in records if r.status == "skipped"]
    if skipped:
        console.print(Text("not measured:", style="bold"))
        for (engine, note), cases in _group_skipped(skipped).items():
            console.print(Text(f"  {engine}: {note}: {_summary(cases)}"))
    summary = summary_rows(records)
    if summary:
        table = Table(
            title="summary: speed-up over OpenCV on the same case, level and batch",
            title_justify="left",
            header_style="bold",
            box=box.SIMPLE_HEAD,
        )
        for name, justify in (
            ("engine", "left"),
            ("level", "left"),
            ("median", "right"),
            ("geometric mean", "right"),
            ("measurements", "right"),
            ("cases disagreeing", "right"),
        ):
            table.add_column(name, justify=justify)  # type: ignore[arg-type]
        for row in summary:
            table.add_row(*row, style="bold red" if row[-1] != "0" else "")
        console.print(table)
    _print_peers(console, records, work or {})


def _print_peers(
    console: Console, records: Sequence[Record], work: Mapping[str, tuple[str, ...]]
) -> None:
    """The table of peer_rows, and in words where one side computes more than the other."""
    rows = peer_rows(records)
    if not rows:
        return
    table = Table(
        title="gccl against each peer: the peer's time / gccl's, same case, level and batch",
        title_justify="left",
        header_style="bold",
        box=box.SIMPLE_HEAD,
    )
    for name, justify in (
        ("gccl", "left"),
        ("peer", "left"),
        ("level", "left"),
        ("gccl faster", "right"),
        ("median", "right"),
        ("range", "right"),
        ("gccl also computes", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    ours_more: dict[tuple[str, str], list[str]] = {}  # (gccl, its extra work) -> peers
    theirs_more: dict[tuple[str, str], list[str]] = {}  # (peer, its extra work) -> gccl
    for gccl, peer, level, faster, median, spread in rows:
        ours, theirs = work.get(gccl, ()), work.get(peer.rstrip(EMULATED), ())
        more = ", ".join(part for part in ours if part not in theirs)
        less = ", ".join(part for part in theirs if part not in ours)
        table.add_row(gccl, peer, level, faster, median, spread, more or "-")
        if more and peer not in ours_more.setdefault((gccl, more), []):
            ours_more[(gccl, more)].append(peer)
        if less and gccl not in theirs_more.setdefault((peer, less), []):
            theirs_more[(peer, less)].append(gccl)
    console.print(table)
    for (gccl, more), peers in ours_more.items():
        _wrapped(
            console,
            f"{gccl} also computes {more} per component, which {' and '.join(peers)} "
            f"{'do' if len(peers) > 1 else 'does'} not: its times include that work",
            "  ",
        )
    for (peer, less), ours_list in theirs_more.items():
        verb = "do" if len(ours_list) > 1 else "does"
        _wrapped(
            console,
            f"{peer} also computes {less}, which {' and '.join(ours_list)} {verb} not",
            "  ",
        )


def peer_rows(records: Sequence[Record]) -> list[tuple[str, str, str, str, str, str]]:
    """Per gccl engine, peer and level: in how many measurements of both on the same case
    and batch gccl was faster, and the median, lowest and highest of the peer's time over
    gccl's (above 1: gccl faster)."""
    rows = []
    for level in LEVELS:
        timed = {
            (r.engine, r.case, r.batch if level == "kernel" else None): r
            for r in records
            if r.level == level and r.status == "ok" and r.median_ms
        }
        engines = list(dict.fromkeys(engine for engine, _, _ in timed))
        ours = [engine for engine in engines if engine.startswith("gccl")]
        for gccl in ours:
            for peer in (engine for engine in engines if not engine.startswith("gccl")):
                ratios = [
                    r.median_ms / timed[(gccl, case, batch)].median_ms  # type: ignore[operator]
                    for (engine, case, batch), r in timed.items()
                    if engine == peer and (gccl, case, batch) in timed
                ]
                if not ratios:
                    continue
                faster = f"{sum(ratio > 1 for ratio in ratios)} of {len(ratios)}"
                name = _engine_name(next(r for r in timed.values() if r.engine == peer))
                spread = f"{_number(min(ratios))}-{_number(max(ratios))}x"
                median = f"{statistics.median(ratios):.2f}x"
                rows.append((gccl, name, level, faster, median, spread))
    return rows


def _wrapped(console: Console, line: str, indent: str) -> None:
    """`line` folded between words at the console's width, its continuations indented."""
    for part in textwrap.wrap(line, console.width, subsequent_indent=indent):
        console.print(Text(part), soft_wrap=True)


def summary_rows(records: Sequence[Record]) -> list[tuple[str, str, str, str, str, str]]:
    """Per engine and level: the median and geometric mean of its speed-ups over OpenCV,
    over how many measurements, and in how many cases its components disagreed with the
    reference's."""
    rows = []
    for level in LEVELS:
        at_level = [r for r in records if r.level == level and r.status != "skipped"]
        for engine in dict.fromkeys(r.engine for r in at_level):
            mine = [r for r in at_level if r.engine == engine]
            disagreed = str(len({r.case for r in mine if r.status == "mismatch"}))
            speedups = [r.speedup_vs_opencv for r in mine if r.speedup_vs_opencv]
            if engine == BASELINE:
                median = geometric = "1 (reference)"
            elif speedups:
                median = f"{statistics.median(speedups):.2f}x"
                geometric = f"{math.exp(sum(math.log(x) for x in speedups) / len(speedups)):.2f}x"
            else:
                median = geometric = "no OpenCV"
            rows.append(
                (_engine_name(mine[0]), level, median, geometric, str(len(mine)), disagreed)
            )
    return rows


def _engine_name(record: Record) -> str:
    return f"{record.engine}{EMULATED}" if record.emulation else record.engine


def _table(level: str, rows: Sequence[Record]) -> Table:
    """The table within REPORT_COLUMNS: the case on a line of its own above its rows."""
    table = Table(
        title=_title(level), title_justify="left", header_style="bold", box=box.SIMPLE_HEAD
    )
    for name, justify in (
        ("case / engine", "left"),
        ("batch", "right"),
        ("median ms", "right"),
        ("min-max ms", "right"),
        ("Gpix/s", "right"),
        ("x OpenCV", "right"),
        ("comps", "right"),
        ("check", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    previous = None
    for r in rows:
        if r.case != previous:
            if previous is not None:
                table.add_section()
            table.add_row(Text(r.case, style="bold"))
        previous = r.case
        table.add_row(
            f"  {_engine_name(r)}",
            _batch(r),
            _number(r.median_ms),
            f"{_number(r.min_ms)}-{_number(r.max_ms)}" if r.runs else "",
            _number(r.gpix_per_s),
            _number(r.speedup_vs_opencv),
            "" if r.components is None else str(r.components),
            r.note or r.status,
            style=_style(r),
        )
    return table


def _wide_table(level: str, rows: Sequence[Record]) -> Table:
    """Every column, the case in the first (--wide, or a terminal wide enough)."""
    table = Table(
        title=_title(level), title_justify="left", header_style="bold", box=box.SIMPLE_HEAD
    )
    for name, justify in (
        ("case", "left"),
        ("batch", "right"),
        ("engine", "left"),
        ("runs", "right"),
        ("median ms", "right"),
        ("min-max ms", "right"),
        ("Gpix/s", "right"),
        ("images/s", "right"),
        ("x OpenCV", "right"),
        ("comps", "right"),
        ("check", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    previous = None
    for r in rows:
        if previous is not None and r.case != previous:
            table.add_section()
        previous = r.case
        table.add_row(
            r.case,
            _batch(r),
            _engine_name(r),
            str(r.runs or ""),
            _number(r.median_ms),
            f"{_number(r.min_ms)}-{_number(r.max_ms)}" if r.runs else "",
            _number(r.gpix_per_s),
            _number(r.images_per_s),
            _number(r.speedup_vs_opencv),
            "" if r.components is None else str(r.components),
            r.note or r.status,
            style=_style(r),
        )
    return table


def _title(level: str) -> str:
    unit = (
        "one call labels a batch"
        if level == "kernel"
        else "one call reads, labels and writes all files"
    )
    return f"{level} level ({unit})"


def _batch(r: Record) -> str:
    return str(r.batch if r.level == "kernel" else f"{r.batch} ({r.images} files)")


def _style(r: Record) -> str:
    return {"mismatch": "bold red", "failed": "red"}.get(r.status, "")


def _number(value: float | None) -> str:
    """Three significant digits, or blank."""
    if value is None:
        return ""
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"


def _group_skipped(records: Sequence[Record]) -> dict[tuple[str, str], list[str]]:
    """Skipped records by engine and reason; a note's parenthesis is a per-record detail."""
    groups: dict[tuple[str, str], list[str]] = {}
    for r in records:
        reason, _, detail = r.note.partition(" (")
        where = r.case if r.batch is None else f"{r.case} batch {r.batch}"
        if detail:
            where += f" ({detail}"
        groups.setdefault((r.engine, f"{r.level}: {reason}"), []).append(where)
    return groups


def _summary(cases: list[str]) -> str:
    shown = "; ".join(cases[:3])
    return shown if len(cases) <= 3 else f"{shown}; and {len(cases) - 3} more"


def problems(records: Sequence[Record]) -> list[Record]:
    """The records that make the run fail: cross-check mismatches and engine errors."""
    return [r for r in records if r.status in ("mismatch", "failed")]


def print_problems(console: Console, bad: Sequence[Record]) -> None:
    """The mismatches and failures, loudly."""
    console.print(
        Text(f"CROSS-CHECK FAILED: {len(bad)} measurement(s) disagree or failed", style="bold red")
    )
    for r in bad:
        batch = "" if r.batch is None else f" batch {r.batch}"
        console.print(
            Text(
                f"  {r.status.upper()} {r.level} {r.case}{batch} {r.engine}: {r.note}", style="red"
            )
        )


def write_json(path: Path, records: Sequence[Record]) -> None:
    """A JSON list with one object per record (every field of Record)."""
    path.write_text(json.dumps([r.as_json() for r in records], indent=1) + "\n", encoding="utf-8")


def write_csv(path: Path, records: Sequence[Record]) -> None:
    """One row per record, columns as records.COLUMNS."""
    with path.open("w", newline="", encoding="utf-8") as file:
        writer = csv.DictWriter(file, COLUMNS, lineterminator="\n")
        writer.writeheader()
        for r in records:
            writer.writerow({k: ("" if v is None else v) for k, v in r.as_json().items()})


def write_plot(path: Path, records: Sequence[Record], machine: Mapping[str, str]) -> None:
    """A PNG bar chart of speed-up over OpenCV per case (log scale): one panel per level
    and batch size with speed-ups, one colour per engine, cases along the shared x axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter

    measured = [r for r in records if r.speedup_vs_opencv and r.engine != BASELINE]
    panels = sorted({(LEVELS.index(r.level), r.batch or 0) for r in measured})
    cases = list(dict.fromkeys(r.case for r in measured))
    engines = list(dict.fromkeys(r.engine for r in measured))
    colors = {engine: f"C{i}" for i, engine in enumerate(engines)}
    figure, axes = plt.subplots(
        max(1, len(panels)),
        1,
        figsize=(
            max(8.0, 0.3 * len(cases) * max(1, len(engines)) ** 0.5 + 2),
            2.6 * len(panels) + 2.4,
        ),
        squeeze=False,
        sharex=True,
    )
    times = FuncFormatter(lambda value, _: f"{value:g}x")
    # Label the 2s and 5s between the decades too: a panel may span less than one.
    minor = FuncFormatter(lambda value, _: f"{value:g}x" if f"{value:e}"[0] in "25" else "")
    for ax, (level_index, batch) in zip(axes[:, 0], panels, strict=False):
        level = LEVELS[level_index]
        in_panel = [r for r in measured if r.level == level and (r.batch or 0) == batch]
        shown = [e for e in engines if any(r.engine == e for r in in_panel)]
        bar = 0.8 / len(shown)
        for i, engine in enumerate(shown):
            bars = [
                (cases.index(r.case), r.speedup_vs_opencv) for r in in_panel if r.engine == engine
            ]
            ax.bar(
                [x - 0.4 + bar * (i + 0.5) for x, _ in bars],
                [speedup for _, speedup in bars],
                bar,
                color=colors[engine],
            )
        ax.set_yscale("log")
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.yaxis.set_major_formatter(times)
        ax.yaxis.set_minor_formatter(minor)
        ax.set_ylabel("speed-up over OpenCV", fontsize=8)
        ax.set_title(f"{level} level, batch {batch}", fontsize=9)
        ax.grid(axis="y", which="major", alpha=0.3)
    emulated = {r.case: r.emulation for r in records if r.engine == BASELINE and r.emulation}
    axes[-1, 0].set_xticks(range(len(cases)))
    axes[-1, 0].set_xticklabels(
        [f"{case} {EMULATED}" if case in emulated else case for case in cases],
        rotation=60,
        ha="right",
        fontsize=7,
    )
    for emulation in dict.fromkeys(emulated.values()):
        figure.text(
            0.01, 0.005, f"{EMULATED} OpenCV emulated: {emulation}", fontsize=7, va="bottom"
        )
    if not panels:
        axes[0, 0].text(0.5, 0.5, "no speed-ups: OpenCV was not measured", ha="center")
        axes[0, 0].set_axis_off()
    figure.suptitle(
        f"gccl bench. GPU: {machine.get('gpu', '?')}\nCPU: {machine.get('cpu', '?')}", fontsize=9
    )
    figure.legend(
        handles=[Patch(color=colors[e], label=e) for e in engines],
        loc="upper center",
        bbox_to_anchor=(0.5, 0.955),
        ncol=max(1, len(engines)),
        fontsize=8,
        frameon=False,
    )
    figure.tight_layout(rect=(0, 0, 1, 0.93))
    figure.savefig(path, dpi=90)
    plt.close(figure)
