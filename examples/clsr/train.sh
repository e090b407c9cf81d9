#!/usr/bin/env bash
# CLSR (seed 003, §3-4) with --task contrastive_pairs: a frozen pre-trained encoder,
# its mean-pooled sentence embedding through a trainable MLP e (one hidden layer,
# ReLU) and a linear projection h, trained with NT-Xent on labelled positive pairs
# (both directions; the other 2(m-1) sentences of the batch are negatives). e's
# output is the sentence representation: the hub's embed() and clear-eval-sts
# apply e by default.
#
#   examples/clsr/train.sh PAIRS_BIN INIT_CHECKPOINT [extra fairseq-train options]
#
# PAIRS_BIN  from clear-prepare-pairs with the encoder's data directory, e.g.
#              clear-prepare-pairs --train STS-B/train.tsv --valid STS-B/dev.tsv \
#                  --data DATA_BIN --out stsb-bin           # CLSR-STSB: score > 4
#              clear-prepare-pairs --train snli_1.0_train.jsonl multinli_1.0_train.jsonl \
#                  --no-hard-negatives --data DATA_BIN --out nli-bin   # CLSR-NLI: entailment
# INIT_CHECKPOINT  any trained fairseq-clear checkpoint (CLEAR, DeCLUTR, SimCSE, an
#                  MLM baseline); its encoder never changes (--freeze-encoder: no
#                  gradient, no dropout); heads of another shape are re-initialised.
#
# Environment:
#   SAVE_DIR  (default: checkpoints/clsr)    CPU    1: batch 128, 20 epochs; default: 1 without CUDA
#   EPOCHS    (default: the paper's 2,000)   E_DIM  e's hidden and output size, h's
#   BATCH     (default: the paper's 512)            output size (default: the encoder's)
#   POOLING   mean (paper, Table 4) or cls; default: a sentence-embedding model's own pooling, else mean
#   SEED      (default: 1)                   STS_DEV  STS-B's sts-dev.csv: the start scored, the best kept
#   KEEP      interval checkpoints kept beside checkpoint_best.pt and checkpoint_last.pt (default: 0)
#
#   OPTIMIZER adam (default, lr 1e-3) or sgd (momentum 0.9, lr 0.5)   LR  overrides
#
# Paper: MLP e with 1 hidden layer and a 768-d output, linear h of the same size,
# batch 512, 2,000 epochs, lr 0.5 with decay 1e-4, τ = 0.1, linear warm-up over
# 10 epochs then cosine decay without restarts (SimCLR's recipe, whose lr 0.5 is
# for LARS; see OPTIMIZER below).
set -euo pipefail
if [[ $# -lt 2 ]]; then awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 1; fi
DATA=$1; INIT=$2; shift 2
# a path starting with "-" would be read as an option by the tools below
case "$DATA" in -*) DATA=./$DATA ;; esac
case "$INIT" in -*) INIT=./$INIT ;; esac
[[ -f "$INIT" ]] || { echo "error: checkpoint '$INIT' does not exist" >&2; exit 1; }
[[ -f "$DATA/pairs.json" ]] || { echo "error: '$DATA' has no pairs.json: build it with clear-prepare-pairs" >&2; exit 1; }
SAVE_DIR=${SAVE_DIR:-checkpoints/clsr}
USER_DIR=$(clear-user-dir 2>/dev/null || echo fairseq_clear)
# shellcheck source=../common.sh  # CPU (detected), WORKERS, CPU_FLAG, train_logged
source "$(cd "$(dirname "$0")/.." && pwd)/common.sh"
# a refusal (its error: line is on stderr) stops the recipe: set -e does not see a failure
# inside "<<< $(...)", so the flags are captured first
MODEL_ARGS_TEXT=$(python -m fairseq_clear.cli.glue model-args "$INIT")
mapfile -t MODEL_ARGS < <(printf '%s' "$MODEL_ARGS_TEXT")  # one argument per line, never word-split
# e and h default to the encoder's width (768 for a base model, as in the paper)
E_DIM=${E_DIM:-$(printf '%s\n' "${MODEL_ARGS[@]}" | grep -A1 -- '--encoder-embed-dim' | tail -1)}
if [[ "$CPU" == "1" ]]; then
  EPOCHS=${EPOCHS:-20}; BATCH=${BATCH:-128}; DEVICE=(--cpu --num-workers "$WORKERS")
else
  EPOCHS=${EPOCHS:-2000}; BATCH=${BATCH:-512}; DEVICE=(--num-workers "$WORKERS")
