"""The package's import graph: no circles, no private names across modules, no private
name of the standard library or a dependency, and the contract (the semantics) independent of
every backend, reader and run."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "ccl_cli"
#: What ships or measures: the package, the scripts and the benchmarks.
SHIPPED = (PACKAGE, ROOT / "scripts", ROOT / "benchmarks")
#: Private names of the standard library the run once read, set or called.
KNOWN_PRIVATE = (
    "_run_exitfuncs",
    "_forkserver",
    "_forkserver_pid",
    "_forkserver_alive_fd",
    "_forkserver_address",
    "_processes",
    "_executor_manager_thread",
)
#: Underscore names the standard library documents as public.
DOCUMENTED = {"os._exit"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(imported module, names) for every import of ccl_cli code in `path`, at any depth."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target.split(".")[0] == "ccl_cli":
                found.append((target, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names if a.name.split(".")[0] == "ccl_cli"]
    return found


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for target, names in _imports(path):
            for imported in names or [""]:
                # "from pkg import module" imports the module; else the names of `target`.
                full = f"{target}.{imported}"
                graph[name].add(full if full in modules else target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in graph:
                continue
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_cycle_finder_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.slow
def test_no_import_circles():
    assert _cycles(_graph()) == []


@pytest.mark.slow
def test_no_private_names_imported_across_modules():
    offenders = [
        f"{_module_name(path)} imports {name} from {target}"
        for path in PACKAGE.rglob("*.py")
        for target, names in _imports(path)
        for name in names
        if name.startswith("_") and name != "__version__"
    ]
    assert offenders == []


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_uses(source: str) -> list[str]:
    """Private names `source` reads, sets or calls on anything but self and cls (an
    attribute, an import from another package, a getattr/setattr/hasattr string)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            owner = node.value
            own = isinstance(owner, ast.Name) and owner.id in ("self", "cls")
            if not own and ast.unparse(node) not in DOCUMENTED:
                found.append(ast.unparse(node))
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            parts = (node.module or "").split(".")
            found += [
                f"{node.module}.{alias.name}"
                for alias in node.names
                if any(map(_private, [*parts, alias.name]))
            ]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if any(map(_private, a.name.split(".")))]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
        ):
            found.append(ast.unparse(node))
    return found


def test_the_private_name_finder_finds_each_kind():
    source = (
        "import atexit, _thread\n"
        "from multiprocessing.forkserver import _forkserver\n"
        "atexit._run_exitfuncs()\n"
        "workers = getattr(pool, '_processes', None)\n"
        "self._mine = os._exit\n"
    )
    assert sorted(_private_uses(source)) == [
        "_thread",
        "atexit._run_exitfuncs",
        "getattr(pool, '_processes', None)",
        "multiprocessing.forkserver._forkserver",
    ]


@pytest.mark.slow
def test_no_private_name_of_the_standard_library_or_a_dependency():
    """Any Python release may change them: the package, scripts and benchmarks use public API."""
    offenders = [
        f"{path.relative_to(ROOT)}: {use}"
        for folder in SHIPPED
        for path in sorted(folder.rglob("*.py"))
        for use in _private_uses(path.read_text())
    ]
    assert offenders == []
    texts = "\n".join(path.read_text() for folder in SHIPPED for path in folder.rglob("*.py"))
    used = [name for name in KNOWN_PRIVATE if re.search(rf"(\.|['\"]){name}\b", texts)]
    assert used == []


@pytest.mark.slow
def test_contract_imports_no_backend_reader_or_run():
    contract = [name for name in _graph() if name.startswith("ccl_cli.contract")]
    assert contract
    for name in contract:
        outside = {t for t in _graph()[name] if not t.startswith("ccl_cli.contract")}
        assert outside <= {"ccl_cli.errors"}, (name, outside)


#: What the Python API may import of the backends: the interface and the factory.
BACKEND_INTERFACE = {"ccl_cli.backends", "ccl_cli.backends.base"}


def test_the_api_reaches_the_backends_through_the_interface_alone():
    """Host images, host volumes and device arrays all go through Backend (base.py), made by
    the factory (backends/__init__.py): no implementation module is the API's to call."""
    imported = _graph()["ccl_cli.api"]
    backends = {name for name in imported if name.startswith("ccl_cli.backends")}
    assert "ccl_cli.backends.base" in backends  # the finder sees the API's backend imports
    assert backends <= BACKEND_INTERFACE, sorted(backends - BACKEND_INTERFACE)


TESTS = ROOT / "tests"
#: Helpers of the tests that drive the product itself (the command line, the CUDA backend); every
#: other module of tests/ that is not a test is a reference or test data, written from the
#: README's contract.
PRODUCT_HELPERS = {"cli_helpers", "conftest", "gpu.cuda_helpers"}


