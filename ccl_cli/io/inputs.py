"""Finding the inputs of a run: files, folders, glob patterns and `-` for stdin.

Each input keeps the path it is read from and the relative path its outputs
mirror under --out (a file found as <dir>/a/b/img.png under the folder <dir>
gets outputs in OUT/a/b/; a file named directly or on stdin gets them in
OUT/, or below ROOT's mirror with --relative-to ROOT). A relative path never
leaves --out: one that would climb out of its folder (`..` after a wildcard)
is cut to the file's name, and with --relative-to an input outside ROOT
fails. `**` in a pattern does not enter linked folders and visits each
folder once, so a link pointing back up the tree cannot make the expansion
endless. Every input named or found ends as a summary row: a file that
cannot be had (missing, a link to nothing, an unreadable folder) fails with
the reason, a named folder without images gets a row saying so, and a path
listed twice is labeled once. OutPlace places --out by identity, so that no
scan reads it whatever the spelling.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

from ..errors import UsageError
from .decode import IMAGE_SUFFIXES, image_pages, is_image_path, may_hold_pages
from .globbing import GLOB_CHARS, glob_base, glob_paths
from .out_dir import Identity, Source
from .output_paths import GCCL_DIR, is_output_image
from .seen import Seen
from .stdin_names import MAX_NAME_BYTES, LongLine, read_names
from .volumes import volume_format
from .volumes.detect import format_of_name


@dataclass(frozen=True)
class InputItem:
    """One input: where to read it, where its outputs go, or why it cannot be had.

    problem: why the input fails without being read. empty: why a named folder
    gave no image (its row says so). duplicate: the input listed first under
    the same path (this one is not labeled again). page: which page (from 0) of a
    multi-page TIFF this input is, each labeled as an image of its own; pages:
    how many its file has (the outputs of pages it no longer has are moved
    aside when its first is admitted). resume: skipped where its outputs are
    current, as --skip-existing does (what a watch finds when it starts).
    volume: the volume format of a file that is one volume (io/volumes: nifti, nrrd,
    metaimage, tiff, npy), or "slices" for a folder whose 2-D images are one (--volume);
    None for an image.
    """

    path: Path
    relative: Path
    problem: str | None = None
    empty: str | None = None
    duplicate: str | None = None
    page: int | None = None
    resume: bool = False
    pages: int = 1
    volume: str | None = None

    @property
    def display(self) -> str:
        """The path as the user gave or the scan found it, and the page (for messages)."""
        return str(self.path) if self.page is None else f"{self.path} (page {self.page + 1})"

    @property
    def source(self) -> Source:
        """What the record of made files says this input's outputs were made for: the place
        below --out of its file (a page's outputs are named after it) and its page."""
        return "/".join(_file_place(self.relative, self.page).parts), self.page


def is_input_name(name: str | Path) -> bool:
    """Whether a folder scan (or a watch) takes a file of this name: an image's, or a volume
    file's (io/volumes: .nii, .nii.gz, .nrrd, .nhdr, .mha, .mhd)."""
    return is_image_path(name) or format_of_name(name) is not None


def expand(
    specs: Iterable[str],
    recursive: bool,
    stdin: IO[Any] | None = None,
    null: bool = False,
    relative_to: Path | None = None,
    out: OutPlace | None = None,
    passed_over: list[Path] | None = None,
    volume: bool = False,
) -> list[InputItem]:
    """The inputs named by the command-line arguments, in a stable order.

    `-` reads paths from `stdin`, one a line (only the line end, \\n or \\r\\n,
    is taken off: spaces belong to the name), or NUL-separated with `null`
    (find -print0). `relative_to`: outputs mirror each input's path below it.
    `out`: where --out is; an argument that scans it (or, with `recursive`, a
    folder above it) is a UsageError, a path on stdin that does fails alone.
    `passed_over`: receives the files the folder scans pass over (passed_over_notice).
    `volume` (--volume): a multi-page TIFF is a z-stack, and a folder argument's 2-D images
    are the slices of one volume (with_pages).
    """
    items: list[InputItem] = []
    for spec in specs:
        if spec == "-":
            for name in read_names(stdin or sys.stdin, null):
                items.extend(expand_name(name, recursive, out, passed_over, volume))
        else:
            items.extend(_expand_one(spec, recursive, out, passed_over, volume))
    return Listing(relative_to).add(items)


def passed_over_notice(paths: list[Path], named: int = 3) -> str:
    """One line saying how many files folder scans passed over, naming the first few: files
    that are not images gccl reads, and images gccl wrote in an earlier run's --out."""
    outputs = [path for path in paths if is_image_path(path)]
    others = [path for path in paths if not is_image_path(path)]
    parts = []
    if others:
        more = f" and {len(others) - named} more" if len(others) > named else ""
        parts.append(
            f"{len(others)} file(s) that are not images gccl reads "
            f"({' '.join(IMAGE_SUFFIXES)}): {', '.join(map(str, others[:named]))}{more}"
        )
    if outputs:
        more = f" and {len(outputs) - named} more" if len(outputs) > named else ""
        parts.append(
            f"{len(outputs)} image(s) gccl wrote in an earlier run's --out (outputs are not "
            f"inputs): {', '.join(map(str, outputs[:named]))}{more}"
        )
    return "passed over " + "; ".join(parts)


def expand_name(
    name: str | LongLine,
    recursive: bool,
    out: OutPlace | None = None,
    passed_over: list[Path] | None = None,
    volume: bool = False,
) -> list[InputItem]:
    """The inputs one name from stdin stands for (a file, folder or glob pattern); a
    folder that would scan --out (see expand), or a line too long to name a file, is one
    failed input."""
    if isinstance(name, LongLine):
        problem = f"a line of {name.size} bytes on stdin: no path is longer than {MAX_NAME_BYTES}"
        return [InputItem(Path(name.start + "..."), Path(), problem)]
    try:
        return list(_expand_one(name, recursive, out, passed_over, volume))
    except OutInsideInput as error:
        return [InputItem(error.folder, Path(error.folder.name), str(error))]


def _expand_one(
    spec: str,
    recursive: bool,
    out: OutPlace | None,
    passed_over: list[Path] | None,
    volume: bool = False,
) -> Iterator[InputItem]:
    passed = [] if passed_over is None else passed_over
    if volume and _is_folder(spec):  # (--volume) its 2-D images are one volume's slices
        if out is not None:
            out.check_root(Path(spec), False)  # --out there: its outputs would be slices
        yield InputItem(Path(spec), Path(Path(spec).name), volume="slices")
        return
    for item in _expand_spec(spec, recursive, out, passed):
        yield from _pages(item, volume)


def _is_folder(spec: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(spec).st_mode)
    except (OSError, ValueError):
        return False


def with_pages(item: InputItem, volume: bool = False) -> list[InputItem]:
    """`item` as the input of one volume (io/volumes.volume_format; `volume`: --volume),
    or one item per page of a multi-page TIFF: page N of a.tif has the outputs of
    a.pNNNN.tif (a.p0001.labels.png, ...), or `item` itself."""
    return list(_pages(item, volume))


def _pages(item: InputItem, volume: bool = False) -> Iterator[InputItem]:
    if item.problem or item.empty:
        yield item
        return
    if format_of_name(item.path) not in (None, "tiff"):  # by name, a .npy by its header
        found = volume_format(item.path, volume)
        if found is not None:
            yield replace(item, volume=found)
            return
    if not may_hold_pages(item.path):
        yield item
        return
    count = image_pages(item.path)
    if count == 1:  # (a one-page TIFF is an image: its metadata is not looked at)
        yield item
        return
    if volume_format(item.path, volume) == "tiff":  # a z-stack, or pages with --volume
        yield replace(item, volume="tiff")
        return
    for page in range(count):
        yield replace(item, page=page, relative=_page_name(item.relative, page), pages=count)


#: What _page_name adds to a file's stem for a page: ".p0001" for the first.
_PAGE_MARK = ".p{:04d}"


def _page_name(relative: Path, page: int | None) -> Path:
    """Where page `page` of the file at `relative` mirrors (the file itself for None)."""
    if page is None:
        return relative
    return relative.with_name(f"{relative.stem}{_PAGE_MARK.format(page + 1)}{relative.suffix}")


def _file_place(relative: Path, page: int | None) -> Path:
    """Where the file of the page mirrored at `relative` mirrors (_page_name undone)."""
    if page is None:
        return relative
    stem = relative.stem[: -len(_PAGE_MARK.format(page + 1))]
    return relative.with_name(stem + relative.suffix)


def _expand_spec(
    spec: str, recursive: bool, out: OutPlace | None, passed_over: list[Path]
) -> Iterator[InputItem]:
    if "\0" in spec:
        name = Path(spec.replace("\0", "?"))
        yield InputItem(
            Path(spec), Path(name.name), "the name holds a NUL byte (for find -print0, use -0)"
        )
        return
    path = Path(spec)
    try:  # the name as given: Path drops a trailing slash, which says "a folder"
        is_folder = stat.S_ISDIR(os.stat(spec).st_mode)
    except FileNotFoundError:
        is_folder = None  # nothing there, or a link to nothing
    except OSError as error:  # a name too long, a folder on the way unreadable, a link loop,
        # a file named with a trailing slash (ENOTDIR)
        yield InputItem(path, Path(path.name), _unreachable(error))
        return
    if is_folder:
        yield from _scan(path, recursive, out, passed_over)
    elif is_folder is not None or os.path.islink(path):
        problem = None if is_folder is not None else "a link to a file that does not exist"
        yield InputItem(path, Path(path.name), problem)
    elif GLOB_CHARS & set(spec):
        matches = sorted(set(glob_paths(spec)))
        if not matches:
            # as a folder without images: nothing to label (exit 3), not a failure
            yield InputItem(path, Path(path.name), empty="the pattern matches no file")
        base = glob_base(spec)
        for match in matches:
            found = Path(match)
            if os.path.isdir(found):
                yield from _scan(found, recursive, out, passed_over)
            else:
                yield InputItem(found, _relative_to(found, base))
    else:
        yield InputItem(path, Path(path.name), "no such file or directory")


def _unreachable(error: OSError) -> str:
    """Why a path cannot be looked at: stat refuses only when a folder on the way may not be
    entered (the file's own permissions do not matter to it)."""
    if error.errno == errno.EACCES:
        return f"a folder on its path may not be entered ({error.strerror})"
    if error.errno == errno.ENOTDIR and os.fsdecode(error.filename or "").endswith("/"):
        return "a file, named as a folder (a trailing /)"
    return error.strerror or str(error)


def _scan(
    folder: Path, recursive: bool, out: OutPlace | None, passed_over: list[Path]
) -> Iterator[InputItem]:
    """The images of a named folder (and below it with `recursive`), sorted by path; a
    folder that gives none is one item saying so; the other files go to `passed_over`.
    OutInsideInput when the scan would read --out."""
    if out is not None:
        out.check_root(folder, recursive)
    not_scanned: list[Path] = []
    found = False
    in_out = any((above / GCCL_DIR).is_dir() for above in folder.absolute().parents)
    for item in _scan_folder(folder, folder, recursive, not_scanned, passed_over, in_out):
        found = True
        yield item
    if not found:
        hint = ""
        if not_scanned:
            hint = f"; its {len(not_scanned)} sub-folder(s) are scanned with --recursive"
        yield InputItem(folder, Path(folder.name), empty=f"no images in this folder{hint}")


def unreadable_folder(root: Path, folder: Path, error: OSError) -> InputItem:
    """The failed input of `folder`, at or below the scanned `root`, that `error` kept from
    being read (its row stands for the images it may hold)."""
    relative = folder.relative_to(root) if folder != root else Path(folder.name)
    return InputItem(folder, relative, f"cannot read the folder ({error.strerror or error})")


def _scan_folder(
    root: Path,
    folder: Path,
    recursive: bool,
    not_scanned: list[Path],
    passed_over: list[Path],
    in_out: bool = False,
) -> Iterator[InputItem]:
    """Images below `root`, depth first in name order (the order of sorted paths).

    Hidden entries are skipped and linked folders not entered; an unreadable
    folder, a link to nothing and anything else named like an image that is
    not a file each become an item that fails with the reason; other files are
    added to `passed_over`. So are the images gccl writes (label images,
    previews: output_paths.is_output_image) in an earlier run's --out (a folder
    that holds GCCL_DIR, and below it: `in_out`): outputs are not inputs.
    """
    below = folder.relative_to(root)  # each image's outputs mirror its path below root
    try:
        with os.scandir(folder) as scan:
            entries = sorted(scan, key=lambda entry: entry.name)
    except OSError as error:
        yield unreadable_folder(root, folder, error)
        return
    in_out = in_out or any(entry.name == GCCL_DIR for entry in entries)
    for entry in entries:
        name = entry.name
        if name.startswith("."):
            continue
        try:
            is_folder = entry.is_dir(follow_symlinks=False)
        except OSError:
            is_folder = False
        if is_folder:
            if recursive:
                yield from _scan_folder(
                    root, folder / name, recursive, not_scanned, passed_over, in_out
                )
            else:
                not_scanned.append(folder / name)
            continue
        if not is_input_name(name):
            try:
                if entry.is_file():
                    passed_over.append(folder / name)
            except OSError:
                pass  # (gone, or not to be had: not an image either way)
            continue
        path = folder / name
        if in_out and is_output_image(name):
            passed_over.append(path)
            continue
        try:
            is_file = entry.is_file()
        except OSError:
            is_file = False
        problem = None
        if not is_file:
            problem = (
                "a link to a file that does not exist"
                if entry.is_symlink() and not os.path.exists(path)
                else "not a file"
            )
        if is_file or not entry.is_dir():  # a link to a folder is not an image
            yield InputItem(path, below / name, problem)


class Listing:
    """Inputs as a run lists them: each path after its first listing marked a duplicate of
    it, and with `relative_to`, outputs mirroring each input's path below that folder."""

    def __init__(self, relative_to: Path | None = None, seen: Seen | None = None) -> None:
        self.relative_to = relative_to
        self.first = seen or Seen()  # (path, page) -> how it was first listed

    def add(self, items: Iterable[InputItem]) -> list[InputItem]:
        """`items` as listed after the ones added before."""
        return [self._listed(item) for item in items]

    def _listed(self, item: InputItem) -> InputItem:
        if item.problem or item.empty:
            return item
        target = os.path.abspath(item.path)  # (normalized too)
        first = self.first.first((target, item.page), item.display)
        if first is not None:
            return replace(item, duplicate=first)
        if self.relative_to is None:
            return item
        relative = os.path.relpath(target, os.path.normpath(os.path.abspath(self.relative_to)))
        if relative == os.curdir or relative.split(os.sep)[0] == os.pardir:
            return replace(item, problem=f"not below --relative-to {self.relative_to}")
        return replace(item, relative=_page_name(Path(relative), item.page))


def _relative_to(path: Path, base: Path) -> Path:
    """Where `path` mirrors under --out: below `base`, `..` folded; else just its name."""
    try:
        relative = Path(os.path.normpath(path.relative_to(base)))
    except ValueError:
        return Path(path.name)
    if relative.is_absolute() or ".." in relative.parts:
        return Path(path.name)
    return relative


class OutInsideInput(UsageError):
    """An input folder whose scan would read --out: the folder itself, or one above it
    scanned with --recursive (its outputs would be read back as inputs)."""

    def __init__(self, message: str, folder: Path) -> None:
        super().__init__(message)
        self.folder = folder


class OutPlace:
    """Where --out is, by identity: the folder (when it exists) and every folder above it.

    Resolved once, by the kernel (each folder above is the `..` of the one
    below), so an input folder is recognized whatever its spelling: through a
    link, a glob, a bind mount. An --out that does not exist yet is placed by
    the deepest folder of its path that does.
    """

    def __init__(self, out: Path) -> None:
        self.out = out
        text = str(out)
        try:
            while True:
                try:
                    fd = os.open(text, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                    break
                except FileNotFoundError:
                    parent = os.path.dirname(text.rstrip(os.sep)) or os.curdir
                    if parent == text:
                        raise
                    text = parent
        except NotADirectoryError:
            if os.path.lexists(out):
                raise UsageError(f"--out {out} exists and is not a folder") from None
            raise UsageError(f"cannot write into --out {out} (a part of it is a file)") from None
        except OSError as error:
            raise UsageError(f"cannot write into --out {out} ({error.strerror or error})") from None
        missing = os.path.relpath(out, text).split(os.sep) if text != str(out) else []
        if any(len(os.fsencode(part)) > os.fpathconf(fd, "PC_NAME_MAX") for part in missing):
            os.close(fd)
            raise UsageError(f"cannot write into --out {out} (File name too long)")
        info = os.fstat(fd)
        #: --out's identity, None when it does not exist yet.
        self.identity: Identity | None = (info.st_dev, info.st_ino) if text == str(out) else None
        #: The identities of the folders --out is (or will be) inside.
        self.above: set[Identity] = set()
        try:
            while True:
                self.above.add((info.st_dev, info.st_ino))
                above = os.open("..", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
                os.close(fd)
                fd = above
                up = os.fstat(fd)
                if (up.st_dev, up.st_ino) in self.above:  # the root is its own parent
                    break
                info = up
        except OSError:  # a folder above that cannot be opened: the chain stops there
            pass
        finally:
            os.close(fd)
        if self.identity is not None:
            self.above.discard(self.identity)

    def check_root(self, folder: Path, recursive: bool) -> None:
        """Raise OutInsideInput when scanning `folder` would read --out."""
        try:
            info = os.stat(folder)
        except OSError:
            return  # (scanning it says why it cannot be read)
        identity = (info.st_dev, info.st_ino)
        if identity == self.identity:
            raise OutInsideInput(
                f"--out {self.out} is the input folder {folder}; choose another folder", folder
            )
        if recursive and identity in self.above:
            raise OutInsideInput(
                f"--out {self.out} is inside the input folder {folder} that --recursive scans; "
                "its outputs would be read back as inputs",
                folder,
            )