fi
# an integer, checked: bash arithmetic would run a command substitution hidden in a string
ROWS=$(python -c "
import json, sys
n = json.load(open(sys.argv[1]))['splits']['train']['pairs_written']
if type(n) is not int or n < 1:
    sys.exit(f'error: {sys.argv[1]}: splits.train.pairs_written is {n!r}, not a positive integer')
print(n)" "$DATA/pairs.json")
PER_EPOCH=$(( (ROWS + BATCH - 1) / BATCH ))
MAX_UPDATE=$(( EPOCHS * PER_EPOCH ))
WARMUP=$(( 10 * PER_EPOCH ))
# The paper's lr 0.5 is for SimCLR's LARS, which scales each layer's step by its
# weight/gradient norm ratio. fairseq has no LARS, and plain SGD at 0.5 made e worse
# than no e at all in our CPU run (STS-B dev 34.9 vs 47.0 for the frozen encoder),
# so Adam at 1e-3 is the default (57.4). OPTIMIZER=sgd LR=0.5 runs the literal numbers.
case "${OPTIMIZER:-adam}" in
  adam) OPTIMIZER_ARGS=(--optimizer adam --adam-betas '(0.9,0.999)'); LR=${LR:-1e-3} ;;
  sgd)  OPTIMIZER_ARGS=(--optimizer sgd --momentum 0.9); LR=${LR:-0.5} ;;
  *) echo "error: OPTIMIZER must be adam or sgd, got '$OPTIMIZER'" >&2; exit 1 ;;
esac
echo "CLSR: $ROWS pairs, batch $BATCH, $PER_EPOCH updates/epoch, $EPOCHS epochs = $MAX_UPDATE updates"
# the model's own pooling (a sentence-embedding model's) unless POOLING, and STS_DEV (the start scored,
# the best kept). The papers' continued-training learning rates (1e-5 to 5e-5) keep a pre-trained
# encoder's weights from being destroyed; CLSR's encoder is frozen (no gradient) and only e and h
# train, from their initialisation, so the heads' own lr above (Adam 1e-3) holds.
POOL=(--sentence-pooling mean); MY_POOL=()
if [[ -n "${POOLING:-}" ]]; then POOL=(); MY_POOL=(--sentence-pooling "$POOLING"); fi
CONT=$(python -m fairseq_clear.continued clsr "$INIT" ${CPU_FLAG[@]+"${CPU_FLAG[@]}"} --max-update "$MAX_UPDATE" \
  ${STS_DEV:+--sts-dev "$STS_DEV"} --save-dir "$SAVE_DIR" -- ${MY_POOL[@]+"${MY_POOL[@]}"} "$@") || exit 1
mapfile -t CONTINUED < <(printf '%s' "$CONT")  # one argument per line, never word-split
LOG_INTERVAL=$PER_EPOCH
if [[ "$CPU" == "1" && "$PER_EPOCH" -gt 5 ]]; then LOG_INTERVAL=5; fi  # a line within seconds on a CPU
mkdir -p "$SAVE_DIR"
train_logged "$SAVE_DIR/train.log" "$DATA" --user-dir "$USER_DIR" \
  --task contrastive_pairs --hard-negatives off \
  --criterion clear --loss-form nt-xent --temperature 0.1 \
  --finetune-from-model "$INIT" "${MODEL_ARGS[@]}" --freeze-encoder \
  ${POOL[@]+"${POOL[@]}"} \
  --sentence-mlp-hidden-dim "$E_DIM" --sentence-mlp-dim "$E_DIM" \
  --projection-layers 1 --projection-dim "$E_DIM" \
  --batch-size "$BATCH" --required-batch-size-multiple 1 \
  "${OPTIMIZER_ARGS[@]}" --weight-decay 1e-4 \
  --lr "$LR" --lr-scheduler cosine --warmup-updates "$WARMUP" --warmup-init-lr 0 \
  --lr-period-updates $(( MAX_UPDATE - WARMUP + 1 )) --max-update "$MAX_UPDATE" \
  --seed "${SEED:-1}" --save-dir "$SAVE_DIR" --no-epoch-checkpoints \
  --save-interval $(( EPOCHS / 10 > 0 ? EPOCHS / 10 : 1 )) --validate-interval $(( EPOCHS / 10 > 0 ? EPOCHS / 10 : 1 )) \
  --log-interval "$LOG_INTERVAL" "${DEVICE[@]}" \
  ${CONTINUED[@]+"${CONTINUED[@]}"} ${MY_POOL[@]+"${MY_POOL[@]}"} "$@"
drop_interval_checkpoints "$SAVE_DIR" "$@"  # KEEP=0: checkpoint_best.pt and checkpoint_last.pt alone
