"""CUDA kernel names are formed in one place (backends/cuda/kernel_names.py), and every name
Python can form is a kernel of the committed fatbin: read from it by cuobjdump (the
nvidia-cuda-cuobjdump wheel; no GPU needed), so a missing instantiation fails here."""

from __future__ import annotations

import ast
import glob
import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

import ccl_cli
from ccl_cli.backends.cuda.kernel_names import KERNELS, every_kernel_name, kernel_name

CUDA = Path(ccl_cli.__file__).parent / "backends" / "cuda"
FATBIN = CUDA / "src" / "gccl.fatbin"


def _cuobjdump() -> str | None:
    """The cuobjdump of the nvidia-cuda-cuobjdump wheel, else one on PATH."""
    if importlib.util.find_spec("nvidia") is not None:
        import nvidia

        for folder in nvidia.__path__:
            found = sorted(glob.glob(f"{folder}/*/bin/cuobjdump"))
            if found:
                return found[-1]
    return shutil.which("cuobjdump")


def _fatbin_kernels() -> set[str]:
    tool = _cuobjdump()
    if tool is None:
        pytest.skip("no cuobjdump (pip install nvidia-cuda-cuobjdump: the dev dependencies)")
    listing = subprocess.run(
        [tool, "--dump-resource-usage", str(FATBIN)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    return {
        line.split("Function", 1)[1].strip().rstrip(":")
        for line in listing.splitlines()
        if line.strip().startswith("Function ")
    }


def test_every_name_python_can_form_is_a_kernel_of_the_fatbin():
    kernels = _fatbin_kernels()
    assert len(kernels) > 100  # the listing was read
    missing = [name for name in every_kernel_name() if name not in kernels]
    assert missing == []


def test_a_name_outside_the_list_is_refused():
    assert kernel_name("gccl_pixel_local_{connectivity}_{dtype}", connectivity=8, dtype="u8") == (
        "gccl_pixel_local_8_u8"
    )
    with pytest.raises(ValueError, match="gccl_pixel_local_6_u8"):
        kernel_name("gccl_pixel_local_{connectivity}_{dtype}", connectivity=6, dtype="u8")
    with pytest.raises(ValueError, match="gccl_smooth_u32_i32"):  # 32-bit sums need int64
        kernel_name("gccl_smooth_{dtype}_{accumulator}", dtype="u32", accumulator="i32")
    with pytest.raises(ValueError, match="gccl_no_such"):
        kernel_name("gccl_no_such")


def test_every_template_forms_names_of_its_own():
    names = every_kernel_name()
    assert len(names) == len(set(names)) == sum(len(choices) for choices in KERNELS.values())


def _kernel_strings_outside_kernel_name(path: Path) -> list[str]:
    """String literals and f-strings that begin like a kernel's name ("gccl_") anywhere but
    as the template of a kernel_name call (docstrings aside)."""
    tree = ast.parse(path.read_text())
    allowed: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "kernel_name":
            allowed.update(id(arg) for arg in node.args[:1])
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                allowed.add(id(first.value))
    found = []
    for node in ast.walk(tree):
        if id(node) in allowed:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value.startswith("gccl_"):
                found.append(node.value)
        elif isinstance(node, ast.JoinedStr) and node.values:
            head = node.values[0]
            if isinstance(head, ast.Constant) and str(head.value).startswith("gccl_"):
                found.append(ast.unparse(node))
    return found


@pytest.mark.parametrize(
    "path", sorted(p for p in CUDA.glob("*.py") if p.name != "kernel_names.py"), ids=str
)
def test_no_kernel_name_is_formed_outside_kernel_names(path):
    assert _kernel_strings_outside_kernel_name(path) == []
