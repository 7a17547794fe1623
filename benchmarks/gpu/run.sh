#!/usr/bin/env bash
# GPU measurements on a machine without network access (docs/gpu.md): install the wheels
# brought in .whl/ (from benchmarks/gpu/fetch_wheels.sh), run each measurement under its own
# time guard, and leave in $OUT what they wrote, also when one is cut short (a trap on exit):
#
#   bash benchmarks/gpu/run.sh <measurement> [<measurement> ...]   # on the GPU machine
#   PRINT_ONLY=1 bash benchmarks/gpu/run.sh <measurement> ...      # print the commands only
#
# Measurements (default budget in seconds; BUDGET=<s> sets it for every one of the run,
# NAME=<s> for one: `grid=200 extract-7b=240`):
#   audit-gpt2-large  (330) the scale audit of gpt2-large-random, every block (goal: 3 minutes)
#   audit-7b          (540) the scale audit of llama-7b-random, every block (goal: 8 minutes)
#   extract-gpt2-large, extract-7b  (300) the extraction alone (every block, context ranks)
#   context-ranks     (240) bench_context_rank_device.py: solves on the host vs on the GPU
#   profile-extract   (240) profile_extract.py: a GPT-2-large extraction's stages, T = 512
#   kruskal           (300) bench_kruskal_device.py: device vs host search, d = 1,280,
#                     T = 2,000, and a torch.profiler table of one device search
#   grid              (240) paper_a_grid.py on configs/paper.yaml's batching (bf16, CUDA
#                     graphs, 5,000 steps a timed model, one timed model a context kind)
#   grid-eager        (240) paper_a_grid.py on configs/paper.yaml's engine as it is (float32,
#                     no graphs), 2,000 steps a timed model, two timed models a context kind
#   sweep             (540) gpu_sweeps.py: paper B's sweeps of configs/paper.yaml
#   paper-a-sweep     (540) gpu_sweeps.py: paper A's context_size sweep of configs/paper.yaml
#                     trained end to end (SWEEP=heads|head_dim for another), its capacities
#                     and laws in paper_a_sweep.json
# $OUT then holds each measurement's result files, logs.tar.gz (run logs, GPU use and load
# every 5 s, nvidia-smi) and after an audit workflow_logs.tar.gz (the workflow's logs and
# benchmark files). Environment: OUT (default benchmarks/gpu/out), COMMIT (the commit
# measured; default git's HEAD, `unknown` in a copy without .git), BUDGET, SWEEP, PYTHON
# (python3), WHEELS (.whl), SITE (/tmp/site, where the wheels are installed).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-benchmarks/gpu/out}
COMMIT=${COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
PY=${PYTHON:-python3}
WHEELS=${WHEELS:-.whl}
SITE=${SITE:-/tmp/site}  # where the wheels are installed
USAGE="usage: $0 MEASUREMENT... (audit-gpt2-large audit-7b extract-gpt2-large extract-7b"
USAGE="$USAGE context-ranks profile-extract kruskal grid grid-eager sweep paper-a-sweep)"

plan() {  # sets BUDGET_S and COMMAND for measurement $1 (name or name=seconds); fails on an unknown one
    local own=""
    if [[ $1 == *=* ]]; then own=${1#*=}; fi
    local budget=${own:-${BUDGET:-}}
    local audit="$PY benchmarks/gpu_scale_audit.py --run --cores 16 --commit $COMMIT"
    audit="$audit --out $OUT/scale_audit.json"
    local sweeps="$PY benchmarks/gpu_sweeps.py resolve configs/paper.yaml $OUT/resolved.json"
    sweeps="$sweeps && $PY benchmarks/gpu_sweeps.py run $OUT/resolved.json"
    case "${1%%=*}" in
        audit-gpt2-large)
            BUDGET_S=${budget:-330}
            COMMAND="$audit --model gpt2-large-random --timeout $BUDGET_S" ;;
        audit-7b)
            BUDGET_S=${budget:-540}
            COMMAND="$audit --model llama-7b-random --timeout $BUDGET_S" ;;
        extract-gpt2-large)
            BUDGET_S=${budget:-300}
            COMMAND="$audit --model gpt2-large-random --stage extract --timeout $BUDGET_S" ;;
        extract-7b)
            BUDGET_S=${budget:-300}
            COMMAND="$audit --model llama-7b-random --stage extract --timeout $BUDGET_S" ;;
        context-ranks)
            BUDGET_S=${budget:-240}
            COMMAND="$PY benchmarks/bench_context_rank_device.py --device cuda --d 1280"
            COMMAND="$COMMAND --T 512 --out $OUT/bench_context_rank_device.json" ;;
        profile-extract)
            BUDGET_S=${budget:-240}
            COMMAND="$PY benchmarks/profile_extract.py configs/scale.yaml --T 512"
            COMMAND="$COMMAND --model gpt2-large-random --device cuda"
            COMMAND="$COMMAND --out $OUT/profile_extract.json --torch-profile $OUT/extract_ops.txt" ;;
        kruskal)
            BUDGET_S=${budget:-300}
            COMMAND="$PY benchmarks/bench_kruskal_device.py --device cuda --d 1280 --T 2000"
            COMMAND="$COMMAND --samples 200 --repeats 1 --profile $OUT/kruskal_profile.txt"
            COMMAND="$COMMAND && cp benchmarks/results/bench_kruskal_device.json $OUT/" ;;
        grid)
            BUDGET_S=${budget:-240}
            COMMAND="$PY benchmarks/paper_a_grid.py configs/paper.yaml --precision bf16"
            COMMAND="$COMMAND --cuda-graph --models-per-sweep 1 --max-steps 5000"
            COMMAND="$COMMAND --profile-steps 500"
            COMMAND="$COMMAND --commit $COMMIT --out $OUT/paper_a_grid.json" ;;
        grid-eager)
            BUDGET_S=${budget:-240}
            COMMAND="$PY benchmarks/paper_a_grid.py configs/paper.yaml --models-per-sweep 2"
            COMMAND="$COMMAND --max-steps 2000 --profile-steps 200"
            COMMAND="$COMMAND --commit $COMMIT --out $OUT/paper_a_grid_eager.json" ;;
        sweep)
            BUDGET_S=${budget:-540}
            COMMAND="$sweeps --aot heads head_dim embed_dim low_dim --out $OUT/gpu_sweeps.csv" ;;
        paper-a-sweep)
            BUDGET_S=${budget:-540}
            COMMAND="$sweeps --synthetic ${SWEEP:-context_size} --commit $COMMIT"
            COMMAND="$COMMAND --json $OUT/paper_a_sweep.json --out $OUT/paper_a_sweep.csv" ;;
        *)
            return 1 ;;
    esac
}

