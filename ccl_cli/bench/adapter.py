"""What every engine of a benchmark is behind: one small adapter (engines.py has them all).

An adapter says whether its library is available (and why not), which cases
it can label (mode, size caps for slow methods, a tolerance that grows with
the values), what one call computes (the summary compares it), turns a batch
into its input outside the timed region (a foreground mask, a copy on the
GPU), and labels the batch in `run`, the call that is timed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ..contract.params import LabelParams, foreground_mask
from .suite import Case

#: What an engine's call computes (BenchEngine.work), in parts the summary compares: the
#: labels, per component its area, bounding box and centroid, its intensity mean, min and
#: max, and outlines (gccl's polygons, OpenCV's contours).
LABELS = ("labels",)
BOXES = ("labels", "box+centroid")
STATISTICS = ("labels", "box+centroid", "mean/min/max")
OUTLINES = ("outlines",)

#: Per-image pixel caps of the slow methods (their time would swamp the run).
VGA_PIXELS = 640 * 480
FULL_HD_PIXELS = 1920 * 1080


@dataclass
class Output:
    """What one timed call produced: labels of the batch, and the components in it.

    components: an int, or a device array of K per image, read only after the
    timed call (reading it would wait for the GPU inside the timing).
    """

    labels: Any
    components: Any

    def total(self) -> int:
        """Components in the whole batch."""
        if isinstance(self.components, int):
            return self.components
        return int(self.components.sum())


class BenchEngine:
    """One labeling implementation `gccl bench` compares (an --engines name): the adapter
    interface; subclasses fill in the class attributes and methods.

    name: the --engines name.  on_device: data and timing live on the GPU
    (CUDA events).  raster_order: labels promise gccl's numbering (README.md, "What the
    labels mean"), so two such engines must agree exactly, not only up to renumbering.
    end_to_end_modes: the modes the engine has a file pipeline for (see files.py).
    end_to_end_batched: whether that pipeline takes --batch (else it runs at batch 1 only).
    max_pixels: per mode, the largest image (in pixels) it is run on.
    ranks: what it labels: 2 images (N, H, W batches), 3 volumes ((N, D, H, W) batches,
    connectivity 6, 18 or 26).
    """

    name = ""
    #: What one call computes, for the summary's comparisons: labels only, or more.
    work: tuple[str, ...] = LABELS
    #: Whether tau mode's tolerance may grow with the values (--tau-quadratic ...).
    growing_tolerance = False
    on_device = False
    raster_order = False
    end_to_end_modes: tuple[str, ...] = ()
    end_to_end_batched = False
    #: Why there is no end-to-end run, when end_to_end_modes is empty.
    no_end_to_end = "no file pipeline"
    modes: tuple[str, ...] = ("binary",)
    max_pixels: ClassVar[dict[str, int]] = {}
    ranks: tuple[int, ...] = (2,)

    def description(self) -> str:
        """One line for the report: the call timed and its settings."""
        raise NotImplementedError

    def unavailable(self) -> str | None:
        """Why the engine cannot run on this machine, or None when it can."""
        raise NotImplementedError

    def emulation(self, mode: str) -> str:
        """How the engine stands in for a mode its library does not have ("" where it has it)."""
        return ""

    def unsupported(self, case: Case) -> str | None:
        """Why the engine does not run `case`, or None when it does."""
        mode = case.params.mode
        if case.params.rank not in self.ranks:
            return "labels 2-D images only" if self.ranks == (2,) else "labels volumes only"
        if mode not in self.modes:
            return f"has no {mode} mode"
        growing = case.params.tau_relative > 0 or case.params.tau_quadratic > 0
        if mode == "tau" and growing and not self.growing_tolerance:
            return (
                "has no tolerance growing with the values, as --tau-relative or --tau-quadratic ask"
            )
        cap = self.max_pixels.get(mode)
        if cap is not None and case.pixels > cap:
            return f"too slow: {mode} mode runs on images up to {cap / 1e6:.1f} Mpixel only"
        return None

    def prepare(self, batch: np.ndarray, params: LabelParams) -> Any:
        """The engine's input for an (N, H, W) batch (not timed)."""
        if params.mode == "binary":
            return foreground_mask(batch, params).view(np.uint8)
        return batch

    def run(self, prepared: Any, params: LabelParams) -> Output:
        """Label the prepared batch (the timed call)."""
        raise NotImplementedError

    def host_labels(self, output: Output) -> np.ndarray:
        """The (N, H, W) labels of an output as a numpy array (for the cross-check)."""
        return np.asarray(output.labels)

    def release(self) -> None:
        """Give back memory cached between calls (after each measurement)."""

    def end_to_end(self, folder: Path, out: Path, params: LabelParams, batch: int) -> int:
        """Label every file of `folder`, writing labels and statistics into `out`.

        Returns the components in all files; raises on any failure.
        """
        raise NotImplementedError


class DeviceEngine(BenchEngine):
    """An engine whose data lives on the GPU: labels are copied back only to be checked."""

    on_device = True

    def host_labels(self, output: Output) -> np.ndarray:
        import cupy

        return np.asarray(cupy.asnumpy(output.labels))

    def release(self) -> None:
        import cupy

        cupy.get_default_memory_pool().free_all_blocks()


def cpu_threads() -> int:
    """The CPU threads engines may use: every core."""
    return os.cpu_count() or 1
