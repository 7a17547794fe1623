# The README's two commands, `make run` and `make test`; both set everything up first:
# uv (from PyPI, pinned) and the locked environment in .venv (uv.lock, all extras + dev group),
# compiled to bytecode once: every Snakemake job is a fresh interpreter, and where Python may not
# write its caches (PYTHONDONTWRITEBYTECODE, read-only installs) each one would otherwise compile
# torch, pandas and Matplotlib from source again (seconds of CPU per job).
UV_VERSION := 0.13.8
UV := python3 -m uv
UV_RUN := $(UV) run --locked --all-extras

.PHONY: setup run test lint

setup:
	@$(UV) --version >/dev/null 2>&1 || python3 -m pip install --quiet "uv==$(UV_VERSION)"
	$(UV) sync --locked --all-extras --compile-bytecode
	$(UV) run --locked --all-extras python -m compileall -q src

run: setup
	$(UV_RUN) snakemake --cores 8

test: setup
	$(UV_RUN) pytest

lint: setup
	$(UV_RUN) ruff check src tests benchmarks workflow/scripts
	$(UV_RUN) ruff format --check src tests benchmarks workflow/scripts
	$(UV_RUN) snakefmt --check Snakefile rules
	$(UV_RUN) snakemake --lint
