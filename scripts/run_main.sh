#!/usr/bin/env bash
# The main job: compact the KV cache of a real instruct model, SmolLM2-135M-Instruct (Q4_1 GGUF,
# fetched by scripts/fetch_models.sh), on 5 WikiText-2 test articles (1024-token contexts, the
# next 256 tokens scored) with Attention Matching and the eviction baselines at four keep ratios,
# and print the quality cost (delta NLL, nats/token, mean and SEM over the articles).
# Usage: bash scripts/run_main.sh [extra compact-eval options]
set -euo pipefail
cd "$(dirname "$0")/.."
shared="$(bash scripts/shared_dir.sh)"
models="${KVC_MODELS:-$PWD/models}"
model="$models/SmolLM2-135M-Instruct.Q4_1.gguf"
[ -f "$model" ] || bash scripts/fetch_models.sh SmolLM2-135M-Instruct.Q4_1.gguf
mkdir -p results
./build/kvcompact compact-eval \
  --model "$model" \
  --data "$shared/data/wikitext2/wiki.test.raw" --split wikitext \
  --docs 5 --context-tokens 1024 --continuation-tokens 256 \
  --ratios 0.05,0.1,0.2,0.5 --methods am,snapkv,streaming,random \
  --csv results/compact_eval.csv "$@"
