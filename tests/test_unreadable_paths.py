"""Paths the user may not read, met by the real command run as someone they refuse.

As root every path reads, so a root test run starts gccl without that power: as the user
`nobody` where that user can run this checkout's Python, else as root without the two
capabilities that pass over file permissions (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH: what
a user lacks). Run as another user, gccl runs as that user. The paths are locked with mode
0 either way. Each case asks for what the README promises: one line naming the path and the
reason, the rest labeled (checked against scipy), exit code 1, a failed row.
"""

from __future__ import annotations

import csv
import json
import os
import pwd
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import scipy.ndimage as ndi
from cli_helpers import TIMEOUT, WAIT_SECONDS
from label_files import read_label_image
from PIL import Image

EIGHT = np.ones((3, 3), bool)

#: Run by root's Python, before it becomes gccl: drop what lets root read any file, then
#: exec the command (so gccl's own process has no such power: its bounding set lacks it).
WITHOUT_FILE_POWERS = """\
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
PR_CAPBSET_DROP, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 24, 1, 2
for capability in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
    if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0):
        sys.exit("cannot drop capability %d: %s" % (capability, os.strerror(ctypes.get_errno())))
os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
"""


#: Whether the locked file refuses whoever runs this.
LOCKED_OUT = """\
try:
    open("in/secret.png", "rb")
except PermissionError:
    print("refused")
"""


class Refused:
    """Runs gccl as someone files of mode 0 refuse (see the module docstring), in `tree`."""

    def __init__(self, tree: Path) -> None:
        self.tree = tree
        self.user: dict[str, object] = {}
        self.prefix: list[str] = [sys.executable]
        if os.geteuid() == 0 and self._nobody_runs_python():
            nobody = pwd.getpwnam("nobody")
            self.user = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
        elif os.geteuid() == 0:
            self.prefix = [sys.executable, "-c", WITHOUT_FILE_POWERS]
        probe = self.popen(["-c", LOCKED_OUT])
        said, why = probe.communicate(timeout=TIMEOUT)
        if probe.returncode != 0 or said.strip() != "refused":
            pytest.skip(f"no way to run gccl as someone a file of mode 0 refuses: {why.strip()}")

    def _nobody_runs_python(self) -> bool:
        try:
            pwd.getpwnam("nobody")
            probe = subprocess.run(
                [sys.executable, "-c", "import ccl_cli.cli"],
                cwd=self.tree, user="nobody", group=pwd.getpwnam("nobody").pw_gid, extra_groups=[],
                capture_output=True,
                timeout=TIMEOUT,
            )  # fmt: skip
        except (KeyError, OSError):
            return False
        return probe.returncode == 0

    def popen(self, args: list[str], **options: object) -> subprocess.Popen[str]:
        return subprocess.Popen(  # type: ignore[call-overload]
            [*self.prefix, *args], cwd=self.tree, text=True, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **self.user, **options,
        )  # fmt: skip

    def gccl(self, *args: str, stdin: str = "") -> tuple[int, str]:
        """`gccl ARGS --device cpu`: its exit code and stderr."""
        process = self.popen(["-m", "ccl_cli", *args, "--device", "cpu"])
        _, stderr = process.communicate(stdin, timeout=TIMEOUT)
        assert "Traceback" not in stderr, stderr
        return process.returncode, stderr


@pytest.fixture
def tree() -> Iterator[Path]:
    """in/a.png, in/sub/c.png, in/locked/b.png and in/secret.png, the last two locked (mode 0),
    in a folder anyone may enter and write (pytest's own is root's alone)."""
    root = Path(tempfile.mkdtemp(prefix="gccl-unreadable-"))
    try:
        root.chmod(0o777)
        for number, name in enumerate(["a.png", "sub/c.png", "locked/b.png", "secret.png"]):
            path = root / "in" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.parent.chmod(0o755)
            mask = (np.random.default_rng(number).random((14, 17)) < 0.4) * 255
            Image.fromarray(mask.astype(np.uint8)).save(path)
            path.chmod(0o644)
        (root / "in" / "locked").chmod(0)
        (root / "in" / "secret.png").chmod(0)
        yield root
    finally:
        for path in (root / "in" / "locked", root / "in" / "secret.png"):
            path.chmod(0o755)
        shutil.rmtree(root)


def rows(out: Path) -> dict[str, tuple[str, str]]:
    with open(out / "summary.csv", newline="") as handle:
        return {row["path"]: (row["status"], row["message"]) for row in csv.DictReader(handle)}


def lines_naming(stderr: str, name: str) -> list[str]:
    return [line for line in stderr.splitlines() if name in line]


def assert_labeled(tree: Path, name: str) -> None:
    values = np.asarray(Image.open(tree / "in" / name))
    expected, _ = ndi.label(values, structure=EIGHT)
    labels = tree / "out" / Path(name).with_suffix(".labels.png")
    assert np.array_equal(read_label_image(labels), expected)


