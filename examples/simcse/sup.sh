#!/usr/bin/env bash
# Supervised SimCSE (Gao et al. 2021; seed 004 §4.1, §6.3) with --task contrastive_pairs:
# each premise against its entailment (positive) and contradiction (hard negative),
# SimCSE's loss with the hard negatives in every anchor's candidate set, τ = 0.05.
#
#   examples/simcse/sup.sh PAIRS_BIN INIT_CHECKPOINT [extra fairseq-train options]
#
# PAIRS_BIN  from clear-prepare-pairs, e.g. (the model's data directory gives the
#            sentencepiece model and dict.txt):
#              clear-prepare-pairs --train nli_for_simcse.csv --data DATA_BIN --out nli-bin
#              clear-prepare-pairs --train snli_1.0_train.jsonl multinli_1.0_train.jsonl \
#                  --data DATA_BIN --out nli-bin          # contradiction = hard negative
#              clear-prepare-pairs --train quora_duplicate_questions.tsv --data DATA_BIN \
#                  --out quora-bin                         # seed 004: Quora duplicates
#            Without a hard_neg column (Quora, STS-B, SICK) the loss is SimCSE's without them.
#
# Environment:
#   SAVE_DIR  (default: checkpoints/simcse-sup)   HARD_NEGATIVE_WEIGHT (default: 0, SimCSE's)
#   LR        learning rate (default: the papers' continued-training value, else the one below)
#   CPU       1: CPU-sized (batch 64; from scratch: mean pooling, lr 5e-4); default: 1 without a CUDA device
#   EPOCHS    passes over PAIRS_BIN's pairs (default: SimCSE's 3): --max-update and the schedule come
#             from the rows clear-prepare-pairs wrote; MAX_UPDATE sets the number of updates instead
#   STS_DEV   STS-B's sts-dev.csv (or your own pairs in its format): the start scored, the best kept
#   KEEP      interval checkpoints kept beside checkpoint_best.pt and checkpoint_last.pt (default: 0)
#
# SimCSE (sup RoBERTa-base): 3 epochs, batch 512, lr 5e-5, max length 32, τ = 0.05,
# hard-negative log-weight 0, [CLS] with an MLP (kept at test: embed(head="projection")
# gives it; the default embed() gives [CLS] without it). Seed 004: lr 1e-5, batch 16,
# NLI for 3 epochs or Quora duplicates (label 1) as positives.
set -euo pipefail
if [[ $# -lt 2 ]]; then awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 1; fi
DATA=$1; INIT=$2; shift 2
# a path starting with "-" would be read as an option by the tools below
case "$DATA" in -*) DATA=./$DATA ;; esac
case "$INIT" in -*) INIT=./$INIT ;; esac
[[ -f "$INIT" ]] || { echo "error: checkpoint '$INIT' does not exist" >&2; exit 1; }
[[ -d "$DATA/sent0" ]] || { echo "error: '$DATA' has no sent0/: build it with clear-prepare-pairs" >&2; exit 1; }
SAVE_DIR=${SAVE_DIR:-checkpoints/simcse-sup}
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
  SETTINGS=(--batch-size 512 --lr 5e-5 --num-workers "$WORKERS")
fi
# continuing a pre-trained model: the papers' continued-training values (lr, τ, warm-up, batch) and
# the model's own pooling, after the settings above and before yours (yours win); STS_DEV keeps the
# best; --max-update, the schedule and the log interval from the number of pairs and EPOCHS
CONT=$(python -m fairseq_clear.continued simcse-sup "$INIT" ${CPU_FLAG[@]+"${CPU_FLAG[@]}"} \
  --data "$DATA" --recipe-options "${SETTINGS[*]}" ${STS_DEV:+--sts-dev "$STS_DEV"} --save-dir "$SAVE_DIR" -- "$@") || exit 1
mapfile -t CONTINUED < <(printf '%s' "$CONT")  # one argument per line, never word-split
mkdir -p "$SAVE_DIR"
train_logged "$SAVE_DIR/train.log" "$DATA" --user-dir "$USER_DIR" \
  --task contrastive_pairs --tokens-per-sample 32 \
  --criterion clear --loss-form simcse --temperature 0.05 \
  --hard-negative-weight "${HARD_NEGATIVE_WEIGHT:-0}" \
  --sentence-pooling cls --projection-layers 1 --projection-output-activation-fn tanh \
  --finetune-from-model "$INIT" "${MODEL_ARGS[@]}" \
  --optimizer adam --adam-betas '(0.9,0.999)' --adam-eps 1e-8 --weight-decay 0.0 \
  --lr-scheduler polynomial_decay --warmup-updates 0 \
  --seed "${SEED:-1}" --save-dir "$SAVE_DIR" --no-epoch-checkpoints \
  "${SETTINGS[@]}" ${CONTINUED[@]+"${CONTINUED[@]}"} ${LR:+--lr "$LR"} "$@"
drop_interval_checkpoints "$SAVE_DIR" "$@"  # KEEP=0: checkpoint_best.pt and checkpoint_last.pt alone
