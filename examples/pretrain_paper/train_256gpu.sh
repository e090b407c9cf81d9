#!/usr/bin/env bash
# CLEAR pre-training as in the paper (Wu et al. 2020, §4.1): RoBERTa-base, 500K updates,
# 8,192 sequences per update (RoBERTa's blocks of up to 512 tokens: --sample-break-mode complete),
# peak lr 6e-4 after 24K warm-up updates then linear decay,
# Adam (0.9, 0.98), eps 1e-6, weight decay 0.01, dropout 0.1 everywhere, fp16, 256 GPUs.
#
# Sentences per update = per-GPU batch x update-freq x GPUs
#                      = 32            x 1           x 256 (32 nodes x 8) = 8,192.
# update-freq stays 1 so that the contrastive candidate set is the whole 8,192-sentence
# batch (negatives are all-gathered across ranks); on smaller clusters raise --batch-size
# before --update-freq, since each accumulation step is its own contrastive problem.
#
# Launch on every node (torchrun), e.g. with NODE_RANK=0..31 and MASTER_ADDR of node 0:
#   NNODES=32 NODE_RANK=$i MASTER_ADDR=host0 bash train_256gpu.sh /data/bookwiki-bin
# or under SLURM with slurm.sbatch (fairseq reads SLURM's variables itself).
set -euo pipefail
DATA=${1:?usage: train_256gpu.sh DATA_BIN [extra fairseq-train options]}
shift
AUG=${AUG:-del-word}                 # Table 1/2 rows: del-word, del-span, subs,del-span, del-span,reorder ...
SAVE=${SAVE:-checkpoints/clear-${AUG//,/+}}
NNODES=${NNODES:-32}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
USER_DIR=$(clear-user-dir 2>/dev/null || echo fairseq_clear)

exec torchrun --nnodes "$NNODES" --nproc_per_node "$GPUS_PER_NODE" --node_rank "${NODE_RANK:-0}" \
  --master_addr "${MASTER_ADDR:-127.0.0.1}" --master_port "${MASTER_PORT:-29500}" \
  "$(which fairseq-train)" "$DATA" \
  --user-dir "$USER_DIR" \
  --task clear --criterion clear --arch clear_roberta_base \
  --augmentations "$AUG" \
  --sample-break-mode complete --tokens-per-sample 512 \
  --mask-prob 0.15 --leave-unmasked-prob 0.1 --random-token-prob 0.1 \
  --cl-weight 1.0 --gather-negatives on \
  --batch-size 32 --update-freq 1 \
  --optimizer adam --adam-betas '(0.9,0.98)' --adam-eps 1e-6 --weight-decay 0.01 --clip-norm 0.0 \
  --lr 6e-4 --lr-scheduler polynomial_decay --warmup-updates 24000 --total-num-update 500000 \
  --max-update 500000 \
  --dropout 0.1 --attention-dropout 0.1 \
  --fp16 --fp16-init-scale 128 \
  --ddp-backend pytorch_ddp --distributed-backend nccl \
  --save-dir "$SAVE" --save-interval-updates 5000 --keep-interval-updates 5 --no-epoch-checkpoints \
  --log-format simple --log-interval 100 \
  --skip-invalid-size-inputs-valid-test \
  "$@"
