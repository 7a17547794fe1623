#!/usr/bin/env bash
# Download the wheels the GPU machine lacks (benchmarks/gpu/device-wheels.txt) into .whl/ for
# its Python 3.12 (x86-64, manylinux), so that benchmarks/gpu/run.sh installs them there
# without network access (pip install --no-index --no-deps, docs/gpu.md). Packages published
# only as source (pure Python) are built into wheels here. Run it in the checkout on a machine
# where the package registry is reachable, then copy .whl/ (git-ignored, about 31 MB) with
# the checkout to the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .whl && mkdir .whl
grep -v '^#' benchmarks/gpu/device-wheels.txt | while read -r spec; do
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d .whl "$spec" 2>/dev/null \
        || python3 -m pip wheel -q --no-deps -w .whl "$spec"
done
du -sh .whl
