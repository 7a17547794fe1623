# The two commands of the README. Both set everything up first (uv, the locked environment).
UV_VERSION := 0.13.8
UV := uv

.PHONY: setup run test lint

setup:
	@command -v $(UV) >/dev/null 2>&1 || python3 -m pip install --quiet "uv==$(UV_VERSION)"
	$(UV) sync --locked --all-extras

run: setup
	$(UV) run --locked --all-extras snakemake --cores 8

test: setup
	$(UV) run --locked --all-extras pytest

lint: setup
	$(UV) run --locked --all-extras ruff check src tests benchmarks workflow/scripts
	$(UV) run --locked --all-extras ruff format --check src tests benchmarks workflow/scripts
	$(UV) run --locked --all-extras snakefmt --check Snakefile rules
	$(UV) run --locked --all-extras snakemake --lint
