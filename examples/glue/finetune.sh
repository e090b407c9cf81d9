#!/usr/bin/env bash
# Fine-tune a CLEAR checkpoint on a GLUE task with fairseq's own
# sentence_prediction task and criterion: the paper's setting (one added
# classification layer, the whole model fine-tuned, RoBERTa's fine-tuning
# hyper-parameters), with fairseq's per-task settings of
# examples/roberta/README.glue.md.
#
#   examples/glue/finetune.sh TASK CHECKPOINT [extra fairseq-train options]
#
# Environment:
#   DATA_BIN   the task's binarized data (default: glue-bin/TASK-bin, from prepare.sh)
#   SAVE_DIR   where checkpoints and train.log go (default: checkpoints/glue/TASK)
#   CPU=1      the CPU-sized variant: --cpu, no fp16, 3 epochs, updates recomputed
#   MAX_EPOCH, MAX_SENTENCES   override README's 10 epochs / per-task batch size
#                              (the polynomial schedule is then recomputed, 6% warm-up)
#   SEED       random seed (default: 1)
#
# The projection head of the pre-trained model is not part of the fine-tuned
# model (sentence_prediction is not a contrastive task): it is dropped on load.
# Dev metrics are GLUE's (accuracy; MRPC/QQP accuracy+F1 mean; STS-B
# Pearson+Spearman mean; CoLA Matthews), logged by fairseq at every epoch and
# summarised at the end (best validation).
set -euo pipefail

if [[ $# -lt 2 ]]; then
  sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'
  exit 1
fi
TASK=$1; CHECKPOINT=$2; shift 2
# a path starting with "-" would be read as an option by model-args and fairseq-train
case "$CHECKPOINT" in -*) CHECKPOINT=./$CHECKPOINT ;; esac
PYTHON=${PYTHON:-python}
DATA_BIN=${DATA_BIN:-glue-bin/$TASK-bin}
SAVE_DIR=${SAVE_DIR:-checkpoints/glue/$TASK}
SEED=${SEED:-1}
[[ -f "$CHECKPOINT" ]] || { echo "error: checkpoint '$CHECKPOINT' does not exist" >&2; exit 1; }
[[ -d "$DATA_BIN/input0" ]] || { echo "error: no '$DATA_BIN/input0': run examples/glue/prepare.sh (or set DATA_BIN)" >&2; exit 1; }

SETTINGS_ARGS=()
[[ "${CPU:-0}" == "1" ]] && SETTINGS_ARGS+=(--cpu)
[[ -n "${MAX_EPOCH:-}" ]] && SETTINGS_ARGS+=(--max-epoch "$MAX_EPOCH")
[[ -n "${MAX_SENTENCES:-}" ]] && SETTINGS_ARGS+=(--batch-size "$MAX_SENTENCES")
# NUM_CLASSES LR MAX_SENTENCES MAX_EPOCH TOTAL_NUM_UPDATES WARMUP_UPDATES BEST_METRIC MAXIMIZE CRITERION_ARGS
# VALID_SUBSETS (MNLI: valid,valid1 = matched, mismatched)
eval "$("$PYTHON" -m fairseq_clear.cli.glue settings "$TASK" "$DATA_BIN" ${SETTINGS_ARGS[@]+"${SETTINGS_ARGS[@]}"})"
# the encoder's shape and positions must match the checkpoint's
MODEL_ARGS_TEXT=$("$PYTHON" -m fairseq_clear.cli.glue model-args "$CHECKPOINT")
mapfile -t MODEL_ARGS < <(printf '%s' "$MODEL_ARGS_TEXT")  # one argument per line, never word-split
USER_DIR=$("$PYTHON" -c "import fairseq_clear.cli.user_dir as u; print(u.path())")

if [[ "${CPU:-0}" == "1" ]]; then
  DEVICE_ARGS=(--cpu --num-workers 0)
else
  DEVICE_ARGS=(--fp16 --fp16-init-scale 4 --threshold-loss-scale 1 --fp16-scale-window 128)
fi

mkdir -p "$SAVE_DIR"
echo "fine-tuning $TASK: lr $LR, batch $MAX_SENTENCES, $MAX_EPOCH epochs, $TOTAL_NUM_UPDATES updates ($WARMUP_UPDATES warm-up), best checkpoint by $BEST_METRIC"
# shellcheck disable=SC2086  # MAXIMIZE and CRITERION_ARGS are word lists of our own settings
fairseq-train "$DATA_BIN" \
  --user-dir "$USER_DIR" \
  --restore-file "$CHECKPOINT" \
  --reset-optimizer --reset-dataloader --reset-meters --reset-lr-scheduler \
  --task sentence_prediction --num-classes "$NUM_CLASSES" \
  --init-token 0 --separator-token 2 --shorten-method truncate \
  "${MODEL_ARGS[@]}" \
  --batch-size "$MAX_SENTENCES" --max-tokens 4400 --required-batch-size-multiple 1 \
  --criterion sentence_prediction $CRITERION_ARGS \
  --dropout 0.1 --attention-dropout 0.1 \
  --weight-decay 0.1 --optimizer adam --adam-betas "(0.9, 0.98)" --adam-eps 1e-06 \
  --clip-norm 0.0 \
  --lr-scheduler polynomial_decay --lr "$LR" \
  --total-num-update "$TOTAL_NUM_UPDATES" --warmup-updates "$WARMUP_UPDATES" \
  --max-epoch "$MAX_EPOCH" \
  --find-unused-parameters \
  --valid-subset "$VALID_SUBSETS" \
  --best-checkpoint-metric "$BEST_METRIC" $MAXIMIZE \
  --save-dir "$SAVE_DIR" --no-epoch-checkpoints --seed "$SEED" \
  --log-format json --log-interval 10 \
  "${DEVICE_ARGS[@]}" \
  "$@" 2>&1 | tee "$SAVE_DIR/train.log"

"$PYTHON" -m fairseq_clear.cli.glue summarize "$SAVE_DIR/train.log" "$TASK" --json "$SAVE_DIR/dev_metrics.json"
