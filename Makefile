# gccl: the two set-up commands are `make demo` and `make test` (`make check`: the fast subset).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
DEMO_OUT ?= demo-out
NVCC ?= nvcc

ENGINE_SOURCES := setup.py $(wildcard ccl_cli/native/src/*.c ccl_cli/native/src/*.h)

.PHONY: demo test check lint pytest cubins cubins-check cpu-engine-check package-check venv clean

# A venv with pip and the setuptools that builds the package (setup.py runs in it).
$(VENV)/.made:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip 'setuptools>=77'
	touch $@

# The package (editable; the install compiles the CPU engine in place) and the dev tools;
# re-run pip when pyproject or setup.py changes.
$(VENV)/.installed-dev: pyproject.toml setup.py $(VENV)/.made
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

# The demo only needs the runtime dependencies (plus CuPy where a driver is present).
$(VENV)/.installed-run: pyproject.toml setup.py $(VENV)/.made
	$(PY) -m pip install -q -e .
	if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; then \
		$(PY) -m pip install -q -e '.[cuda13]' || echo "CUDA extra not installed: labeling on the CPU"; \
	fi
	touch $@

# The CPU engine's extension module compiled again in place when its sources change.
$(VENV)/.engine-built: $(ENGINE_SOURCES) | $(VENV)/.made
	$(PY) setup.py -q build_ext --inplace
	touch $@

venv: $(VENV)/.installed-dev $(VENV)/.engine-built

# The whole folder with the defaults, then the scan, the depth maps and a CT volume with
# the options that suit them (sample_data/README.md says why).
demo: $(VENV)/.installed-run $(VENV)/.engine-built
	rm -rf $(DEMO_OUT)
	$(VENV)/bin/gccl label sample_data --out $(DEMO_OUT)/all --preview
	$(VENV)/bin/gccl label sample_data/scan_g4.tif --invert --min-area 3 --out $(DEMO_OUT)/scan --preview
	$(VENV)/bin/gccl label sample_data/room.depth.png --tau 5 --tau-quadratic 3.5e-6 --min-area 50 --out $(DEMO_OUT)/depth --preview
	$(VENV)/bin/gccl label sample_data/room_meters.tif --tau 0.025 --out $(DEMO_OUT)/depth-m --preview
	$(VENV)/bin/gccl label sample_data/volumes/part_ct.tif --threshold 120 --invert --min-area 8 --out $(DEMO_OUT)/ct --preview
	@for f in all scan depth depth-m ct; do echo "--- $(DEMO_OUT)/$$f/summary.csv"; cat $(DEMO_OUT)/$$f/summary.csv; done

lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check ccl_cli tests scripts benchmarks
	$(VENV)/bin/ruff format --check ccl_cli tests scripts benchmarks
	$(VENV)/bin/mypy ccl_cli

pytest: $(VENV)/.installed-dev $(VENV)/.engine-built
	$(VENV)/bin/pytest -q

test: lint cubins-check cpu-engine-check pytest

# The inner loop: lint and the tests not marked slow (pyproject's markers), under a minute
# on 2 cores. `make test` stays the full gate (CI).
check: lint $(VENV)/.installed-dev $(VENV)/.engine-built
	$(VENV)/bin/pytest -q -m "not slow"

# One fatbin for every supported GPU generation, plus a manifest of the sources' hash.
cubins:
	$(PYTHON) scripts/build_cubins.py --nvcc $(NVCC)

# Exit 0 only when the committed fatbin was built from today's sources; also
# compiles every .cu when nvcc is present, so a kernel that does not compile fails.
cubins-check:
	$(PYTHON) scripts/build_cubins.py --check --nvcc $(NVCC)

# The CPU engine compiled as the package build does, with every warning an error (a
# throwaway build under build/).
cpu-engine-check: $(VENV)/.made
	rm -rf build/cpu-engine-check
	CFLAGS=-Werror $(PY) setup.py -q build_ext --build-temp build/cpu-engine-check \
		--build-lib build/cpu-engine-check

# The sdist and the wheel built from a fresh clone of HEAD, checked, and tests run from the
# unpacked sdist (slow: two builds and a test run; not part of `make test`).
package-check: $(VENV)/.installed-dev
	$(PY) scripts/check_package.py

clean:
	rm -rf $(DEMO_OUT) .pytest_cache .mypy_cache .ruff_cache build dist *.egg-info
