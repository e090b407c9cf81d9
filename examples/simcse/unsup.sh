#!/usr/bin/env bash
# Unsupervised SimCSE (Gao et al. 2021; seed 004 §4.1) with --task clear: both
# views are the sentence itself (--augmentations none), so dropout is the only
# noise; the contrastive loss alone (--mlm off, the mode's default), SimCSE's loss form, τ = 0.05, a
# dense+tanh head over [CLS] used in training only (embed() never applies it).
#
#   examples/simcse/unsup.sh DATA_BIN INIT_CHECKPOINT [extra fairseq-train options]
#
# DATA_BIN         one sentence per line (SimCSE: wiki1m_for_simcse.txt through
#                  clear-prepare --input-format lines --documents lines)
# INIT_CHECKPOINT  the pre-trained encoder (SimCSE starts from BERT/RoBERTa)
#
# Environment:
#   SAVE_DIR  (default: checkpoints/simcse-unsup)     SEED (default: 1)
#   LR        learning rate (default: the papers' continued-training value, else the one below)
#   CPU       1: CPU-sized (batch 64; from scratch: mean pooling, lr 5e-4); default: 1 without a CUDA device
#   EPOCHS    passes over DATA_BIN's sentences (default: SimCSE's 1): --max-update and the schedule
#             come from the corpus size; MAX_UPDATE sets the number of updates instead
#   STS_DEV   STS-B's sts-dev.csv (or your own pairs in its format): score the start and every
#             checkpoint interval, keep the best (the start included) as checkpoint_best.pt
#   KEEP      interval checkpoints kept beside checkpoint_best.pt and checkpoint_last.pt (default: 0);
#             the disk they take is stated, and checked, before training
#
# SimCSE (unsup RoBERTa-base): 1 epoch over 10^6 Wikipedia sentences, batch 512,
# lr 1e-5 (BERT-base: batch 64, lr 3e-5), max length 32, τ = 0.05, linear decay,
# no warm-up. Seed 004 (BERT-base, CS224N): lr 1e-5, τ 0.05, batch 16 (32, 64).
set -euo pipefail
if [[ $# -lt 2 ]]; then awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 1; fi
DATA=$1; INIT=$2; shift 2
# a path starting with "-" would be read as an option by the tools below
case "$DATA" in -*) DATA=./$DATA ;; esac
case "$INIT" in -*) INIT=./$INIT ;; esac
[[ -f "$INIT" ]] || { echo "error: checkpoint '$INIT' does not exist" >&2; exit 1; }
SAVE_DIR=${SAVE_DIR:-checkpoints/simcse-unsup}
USER_DIR=$(clear-user-dir 2>/dev/null || echo fairseq_clear)
# shellcheck source=../common.sh  # CPU (detected), WORKERS, CPU_FLAG, train_logged
source "$(cd "$(dirname "$0")/.." && pwd)/common.sh"
# the encoder's arch, sizes and positions are the checkpoint's
# a refusal (its error: line is on stderr) stops the recipe: set -e does not see a failure
# inside "<<< $(...)", so the flags are captured first
MODEL_ARGS_TEXT=$(python -m fairseq_clear.cli.glue model-args "$INIT")
mapfile -t MODEL_ARGS < <(printf '%s' "$MODEL_ARGS_TEXT")  # one argument per line, never word-split
if [[ "$CPU" == "1" ]]; then
  # a 2-layer model's [CLS] carries little: mean pooling, and a higher lr
  SETTINGS=(--batch-size 64 --lr 5e-4 --sentence-pooling mean --cpu --num-workers "$WORKERS")
else
  SETTINGS=(--batch-size 512 --lr 1e-5 --num-workers "$WORKERS")
fi
# continuing a pre-trained model: the papers' continued-training values (lr, τ, warm-up, batch) and
# the model's own pooling, after the settings above and before yours (yours win); STS_DEV keeps the
# best; --max-update, the schedule and the log interval from the corpus size and EPOCHS
CONT=$(python -m fairseq_clear.continued simcse-unsup "$INIT" ${CPU_FLAG[@]+"${CPU_FLAG[@]}"} \
  --data "$DATA" --recipe-options "${SETTINGS[*]}" ${STS_DEV:+--sts-dev "$STS_DEV"} --save-dir "$SAVE_DIR" -- "$@") || exit 1
mapfile -t CONTINUED < <(printf '%s' "$CONT")  # one argument per line, never word-split
mkdir -p "$SAVE_DIR"
train_logged "$SAVE_DIR/train.log" "$DATA" --user-dir "$USER_DIR" \
  --task clear --augmentations none --mlm off --tokens-per-sample 32 \
  --criterion clear --loss-form simcse --temperature 0.05 \
  --sentence-pooling cls --projection-layers 1 --projection-output-activation-fn tanh \
  --finetune-from-model "$INIT" "${MODEL_ARGS[@]}" \
  --optimizer adam --adam-betas '(0.9,0.999)' --adam-eps 1e-8 --weight-decay 0.0 \
  --lr-scheduler polynomial_decay --warmup-updates 0 \
  --seed "${SEED:-1}" --save-dir "$SAVE_DIR" --no-epoch-checkpoints \
  "${SETTINGS[@]}" ${CONTINUED[@]+"${CONTINUED[@]}"} ${LR:+--lr "$LR"} "$@"
drop_interval_checkpoints "$SAVE_DIR" "$@"  # KEEP=0: checkpoint_best.pt and checkpoint_last.pt alone