[ $# -gt 0 ] || { echo "$USAGE" >&2; exit 2; }
for measurement in "$@"; do
    plan "$measurement" || { echo "unknown measurement '$measurement'; $USAGE" >&2; exit 2; }
done
INSTALL="$PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade"
INSTALL="$INSTALL --target $SITE $WHEELS/*.whl"
if [ -n "${PRINT_ONLY:-}" ]; then
    echo "install: $INSTALL"
    for measurement in "$@"; do
        plan "$measurement"
        echo "$measurement ($BUDGET_S s): $COMMAND"
    done
    exit 0
fi
if ! ls "$WHEELS"/*.whl >/dev/null 2>&1; then
    echo "no wheels in $WHEELS/: fill it with benchmarks/gpu/fetch_wheels.sh where the" \
        "package registry is reachable and copy it here" >&2
    exit 2
fi
mkdir -p "$OUT"
RUNLOGS=$(mktemp -d)
# The audit merges into the JSON it finds: the committed one holds the models measured before.
if [ -f benchmarks/gpu/scale_audit.json ]; then cp benchmarks/gpu/scale_audit.json "$OUT/"; fi
SAMPLER=""
collect() {  # whatever the measurements left, also after a timeout or a failure
    if [ -n "$SAMPLER" ]; then kill "$SAMPLER" 2>/dev/null; fi
    nvidia-smi >"$RUNLOGS/nvidia-smi.txt" 2>&1
    tar -czf "$OUT/logs.tar.gz" -C "$RUNLOGS" . 2>/dev/null
    if [ -d logs ]; then
        tar -czf "$OUT/workflow_logs.tar.gz" logs benchmarks/results/*/*.tsv 2>/dev/null
    fi
}
trap collect EXIT
$INSTALL || exit 1
export PYTHONPATH=$SITE:src PYTHONUNBUFFERED=1
(while sleep 5; do  # GPU use and load over the run: is the GPU or the host the bound?
    echo "$(date +%s),$(nvidia-smi --query-gpu=utilization.gpu,memory.used \
        --format=csv,noheader,nounits 2>/dev/null | head -1),$(cut -d' ' -f1 /proc/loadavg)"
done >"$RUNLOGS/utilization.csv") &
SAMPLER=$!
STATUS=0
for measurement in "$@"; do
    plan "$measurement"
    echo "$measurement ($BUDGET_S s): $COMMAND" | tee -a "$RUNLOGS/run.log"
    # The audit stops its own workflow at the budget and still writes its JSON; this guard,
    # 60 s later, is for the others and for the audit's bookkeeping.
    timeout --kill-after=20 $((BUDGET_S + 60)) bash -c "$COMMAND" 2>&1 \
        | tee "$RUNLOGS/$measurement.log" || STATUS=1
done
exit $STATUS
