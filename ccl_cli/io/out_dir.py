"""The opened --out folder: every file below it made, read, renamed and removed through its
descriptor, whole, inside it, never through a link.

--out is opened once, when the run starts (the folder may be given through
a link: the user's choice, resolved then). Every file below it is reached
from that descriptor one folder at a time, each opened without following
links (O_NOFOLLOW), and never by its path again: a folder renamed, deleted
or swapped for a link while the run goes on cannot move a write elsewhere,
and `moved` notices it. A path that would leave --out, a link on the way, a
folder that is another run's --out (it holds its own GCCL_DIR) refuse that
file with one line.

Writes are whole: the data goes to a hidden temporary in the file's own
folder (created new: O_EXCL, O_NOFOLLOW), is flushed, and its identity and
the hash of its bytes are given to the owner (io/made.py: the record of what
gccl made; io/owner.py) before the temporary takes its name, and the owner
is told when that change has ended (settled). A free name is taken with a
hard link, which fails rather than replace a file that appeared meanwhile; a
name that holds a file is replaced only when the owner says gccl made that
very file, its content unchanged. Removals and renames ask the owner the
same. A run killed at any moment (SIGKILL included) leaves the old file, the
new file, or a temporary that a later run removes: temporaries are named so
(TEMP_PREFIX, io/out_changes.py), locked by their writer while it writes, and removed once their
writer is gone.

Reads of gccl's own files (the run record, the record of made files, the
lock) take regular files only, do not block (a FIFO is refused, not waited
on) and stop at a size limit.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import stat
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from ..errors import InputError, UsageError
from .out_changes import READ_FLAGS, TEMP_PREFIX, changing, is_an_out, remove_temporaries, unlink
from .output_paths import GCCL_DIR
from .owner import (
    Facts,
    FileIdentity,
    Owner,
    Source,
    content_at,
    content_digest,
    digest_text,
    file_identity,
)

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
#: How a file system that has no hard links refuses one.
_NO_LINKS = (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS)

#: A folder's identity: (st_dev, st_ino); the same folder under any name, link or mount.
Identity = tuple[int, int]


def not_made_here(path: Path) -> str:
    """Why a file in the way of an output stays."""
    return (
        f"{path} was not made by gccl in this --out; not replaced "
        "(move it away, or choose another --out)"
    )


class OutDir:
    """The --out folder, opened once: every file under it goes through here.

    Paths are given as `root / relative` (as output_paths makes them); each
    is checked to stay inside, and reached from the opened folder one
    component at a time without following links.
    """

    def __init__(self, root: Path, fd: int) -> None:
        """Use `fd`, the opened folder `root` (open and reopen make them)."""
        self.root = root
        self.fd = fd
        info = os.fstat(fd)
        #: The folder's identity, fixed when it was opened.
        self.identity: Identity = (info.st_dev, info.st_ino)
        self._prefix = os.path.join(str(root), "")  # root's text ending in the separator
        #: Folders below already found not to be another run's --out (by identity).
        self._checked: set[Identity] = set()

    @classmethod
    def open(cls, root: Path) -> OutDir:
        """Open --out, made (with its parents) when missing: the run's one resolution of it."""
        try:
            os.makedirs(root, exist_ok=True)
            # --out itself is the user's choice and may be a link; what lies below is not.
            fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as error:
            raise UsageError(
                f"cannot write into --out {root} ({error.strerror or error})"
            ) from None
        return cls(root, fd)

    @classmethod
    def reopen(cls, root: Path, inode: int) -> OutDir:
        """Open --out where a worker runs (by its absolute path, on storage it shares with
        the run) and make sure it is the folder the run opened: the same inode.

        InputError when it is not there or is another folder.
        """
        try:
            fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as error:
            raise InputError(f"cannot open --out {root} ({error.strerror or error})") from None
        if os.fstat(fd).st_ino != inode:
            os.close(fd)
            raise InputError(f"--out {root} was replaced during the run; nothing written")
        return cls(root, fd)

    def close(self) -> None:
        """Release the folder's descriptor."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> OutDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def moved(self) -> str | None:
        """Why --out is no longer where the run found it (deleted, or its path now names
        another folder or a link elsewhere), or None while it is."""
        info = os.fstat(self.fd)
        if info.st_nlink == 0:
            return f"--out {self.root} was deleted during the run"
        try:
            now = os.stat(self.root)
        except OSError:
            return f"--out {self.root} was moved or deleted during the run"
        if (now.st_dev, now.st_ino) != self.identity:
            return f"--out {self.root} was moved or replaced during the run"
        return None

    def key(self, path: Path) -> str:
        """`path` below --out, as the record of made files names it ("a/b/x.stats.csv")."""
        return "/".join(self._parts(path))

    def lstat(self, path: Path) -> os.stat_result | None:
        """What is at `path` (a link is not followed), or None when nothing is."""
        try:
            folder, name = self._folder(path, create=False)
        except FileNotFoundError:
            return None
        try:
            return os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            return None
        finally:
            os.close(folder)

    def write(
        self,
        path: Path,
        data: bytes | Iterable[bytes],
        owner: Owner,
        durable: bool = True,
        after_ns: int | None = None,
        source: Source | None = None,
        made_by: str | None = None,
    ) -> FileIdentity:
        """Write `data` (bytes, or pieces of them as a producer makes them) to `path` so that
        readers only ever see the whole file; returns the file's identity.

        owner: told of the file (its `source`, the input and page it was made
        for, `made_by`, that input's identity with the options, and its content's
        digest) before it takes its name; asked whether a file that holds the
        name now may be replaced (its identity and content).
        durable: flush it to disk before it takes its name (--fsync); without, a
        power cut soon after may leave an empty or an older file, never a partial
        one in a running system.
        after_ns: a time (an input's modification) the file's modification time
        must be later than: the file system's clock ticks every few milliseconds,
        so a file written soon after its input was may get the same time, which
        would make it look older than its input (run/freshness.py); it is then
        stamped 1 ns later.

        Raises InputError when `path` leaves --out, when a folder on the way is a
        link, not a folder or another run's --out, when `path` holds a link, a
        folder or a file gccl did not make, or when a file appeared there while
        it was written (nothing is replaced).
        """
        parts = self._parts(path)
        key = "/".join(parts)
        folder, name = self._folder(path, create=True, parts=parts)
        try:
            temp = f"{TEMP_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
            changing()
            fd = os.open(temp, _NEW_FLAGS, 0o666, dir_fd=folder)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # held while written: clean-up leaves it alone
                hashed = content_digest()
                for piece in (data,) if isinstance(data, bytes) else data:
                    hashed.update(piece)
                    view = memoryview(piece)
                    while view:
                        view = view[os.write(fd, view) :]
                if after_ns is not None and os.fstat(fd).st_mtime_ns <= after_ns:
                    os.utime(fd, ns=(after_ns + 1, after_ns + 1))
                if durable:
                    os.fsync(fd)
                identity = file_identity(os.fstat(fd))
                file, page = source or (None, None)
                facts = Facts(file, page, made_by, digest_text(hashed))
                changing()  # (the record's line is a change too, and the write took time)
                owner.made(key, identity, facts)
                try:
                    self._place(folder, temp, name, path, key, owner)
                finally:
                    owner.settled(key, identity)
            except BaseException:
                unlink(temp, folder)
                raise
            finally:
                os.close(fd)
        finally:
            os.close(folder)
        return identity

    @staticmethod
    def _place(folder: int, temp: str, name: str, path: Path, key: str, owner: Owner) -> None:
        """Give the written temporary its name: a free one (a hard link, which fails rather
        than replace a file that is there), or one that holds a file gccl made."""
        changing()
        try:
            os.link(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
        except FileExistsError:
            pass
        except OSError as error:
            if error.errno not in _NO_LINKS:
                raise
        else:
            unlink(temp, folder)
            return
        try:
            current = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:  # (a file system without hard links, and the name free)
            os.rename(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
            return
        if not stat.S_ISREG(current.st_mode):
            raise InputError(f"{path} is {kind_of(current.st_mode)}; not replaced")
        if not owner.ours(key, file_identity(current), content_at(name, folder)):
            raise InputError(not_made_here(path))
        changing()
        os.rename(temp, name, src_dir_fd=folder, dst_dir_fd=folder)

    def remove(self, path: Path, owner: Owner) -> bool:
        """Remove `path` if it is a file gccl made (the owner says so); True if removed.
        Anything else, links included, stays."""
        try:
            folder, name = self._folder(path, create=False)
        except (InputError, FileNotFoundError):
            return False
        try:
            info = os.stat(name, dir_fd=folder, follow_symlinks=False)
            if not stat.S_ISREG(info.st_mode):
                return False
            if not owner.ours(self.key(path), file_identity(info), content_at(name, folder)):
                return False
            changing()
            unlink(name, folder)
            return True
        except FileNotFoundError:
            return False
        finally:
            os.close(folder)

    def rename(self, path: Path, new_name: str, owner: Owner) -> bool:
        """Rename the file gccl made at `path` to `new_name` in its folder, replacing only a
        file gccl made there; True if renamed (the owner is told of the new name first)."""
        try:
            folder, name = self._folder(path, create=False)
        except (InputError, FileNotFoundError):
            return False
        new_key = "/".join([*self._parts(path)[:-1], new_name])
        try:
            info = os.stat(name, dir_fd=folder, follow_symlinks=False)
            content = content_at(name, folder)
            if not stat.S_ISREG(info.st_mode) or not owner.ours(
                self.key(path), file_identity(info), content
            ):
                return False
            try:
                there = os.stat(new_name, dir_fd=folder, follow_symlinks=False)
            except FileNotFoundError:
                there = None
            if there is not None and (
                not stat.S_ISREG(there.st_mode)
                or not owner.ours(new_key, file_identity(there), content_at(new_name, folder))
            ):
                return False
            identity = file_identity(info)
            owner.made(new_key, identity, Facts(digest=content()))
            try:
                changing()
                os.rename(name, new_name, src_dir_fd=folder, dst_dir_fd=folder)
            finally:
                owner.settled(new_key, identity)
            return True
        except FileNotFoundError:
            return False
        finally:
            os.close(folder)

    def read_small(self, name: str, limit: int, folder: int | None = None) -> bytes | None:
        """The bytes of the regular file `name` at the top of --out (or in the opened
        `folder`), or None when there is none. InputError when it is something else (a link,
        a FIFO, a device: never followed nor waited on) or larger than `limit` bytes."""
        where = self.fd if folder is None else folder
        try:
            fd = os.open(name, READ_FLAGS, dir_fd=where)
        except FileNotFoundError:
            return None
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise InputError(f"{self.root / name} is a link; gccl never follows it") from None
            raise
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise InputError(f"{self.root / name} is {kind_of(info.st_mode)}")
            chunks = []
            size = 0
            while size <= limit:
                chunk = os.read(fd, min(1 << 20, limit + 1 - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            if size > limit:
                raise InputError(f"{self.root / name} is larger than {limit} bytes")
            return b"".join(chunks)
        finally:
            os.close(fd)

    def open_append(self, name: str) -> int:
        """A descriptor appending to the regular file `name` at the top of --out (the caller
        closes it); the file must exist (write makes it)."""
        fd = os.open(name, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self.fd)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise InputError(f"{self.root / name} is not a regular file")
        return fd

    def gccl_folder(self, create: bool = True) -> int:
        """A descriptor of GCCL_DIR, gccl's own folder at the top of --out (the lock, the
        record of made files), made when missing (-1 instead without `create`); the caller
        closes it."""
        shown = self.root / GCCL_DIR
        if create:
            with contextlib.suppress(FileExistsError):
                os.mkdir(GCCL_DIR, 0o777, dir_fd=self.fd)
        try:
            return os.open(GCCL_DIR, _DIR_FLAGS, dir_fd=self.fd)
        except FileNotFoundError:
            if create:
                raise
            return -1
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.ENOTDIR):
                info = os.stat(GCCL_DIR, dir_fd=self.fd, follow_symlinks=False)
                raise UsageError(
                    f"{shown} is {kind_of(info.st_mode)}; gccl keeps its lock and its record of "
                    "the files it made there: move it"
                ) from None
            raise UsageError(f"cannot write into {shown} ({error.strerror or error})") from None

    def folders(self, keys: Iterator[str]) -> Iterator[tuple[str, int | None]]:
        """For each key (grouped by folder, in the order given), the key and a descriptor of
        its folder (None when that folder cannot be reached without a link); each
        descriptor is closed once its keys are done."""
        current: str | None = None
        fd: int | None = None
        try:
            for key in keys:
                folder = key.rpartition("/")[0]
                if folder != current:
                    if fd is not None:
                        os.close(fd)
                    current = folder
                    try:
                        fd, _ = self._folder(self.root / key, create=False)
                    except (OSError, InputError):
                        fd = None
                yield key, fd
        finally:
            if fd is not None:
                os.close(fd)

    def remove_temporaries(self) -> int:
        """Delete temporaries whose writer is gone (killed mid-write); returns how many.

        A temporary is its writer's while the writer holds an flock on it (the
        kernel drops it when the writer dies). Another run's live temporaries
        (a run into a sub-folder, or one sharing a folder of this tree) are
        left alone, and so is anything not named as a temporary. Links are
        not followed, and another run's --out below (a folder holding its own
        GCCL_DIR) is not entered.
        """
        return remove_temporaries(self.fd)

    def _parts(self, path: Path) -> Sequence[str]:
        """`path`'s components below --out; InputError when it would leave --out."""
        text = str(path)
        if text.startswith(self._prefix):  # the usual case, without pathlib's parsing
            parts: Sequence[str] = text[len(self._prefix) :].split(os.sep)
        else:
            try:
                relative = path.relative_to(self.root)
            except ValueError:
                raise InputError(f"{path} is outside --out {self.root}; not written") from None
            parts = () if relative.is_absolute() else relative.parts
        if not parts or any(part in ("..", ".", "") for part in parts):
            raise InputError(f"{path} would leave --out {self.root}; not written")
        return parts

    def _folder(
        self, path: Path, create: bool, parts: Sequence[str] | None = None
    ) -> tuple[int, str]:
        """A descriptor of `path`'s folder (the caller closes it) and its name there
        (`parts`: its components below --out, when known)."""
        parts = parts if parts is not None else self._parts(path)
        fd = os.dup(self.fd)
        for index, part in enumerate(parts[:-1]):  # each step closes the folder it leaves
            fd = self._enter(fd, part, create, self.root.joinpath(*parts[: index + 1]))
        return fd, parts[-1]

    def _enter(self, fd: int, part: str, create: bool, shown: Path) -> int:
        """The sub-folder `part` of folder `fd` (which is closed), made when missing; InputError
        when it is a link, not a folder, or another run's --out."""
        made = False
        try:
            try:
                inner = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, dir_fd=fd)
                    made = True
                inner = os.open(part, _DIR_FLAGS, dir_fd=fd)
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.ENOTDIR):
                info = os.stat(part, dir_fd=fd, follow_symlinks=False)
                raise InputError(
                    f"{shown} is {kind_of(info.st_mode)} inside --out; gccl writes only into "
                    "real folders there"
                ) from None
            raise
        finally:
            os.close(fd)
        if made:
            return inner
        info = os.fstat(inner)
        if (info.st_dev, info.st_ino) not in self._checked:
            if is_an_out(".", inner):
                os.close(inner)
                raise InputError(
                    f"{shown} is the --out of another gccl run (it holds {GCCL_DIR}); "
                    "nothing written there"
                )
            self._checked.add((info.st_dev, info.st_ino))
        return inner


def kind_of(mode: int) -> str:
    """What a file that is not a regular one is, for messages."""
    if stat.S_ISLNK(mode):
        return "a link"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    return "not a regular file"
