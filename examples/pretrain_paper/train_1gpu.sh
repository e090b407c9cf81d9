#!/usr/bin/env bash
# §4.1's recipe (train_256gpu.sh) with the paper's 8,192-sentence contrastive candidate set on
# ONE GPU: 64 sentences x --update-freq 128 = 8,192, one contrastive problem per update
# (--accumulate-contrastive); no other rank to gather from (--gather-negatives auto).
# 128 micro-batches per update: expect about 1/256 of the 256-GPU run's update rate.
# Memory, estimated (benchmarks/studies/estimate_memory.py, no GPU measured yet): about 42 GiB in fp16;
# on a smaller card append --contrastive-chunk-size 32 --mlm-chunk-size 32 (about 10 GiB).
#   bash train_1gpu.sh /data/bookwiki-bin
set -euo pipefail
DATA=${1:?usage: train_1gpu.sh DATA_BIN [extra fairseq-train options]}
shift
NNODES=1 GPUS_PER_NODE=1 exec bash "$(dirname "$0")/train_256gpu.sh" "$DATA" \
  --batch-size 64 --update-freq 128 --accumulate-contrastive --gather-negatives auto "$@"
