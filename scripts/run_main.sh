#!/usr/bin/env bash
# The main job: compact stories260K's KV cache on 20 TinyStories documents with Attention Matching
# and the three baselines, at five keep ratios, and print the quality cost (delta NLL, nats/token).
set -euo pipefail
cd "$(dirname "$0")/.."
shared="$(bash scripts/shared_dir.sh)"
mkdir -p results
./build/kvcompact compact-eval \
  --model "$shared/models/stories260K/stories260K.bin" \
  --data "$shared/data/tinystories/tinystories_val_head.txt" \
  --docs 20 --ratios 0.05,0.1,0.2,0.5,1 --methods am,random,recent,attn-nofit \
  --context-frac 0.6 --csv results/compact_eval.csv "$@"