FOLDER = "cannot read the folder (Permission denied)"


@pytest.mark.slow
@pytest.mark.parametrize(
    "how",
    ["found by a recursive scan", "named", "named on stdin"],
)
def test_a_folder_the_user_may_not_read_is_one_line_and_the_rest_is_labeled(
    tree: Path, how: str
) -> None:
    refused = Refused(tree)
    if how == "found by a recursive scan":
        code, stderr = refused.gccl("label", "in", "-r", "--out", "out")
    elif how == "named":
        code, stderr = refused.gccl("label", "in/locked", "in/a.png", "--out", "out")
    else:
        code, stderr = refused.gccl("label", "-", "--out", "out", stdin="in/locked\nin/a.png\n")

    assert code == 1, stderr
    assert lines_naming(stderr, "locked") == [f"gccl: in/locked: {FOLDER}"]
    assert rows(tree / "out")["in/locked"] == ("failed", FOLDER)
    assert_labeled(tree, "a.png")
    if how == "found by a recursive scan":
        assert_labeled(tree, "sub/c.png")


@pytest.mark.slow
@pytest.mark.parametrize("how", ["named", "named on stdin"])
def test_a_file_below_a_folder_the_user_may_not_enter_is_one_line(tree: Path, how: str) -> None:
    refused = Refused(tree)
    if how == "named":
        code, stderr = refused.gccl("label", "in/locked/b.png", "in/a.png", "--out", "out")
    else:
        code, stderr = refused.gccl(
            "label", "-", "--out", "out", stdin="in/locked/b.png\nin/a.png\n"
        )

    assert code == 1, stderr
    why = "a folder on its path may not be entered (Permission denied)"
    assert lines_naming(stderr, "locked") == [f"gccl: in/locked/b.png: {why}"]
    assert rows(tree / "out")["in/locked/b.png"] == ("failed", why)
    assert_labeled(tree, "a.png")


@pytest.mark.slow
@pytest.mark.parametrize("how", ["found by a scan", "named", "named on stdin"])
def test_an_image_the_user_may_not_read_is_one_line_and_the_rest_is_labeled(
    tree: Path, how: str
) -> None:
    refused = Refused(tree)
    if how == "found by a scan":
        code, stderr = refused.gccl("label", "in", "--out", "out")
    elif how == "named":
        code, stderr = refused.gccl("label", "in/secret.png", "in/a.png", "--out", "out")
    else:
        code, stderr = refused.gccl("label", "-", "--out", "out", stdin="in/secret.png\nin/a.png\n")

    assert code == 1, stderr
    assert lines_naming(stderr, "secret") == ["gccl: in/secret.png: permission denied"]
    assert rows(tree / "out")["in/secret.png"] == ("failed", "permission denied")
    assert not list((tree / "out").glob("secret.*"))
    assert_labeled(tree, "a.png")


@pytest.mark.slow
def test_a_watch_says_what_it_may_not_read_once_and_goes_on(tree: Path) -> None:
    refused = Refused(tree)
    watch = refused.popen(
        ["-m", "ccl_cli", "watch", "in", "-r", "--out", "out", "--json", "--device", "cpu"]
    )
    lines: queue.SimpleQueue[str] = queue.SimpleQueue()

    def read() -> None:
        assert watch.stdout is not None
        for line in watch.stdout:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    try:
        seen: dict[str, str] = {}

        def wait_for(*paths: str) -> None:
            while not all(path in seen for path in paths):
                record = json.loads(lines.get(timeout=WAIT_SECONDS))
                seen[record["path"]] = record["status"]

        wait_for("in/a.png", "in/sub/c.png", "in/secret.png", "in/locked")
        new = tree / "in" / "sub" / "new.png"  # the watch goes on
        shutil.copy(tree / "in" / "a.png", tree / "in" / ".new.png")
        (tree / "in" / ".new.png").chmod(0o644)
        os.rename(tree / "in" / ".new.png", new)
        wait_for("in/sub/new.png")
        watch.send_signal(signal.SIGTERM)
        watch.wait(timeout=WAIT_SECONDS)
        assert watch.stderr is not None
        stderr = watch.stderr.read()
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()
    assert seen == {
        "in/a.png": "ok",
        "in/sub/c.png": "ok",
        "in/secret.png": "failed",
        "in/locked": "failed",
        "in/sub/new.png": "ok",
    }
    assert lines_naming(stderr, "locked") == [f"gccl: in/locked: {FOLDER}"]
    assert lines_naming(stderr, "secret") == ["gccl: in/secret.png: permission denied"]
    assert rows(tree / "out")["in/locked"] == ("failed", FOLDER)
    assert_labeled(tree, "sub/new.png")
