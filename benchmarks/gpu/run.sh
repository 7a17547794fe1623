#!/usr/bin/env bash
# One GPU measurement in one device call (docs/gpu.md): install the carried wheels (.whl/, from
# benchmarks/gpu/fetch_wheels.sh), run the measurement under a time guard, and copy what it
# wrote into $OUT, also when it is cut short (a trap on exit):
#
#   bash benchmarks/gpu/run.sh <measurement>                # on the GPU machine, carry .whl
#   PRINT_ONLY=1 bash benchmarks/gpu/run.sh <measurement>   # print the commands, run nothing
#
# Measurements (each sized for a session's 15 device minutes; BUDGET=<s> overrides the guard):
#   audit-gpt2-large  the scale audit of gpt2-large-random, every block (goal: 3 minutes)
#   audit-7b          the scale audit of llama-7b-random, every block (goal: 8 minutes)
#   extract-gpt2-large, extract-7b   the extraction alone (every block, context ranks)
#   context-ranks     bench_context_rank_device.py: solves on the GPU vs on the host (~1 min)
#   profile-extract   profile_extract.py: where a GPT-2-large extraction's time goes (~1 min)
#   kruskal           bench_kruskal_device.py: device vs host search, d = 1,280, T = 2,000,
#                     and a torch.profiler table of one device search
#   grid              paper_a_grid.py on configs/paper.yaml (bf16, compiled)
#   sweep             gpu_sweeps.py: paper B's sweeps of configs/paper.yaml, end to end
# Environment: OUT (default benchmarks/gpu/out), COMMIT (the commit measured: the machine's
# copy of the tree has no git), BUDGET (seconds before the measurement is stopped), PYTHON
# (python3), WHEELS (.whl).
set -uo pipefail
cd "$(dirname "$0")/../.."
MEASURE=${1:-}
OUT=${OUT:-benchmarks/gpu/out}
COMMIT=${COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
PY=${PYTHON:-python3}
WHEELS=${WHEELS:-.whl}
AUDIT="$PY benchmarks/gpu_scale_audit.py --run --cores 16 --commit $COMMIT"
AUDIT="$AUDIT --out $OUT/scale_audit.json"
case "$MEASURE" in
    audit-gpt2-large)
        BUDGET=${BUDGET:-330}
        COMMAND="$AUDIT --model gpt2-large-random --timeout $BUDGET" ;;
    audit-7b)
        BUDGET=${BUDGET:-540}
        COMMAND="$AUDIT --model llama-7b-random --timeout $BUDGET" ;;
    extract-gpt2-large|extract-7b)
        BUDGET=${BUDGET:-300}
        MODEL=$([ "$MEASURE" = extract-7b ] && echo llama-7b-random || echo gpt2-large-random)
        COMMAND="$AUDIT --model $MODEL --stage extract --timeout $BUDGET" ;;
    context-ranks)
        BUDGET=${BUDGET:-240}
        COMMAND="$PY benchmarks/bench_context_rank_device.py --device cuda --d 1280 --T 512"
        COMMAND="$COMMAND --out $OUT/bench_context_rank_device.json" ;;
    profile-extract)
        BUDGET=${BUDGET:-240}
        COMMAND="$PY benchmarks/profile_extract.py configs/scale.yaml --model gpt2-large-random"
        COMMAND="$COMMAND --T 512 --device cuda --out $OUT/profile_extract.json"
        COMMAND="$COMMAND --torch-profile $OUT/extract_ops.txt" ;;
    kruskal)
        BUDGET=${BUDGET:-300}
        COMMAND="$PY benchmarks/bench_kruskal_device.py --device cuda --d 1280 --T 2000"
        COMMAND="$COMMAND --samples 200 --repeats 1 --profile $OUT/kruskal_profile.txt"
        COMMAND="$COMMAND && cp benchmarks/results/"
        COMMAND="${COMMAND}bench_kruskal_device.json $OUT/" ;;
    grid)
        BUDGET=${BUDGET:-540}
        COMMAND="$PY benchmarks/paper_a_grid.py configs/paper.yaml --precision bf16 --compile"
        COMMAND="$COMMAND --max-steps 5000 --models-per-sweep 4 --commit $COMMIT"
        COMMAND="$COMMAND --out $OUT/paper_a_grid.json" ;;
    sweep)
        BUDGET=${BUDGET:-540}
        COMMAND="$PY benchmarks/gpu_sweeps.py resolve configs/paper.yaml $OUT/resolved.json"
        COMMAND="$COMMAND && $PY benchmarks/gpu_sweeps.py run $OUT/resolved.json"
        COMMAND="$COMMAND --aot heads head_dim embed_dim low_dim --out $OUT/gpu_sweeps.csv" ;;
    *)
        echo "usage: $0 audit-gpt2-large|audit-7b|extract-gpt2-large|extract-7b|" \
            "context-ranks|profile-extract|kruskal|grid|sweep" >&2
        exit 2 ;;
esac
INSTALL="$PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade"
INSTALL="$INSTALL --target /tmp/site $WHEELS/*.whl"
if [ -n "${PRINT_ONLY:-}" ]; then
    echo "install: $INSTALL"
    echo "measure ($BUDGET s): $COMMAND"
    exit 0
fi
if ! ls "$WHEELS"/*.whl >/dev/null 2>&1; then
    echo "no wheels in $WHEELS/: run benchmarks/gpu/fetch_wheels.sh here and carry .whl" >&2
    exit 2
fi
mkdir -p "$OUT"
# The audit merges into the JSON it finds: the committed one holds the models measured before.
[ -f benchmarks/gpu/scale_audit.json ] && cp benchmarks/gpu/scale_audit.json "$OUT/"
SAMPLER=""
collect() {  # whatever the measurement left, also after a timeout or a failure
    [ -n "$SAMPLER" ] && kill "$SAMPLER" 2>/dev/null
    tar -czf "$OUT/logs.tar.gz" logs benchmarks/results/*/*.tsv 2>/dev/null
    nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1
}
trap collect EXIT
$INSTALL || exit 1
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1
(while sleep 5; do  # GPU use and load over the run: is the GPU or the host the bound?
    echo "$(date +%s),$(nvidia-smi --query-gpu=utilization.gpu,memory.used \
        --format=csv,noheader,nounits 2>/dev/null | head -1),$(cut -d' ' -f1 /proc/loadavg)"
done >"$OUT/utilization.csv") &
SAMPLER=$!
echo "measure ($BUDGET s): $COMMAND"
# The audit stops its own workflow at BUDGET and still writes its JSON; the guard below is
# for the others, and 60 s later than BUDGET for the audit's own bookkeeping.
timeout --kill-after=20 $((BUDGET + 60)) bash -c "$COMMAND" 2>&1 | tee "$OUT/run.log"
