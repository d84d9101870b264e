"""summary.csv: a row per input of a run, and the earlier outputs a failed input moves aside.

A run with a list of inputs keeps its records and writes summary.csv whole
(atomically) at its end, in the order of the inputs. A run whose inputs arrive
over time (a stream, a watched folder) has no end to wait for, and must not
grow with every input: it writes the header at its start and appends each
row as its input finishes (whole rows in one write), so the file is true
while the run goes on, and it keeps only the records still in flight.

No earlier result sits next to a failed row, and none is lost: the files
gccl made for a failed input are renamed to their stale names
(x.labels.png -> x.labels.stale.png, io/made.move_aside), which its row
names, as it fails (inputs over time) or when the run ends.
"""

from __future__ import annotations

import csv
import io
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..errors import InputError, UsageError
from ..io.inputs import InputItem
from ..io.made import GROWS, MadeFiles, move_aside
from ..io.out_dir import OutDir
from ..io.output_paths import SUMMARY_NAME, OutputPaths
from ..io.owner import Facts, content_digest, digest_text
from .records import Record, Reporter

SUMMARY_COLUMNS = (
    "path",
    "page",
    "width",
    "height",
    "depth",
    "dtype",
    "components",
    "kept",
    "status",
    "message",
    "seconds",
)


def summary_csv(rows: Iterable[Sequence[object]]) -> bytes:
    """The summary.csv bytes: a header and one row per input."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(SUMMARY_COLUMNS)
    writer.writerows(rows)
    return buffer.getvalue().encode("utf-8")


class Summary:
    """The records of a run (see the module docstring), as it takes and finishes them.

    carry: inputs may be skipped for current outputs (--skip-existing): the earlier
    summary's rows are read first, so that a skipped row carries the numbers of the
    outputs it keeps (carry_numbers) and the latest summary describes the whole folder.
    """

    def __init__(
        self,
        out: OutDir,
        made: MadeFiles,
        appends: bool,
        reporter: Reporter,
        carry: bool = False,
    ):
        self.out = out
        self.path = out.root / SUMMARY_NAME
        self.earlier = _earlier_rows(out) if carry else {}
        self.made = made
        self.reporter = reporter
        self.counts: Counter[str] = Counter()
        #: Every record (a list of inputs), or the records in flight (inputs over time).
        self.records: dict[int, Record] = {}
        #: The outputs a record may write (or had), by the record's id: a failure clears them.
        self.outputs: dict[int, OutputPaths] = {}
        #: How many records the run took.
        self.taken_count = 0
        self.appends = appends
        self._unwritten = bytearray()  # appended rows a write failed to land
        self._failing = False
        self._fd: int | None = None
        #: The hash and size of every byte appended, written or still to write.
        self._content = content_digest()
        self._size = 0
        self._inode = 0
        if appends:
            try:
                header = summary_csv([])
                self._inode = out.write(self.path, header, made)[0]
                self._content.update(header)
                self._size = len(header)
                self._fd = out.open_append(SUMMARY_NAME)
            except (OSError, InputError) as error:
                reason = error.strerror if isinstance(error, OSError) else str(error)
                raise UsageError(f"cannot write {self.path} ({reason})") from None

    def taken(self, record: Record) -> None:
        """A record the run took (pending until it finishes)."""
        self.records[id(record)] = record
        self.taken_count += 1

    def carry_numbers(self, record: Record, paths: OutputPaths) -> None:
        """Give a record skipped for its current outputs at `paths` their numbers: `kept`
        from its statistics CSV, the size, dtype and components from the earlier summary's
        row of the input where it agrees with that CSV."""
        kept = _data_rows(self.out, paths.stats)
        if kept is None:
            return
        record.kept = kept
        row = self.earlier.get(_key(record.item))
        if row is None or row.get("kept") != str(kept):
            return
        try:
            record.width, record.height = int(row["width"]), int(row["height"])
            record.depth = int(row["depth"]) if row.get("depth") else None
            record.components = int(row["components"])
        except (KeyError, ValueError):
            return
        record.dtype = row.get("dtype", "")

    def may_write(self, record: Record, paths: OutputPaths) -> None:
        """`paths` are the outputs `record` may write: if it fails, those gccl made are moved
        aside."""
        self.outputs[id(record)] = paths

    def pending(self) -> list[tuple[Record, OutputPaths]]:
        """The records taken and not finished, with the outputs they may have written."""
        return [
            (record, self.outputs[key])
            for key, record in self.records.items()
            if record.status == "pending" and key in self.outputs
        ]

    def finished(self, record: Record) -> None:
        """A record whose status is final: with appends, its row goes into the file now."""
        if self._fd is None:
            return
        self.records.pop(id(record), None)
        paths = self.outputs.pop(id(record), None)
        self.counts[record.status] += 1
        if record.status == "failed" and paths is not None:
            self._move_aside(record, paths)
        self._append([record.row()])

    def close(self, untaken: list[InputItem], stopped: str) -> list[Record]:
        """End the summary: what was not finished is not-run, a failed input's outputs are
        moved aside, and the file is complete. Returns every record of a list of inputs
        (none with appends). `stopped`: why the run stopped early, the message of each
        record it did not finish."""
        records = list(self.records.values()) + [Record(item) for item in untaken]
        for record in records:
            if record.status == "pending":
                record.status = "not-run"
                record.message = stopped
        if self._fd is not None:
            for record in records:
                self.finished(record)
            try:
                os.fsync(self._fd)
            except OSError as error:
                raise UsageError(f"cannot write {self.path} ({error.strerror})") from None
            finally:
                os.close(self._fd)
            if self._unwritten:
                raise UsageError(f"cannot write {self.path} (its last rows are missing)")
            return []
        # No earlier result may sit next to a failed row (nor may another input's go).
        failed = [
            record for record in records if record.status == "failed" and id(record) in self.outputs
        ]
        if failed:  # (labels_png builds a path per row: only a failure pays for that)
            kept = {
                self.outputs[id(record)].labels_png
                for record in records
                if record.status != "failed" and id(record) in self.outputs
            }
            for record in failed:
                paths = self.outputs[id(record)]
                if paths.labels_png not in kept:
                    self._move_aside(record, paths)
        self.counts.update(record.status for record in records)
        try:
            self.out.write(self.path, summary_csv(record.row() for record in records), self.made)
        except (OSError, InputError) as error:
            reason = error.strerror if isinstance(error, OSError) else str(error)
            raise UsageError(f"cannot write {self.path} ({reason})") from None
        return records

    def _move_aside(self, record: Record, paths: OutputPaths) -> None:
        """Rename the outputs gccl made for the failed `record`; its row says where they went."""
        try:
            moved = move_aside(self.out, self.made, paths.all())
        except (OSError, InputError):  # a folder on the way gone or unreadable: nothing moved
            return
        if moved:
            record.message += f" (earlier outputs kept as {', '.join(moved)})"

    def _append(self, rows: list[list[object]]) -> None:
        """Append whole rows after what an earlier failed write left; a failure is said once.

        The record of made files lists the file as it will be after the rows (its inode,
        size and content) before they are written: a run killed between the two leaves the
        file as the line before listed it.
        """
        assert self._fd is not None
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerows(rows)
        data = text.getvalue().encode("utf-8")
        self._unwritten += data
        self._content.update(data)
        self._size += len(data)
        identity = (self._inode, self._size, GROWS)
        try:
            self.made.made(SUMMARY_NAME, identity, Facts(digest=digest_text(self._content)))
            try:
                while self._unwritten:
                    del self._unwritten[: os.write(self._fd, self._unwritten)]
            finally:
                self.made.settled(SUMMARY_NAME, identity)
        except (OSError, InputError) as error:
            if not self._failing:
                reason = error.strerror if isinstance(error, OSError) else str(error)
                self.reporter.notice(f"cannot append to {self.path} ({reason or error})")
            self._failing = True
            return
        self._failing = False


#: The largest earlier summary read for --skip-existing's numbers (millions of rows).
MAX_EARLIER_BYTES = 1 << 30
#: The largest statistics CSV counted (a million components).
MAX_STATS_BYTES = 1 << 28


def _key(item: InputItem) -> tuple[str, str]:
    """An input as summary.csv's path and page columns write it."""
    return str(item.path).replace("\0", "\\0"), "" if item.page is None else str(item.page + 1)


def _earlier_rows(out: OutDir) -> dict[tuple[str, str], dict[str, str]]:
    """The rows of the summary an earlier run left in --out, by path and page (none where
    there is none, or it does not read as one)."""
    try:
        data = out.read_small(SUMMARY_NAME, MAX_EARLIER_BYTES)
        if data is None:
            return {}
        rows = csv.DictReader(io.StringIO(data.decode("utf-8")))
        return {(row["path"], row["page"]): row for row in rows}
    except (OSError, InputError, UnicodeDecodeError, KeyError, csv.Error):
        return {}


def _data_rows(out: OutDir, path: Path) -> int | None:
    """The rows of the statistics CSV at `path` below its header, or None where it does not
    read."""
    for key, folder in out.folders(iter([out.key(path)])):
        if folder is None:
            return None
        try:
            data = out.read_small(key.rpartition("/")[2], MAX_STATS_BYTES, folder)
        except (OSError, InputError):
            return None
        return None if data is None else max(data.count(b"\n") - 1, 0)
    return None
