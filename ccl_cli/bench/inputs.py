"""The inputs gccl bench measures on: each file's values as `gccl label` reads them, and the
short names its report gives them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import InputError, UsageError


def read_input(item: Any) -> Any:
    """The values of an input: an (H, W) image, or a (D, H, W) volume where the file is one
    (io.volumes.volume_format: its name, a .npy's header, a TIFF's z-axis metadata)."""
    from ..io.decode import read_image

    try:
        if item.volume:
            from ..io.volumes import read_volume
            from ..options import MAX_IMAGE_BYTES

            return read_volume(item.path, MAX_IMAGE_BYTES).values
        return read_image(item.path, page=item.page)
    except InputError as error:
        raise UsageError(f"{item.display}: {error}") from None


def short_names(inputs: Sequence[tuple[Path, int | None]]) -> list[str]:
    """Each input's shortest trailing part of its path that no other input shares (the file
    name, or as many folders above it as tell two apart), with its page where it has one."""
    parts = [(path.parts, page) for path, page in inputs]
    names = []
    for mine, page in parts:
        for count in range(1, len(mine) + 1):
            tail = mine[-count:]
            if sum(1 for other, its in parts if (other[-count:], its) == (tail, page)) == 1:
                break
        name = Path(*tail).as_posix()
        names.append(name if page is None else f"{name} p{page + 1}")
    return names