def _test_module_name(path: Path) -> str:
    return ".".join(path.relative_to(TESTS).with_suffix("").parts)


def _imported_modules(source: str) -> set[str]:
    """Every module `source` imports, at any depth (absolute imports: tests/ is on the path)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) in ("importlib.import_module", "import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.add(node.args[0].value)
    return found


def _test_sources() -> dict[str, str]:
    return {_test_module_name(p): p.read_text() for p in sorted(TESTS.rglob("*.py"))}


def _product_reach(sources: dict[str, str]) -> dict[str, set[str]]:
    """Per module of tests/: the ccl_cli modules it imports, itself or through other modules of
    tests/ (a reference that imports a helper that imports the product is not independent)."""
    direct = {
        name: {m for m in _imported_modules(text) if m.split(".")[0] == "ccl_cli"}
        for name, text in sources.items()
    }
    local = {
        name: {m for m in _imported_modules(text) if m in sources and m != name}
        for name, text in sources.items()
    }
    reach: dict[str, set[str]] = {}
    for name in sources:
        seen, todo, product = {name}, [name], set()
        while todo:
            current = todo.pop()
            product |= direct[current]
            todo += [m for m in local[current] if m not in seen]
            seen |= local[current]
        reach[name] = product
    return reach


def _references(sources: dict[str, str]) -> list[str]:
    return [
        name
        for name in sources
        if not name.rpartition(".")[2].startswith("test_") and name not in PRODUCT_HELPERS
    ]


def _test_module_imports(sources: dict[str, str]) -> list[str]:
    """'a imports b' for every module of tests/ that imports a test module."""
    return [
        f"{name} imports {module}"
        for name, text in sources.items()
        for module in sorted(_imported_modules(text))
        if any(part.startswith("test_") for part in module.split("."))
    ]


def test_the_reference_and_test_import_finders_find_each_kind():
    sources = {
        "oracles": "import numpy as np\n",
        "shared": "from ccl_cli.contract.params import tau_joins\n",
        "cc3d_reference": "from shared import tau_joins\n",
        "stage_oracles": "def f():\n    import ccl_cli.contract.stats as s\n",
        "volume_oracles": "import importlib\nm = importlib.import_module('ccl_cli.api')\n",
        "test_a": "from test_b import helper\nfrom backends.test_c import other\n",
        "test_b": "import ccl_cli\n",
    }
    reach = _product_reach(sources)
    offenders = {name for name in _references(sources) if reach[name]}
    assert offenders == {"shared", "cc3d_reference", "stage_oracles", "volume_oracles"}
    assert _test_module_imports(sources) == [
        "test_a imports backends.test_c",
        "test_a imports backends.test_c.other",
        "test_a imports test_b",
        "test_a imports test_b.helper",
    ]


@pytest.mark.slow
def test_references_import_nothing_from_the_package():
    """A reference checks the product only if it does not share its code: the oracles, the
    cc3d reference, the shapes and the label-file readers are written from the README."""
    sources = _test_sources()
    references = _references(sources)
    assert {"cc3d_reference", "oracles", "stage_oracles", "volume_oracles"} <= set(references)
    reach = _product_reach(sources)
    assert {name: sorted(reach[name]) for name in references if reach[name]} == {}


@pytest.mark.slow
def test_test_modules_do_not_import_each_other():
    """Shared test code lives in helper modules of tests/, never in another test file."""
    assert _test_module_imports(_test_sources()) == []


#: The most lines of a Python module of the package, and of a C source or header of the engine.
MAX_PYTHON_LINES = 500
MAX_C_LINES = 700


def _too_long(paths: list[Path], limit: int) -> dict[str, int]:
    """{path: lines} of the files of `paths` longer than `limit` lines."""
    counts = {str(path.relative_to(ROOT)): len(path.read_text().splitlines()) for path in paths}
    return {path: count for path, count in counts.items() if count > limit}


def test_the_long_file_finder_finds_a_long_file() -> None:
    short, long = ROOT / "pyproject.toml", ROOT / "README.md"
    limit = len(short.read_text().splitlines())
    assert _too_long([short], limit) == {}
    assert _too_long([short, long], limit) == {"README.md": len(long.read_text().splitlines())}


def test_no_module_or_c_file_is_too_long():
    """A module over MAX_PYTHON_LINES, a C file over MAX_C_LINES holds more than one concern:
    split it by concern."""
    assert _too_long(sorted(PACKAGE.rglob("*.py")), MAX_PYTHON_LINES) == {}
    sources = sorted(PACKAGE.glob("native/src/*.[ch]"))
    assert sources  # the engine's sources are where the check looks
    assert _too_long(sources, MAX_C_LINES) == {}
