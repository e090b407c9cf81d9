#!/usr/bin/env bash
# §4.1's recipe (train_256gpu.sh) with the paper's 8,192-sentence contrastive candidate set on
# ONE node of 8 GPUs: 64 sentences x --update-freq 16 x 8 GPUs = 8,192, and
# --accumulate-contrastive makes the 16 micro-batches of an update one contrastive problem
# (their views held without graph, re-encoded in the backward of the loss, computed once).
# Several ranks need --ddp-backend legacy_ddp. Every other option is train_256gpu.sh's.
#   bash train_8gpu.sh /data/bookwiki-bin
set -euo pipefail
DATA=${1:?usage: train_8gpu.sh DATA_BIN [extra fairseq-train options]}
shift
NNODES=1 GPUS_PER_NODE=8 exec bash "$(dirname "$0")/train_256gpu.sh" "$DATA" \
  --batch-size 64 --update-freq 16 --accumulate-contrastive --ddp-backend legacy_ddp "$@"
