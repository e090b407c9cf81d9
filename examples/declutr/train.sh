#!/usr/bin/env bash
# DeCLUTR (Giorgi et al. 2021) with --task declutr: continued pre-training of a
# masked LM with span-based NT-Xent plus MLM on the anchor spans.
#
#   examples/declutr/train.sh DATA_BIN [INIT_CHECKPOINT] [extra fairseq-train options]
#
# DATA_BIN         binarized documents: runs of lines separated by empty lines
#                  (clear-prepare keeps them; WikiText: --input-format wikitext).
#                  Documents shorter than 2·A·ℓmax tokens are skipped and counted.
# INIT_CHECKPOINT  the pre-trained model to continue from (the paper: RoBERTa-base /
#                  DistilRoBERTa), trained with the same dict.txt; its projection
#                  head, if any, is dropped (logged). "-" or omitted: from scratch.
#
# Environment:
#   SAVE_DIR    checkpoints and train.log (default: checkpoints/declutr)
#   CPU         1: the CPU-sized variant: clear_roberta_tiny, spans of 8-64 tokens, 8 documents
#               per batch; default: 1 without a CUDA device (CPU=0 forces the GPU settings)
#   EPOCHS      passes over the documents DeCLUTR can sample (default: the paper's 1): --max-update
#               and the schedule come from DATA_BIN; MAX_UPDATE sets the number of updates instead
#   STS_DEV     STS-B's sts-dev.csv (or your own pairs): the start scored, the best kept
#   KEEP        interval checkpoints kept beside checkpoint_best.pt and checkpoint_last.pt (default: 0)
#   ARCH        model when training from scratch (default: clear_roberta_base; with
#               INIT_CHECKPOINT the checkpoint's arch, sizes and positions are used)
#   SEED        random seed (default: 1)
#   LR          learning rate (default: DeCLUTR's continued-training value, else the one below)
#
# Paper (§3, §4.1): A = 2 anchors per document, P = 2 positives per anchor,
# ℓmin = 32, ℓmax = 512, anchor lengths ~ Beta(4,2), positives ~ Beta(2,4), mean
# pooling, no projection head, τ = 0.05, L = L_contrastive + L_MLM; 1 epoch over
# 495,243 documents of >= 2,048 tokens, 16 documents per batch, AdamW lr 5e-5,
# weight decay 0.1, slanted triangular schedule (cut fraction 0.1; here: linear
# warm-up over the first 10% of updates, then linear decay), gradients clipped
# to norm 1.0. Spans are counted in sentencepiece pieces and cut to
# --tokens-per-sample − 2 = 510 (DeCLUTR counts words and its tokenizer cuts to 512).
set -euo pipefail

if [[ $# -lt 1 ]]; then
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
  exit 1
fi
DATA=$1; shift
case "$DATA" in -*) DATA=./$DATA ;; esac  # else read as an option by fairseq-train
INIT=-
if [[ $# -gt 0 && "$1" != -* ]]; then INIT=$1; shift; fi
[[ "$INIT" == "-" || -f "$INIT" ]] || { echo "error: checkpoint '$INIT' does not exist" >&2; exit 1; }
[[ -f "$DATA/dict.txt" ]] || { echo "error: '$DATA' has no dict.txt (binarize it with clear-prepare)" >&2; exit 1; }
SAVE_DIR=${SAVE_DIR:-checkpoints/declutr}
SEED=${SEED:-1}
USER_DIR=$(clear-user-dir 2>/dev/null || echo fairseq_clear)
# shellcheck source=../common.sh  # CPU (detected), WORKERS, CPU_FLAG, train_logged
source "$(cd "$(dirname "$0")/.." && pwd)/common.sh"

if [[ "$CPU" == "1" ]]; then
  ARCH=${ARCH:-clear_roberta_tiny}
  SETTINGS=(--arch "$ARCH" --tokens-per-sample 128 --min-span-length 8 --max-span-length 64
            --batch-size 8 --lr 5e-4 --cpu --num-workers "$WORKERS")
else
  ARCH=${ARCH:-clear_roberta_base}
  SETTINGS=(--arch "$ARCH" --tokens-per-sample 512 --min-span-length 32 --max-span-length 512
            --batch-size 16 --lr 5e-5 --num-workers "$WORKERS")
fi
INIT_ARGS=()
if [[ "$INIT" != "-" ]]; then
  # the encoder's arch, sizes and positions are the checkpoint's (they override ARCH)
  # a refusal (its error: line is on stderr) stops the recipe: set -e does not see a failure
  # inside "<<< $(...)", so the flags are captured first
  MODEL_ARGS_TEXT=$(python -m fairseq_clear.cli.glue model-args "$INIT")
  mapfile -t MODEL_ARGS < <(printf '%s' "$MODEL_ARGS_TEXT")  # one argument per line, never word-split
  INIT_ARGS=(--finetune-from-model "$INIT" "${MODEL_ARGS[@]}")
fi
# a pre-trained model: DeCLUTR's continued-training values and the model's own pooling (yours win);
# any model: --max-update, the schedule (warm-up over the first 10%) and the log interval from the
# documents of DATA_BIN DeCLUTR can sample and EPOCHS
CONT=$(python -m fairseq_clear.continued declutr "$INIT" ${CPU_FLAG[@]+"${CPU_FLAG[@]}"} --warmup-ratio 0.1 \
  --data "$DATA" --recipe-options "${SETTINGS[*]} --num-anchors 2" ${STS_DEV:+--sts-dev "$STS_DEV"} --save-dir "$SAVE_DIR" -- "$@") || exit 1
mapfile -t CONTINUED < <(printf '%s' "$CONT")  # one argument per line, never word-split
INIT_ARGS+=(${CONTINUED[@]+"${CONTINUED[@]}"})

mkdir -p "$SAVE_DIR"
train_logged "$SAVE_DIR/train.log" "$DATA" --user-dir "$USER_DIR" \
  --task declutr --criterion clear \
  --num-anchors 2 --num-positives 2 \
  --anchor-length-beta 4,2 --positive-length-beta 2,4 \
  --sentence-pooling mean --projection-layers 0 \
  --temperature 0.05 --loss-form nt-xent --cl-weight 1.0 \
  --mask-prob 0.15 --leave-unmasked-prob 0.1 --random-token-prob 0.1 \
  --optimizer adam --adam-betas '(0.9,0.999)' --adam-eps 1e-6 --weight-decay 0.1 --clip-norm 1.0 \
  --lr-scheduler polynomial_decay \
  --seed "$SEED" --save-dir "$SAVE_DIR" --no-epoch-checkpoints \
  "${SETTINGS[@]}" ${INIT_ARGS[@]+"${INIT_ARGS[@]}"} ${LR:+--lr "$LR"} "$@"
drop_interval_checkpoints "$SAVE_DIR" "$@"  # KEEP=0: checkpoint_best.pt and checkpoint_last.pt alone
