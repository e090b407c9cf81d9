#!/usr/bin/env bash
# Mixed augmentations with --task clear: instead of one composition AUG for both
# views, each view draws its own composition from a distribution
# (--augmentation-mix 'comp:prob;comp:prob'), as the CLEAR paper leaves for future
# work (§3.1). Draws are keyed by (seed, epoch, sentence, view): reproducible,
# independent between the two views, new every epoch.
#
#   examples/mixed_augmentations/train.sh DATA_BIN [extra fairseq-train options]
#
# Environment:
#   MIX       the distribution (default below: Table 1's single and paired
#             compositions that need no synonym table, equally likely)
#   SYNONYMS  a synonym table (clear-synonyms); adds 'subs,del-span', the paper's
#             best GLUE composition, to the default MIX
#   CPU=1     CPU-sized: clear_roberta_tiny, 300 updates of 32 sentences
#   SAVE_DIR  (default: checkpoints/clear-mix)
#
# Without CPU=1 this runs the paper's pre-training recipe
# (examples/pretrain_paper/train_256gpu.sh: RoBERTa-base, 500K updates of 8,192
# sentences, lr 6e-4, 24K warm-up, τ = 0.1) with --augmentation-mix added, so a mix
# compares one-to-one with the fixed compositions of Tables 1-2.
set -euo pipefail
if [[ $# -lt 1 ]]; then awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 1; fi
DATA=$1; shift
HERE=$(cd "$(dirname "$0")" && pwd)
SYN_ARGS=()
if [[ -n "${SYNONYMS:-}" ]]; then
  MIX=${MIX:-"del-word:0.2;del-span:0.2;del-word,reorder:0.2;del-span,reorder:0.2;subs,del-span:0.2"}
  SYN_ARGS=(--synonym-table "$SYNONYMS")
else
  MIX=${MIX:-"del-word:0.25;del-span:0.25;del-word,reorder:0.25;del-span,reorder:0.25"}
fi
SAVE_DIR=${SAVE_DIR:-checkpoints/clear-mix}
echo "mixed augmentations: $MIX"
if [[ "${CPU:-0}" != "1" ]]; then
  SAVE="$SAVE_DIR" exec bash "$HERE/../pretrain_paper/train_256gpu.sh" "$DATA" \
    --augmentation-mix "$MIX" ${SYN_ARGS[@]+"${SYN_ARGS[@]}"} "$@"
fi
USER_DIR=$(clear-user-dir 2>/dev/null || echo fairseq_clear)
mkdir -p "$SAVE_DIR"
fairseq-train "$DATA" --user-dir "$USER_DIR" \
  --task clear --criterion clear --arch clear_roberta_tiny \
  --augmentation-mix "$MIX" ${SYN_ARGS[@]+"${SYN_ARGS[@]}"} \
  --tokens-per-sample 128 --batch-size 32 \
  --optimizer adam --adam-betas '(0.9,0.98)' --adam-eps 1e-6 --weight-decay 0.01 \
  --lr 5e-4 --lr-scheduler polynomial_decay --warmup-updates 30 --total-num-update 300 \
  --max-update 300 --cpu --num-workers 0 \
  --seed "${SEED:-1}" --save-dir "$SAVE_DIR" --no-epoch-checkpoints \
  --log-format json --log-interval 20 \
  "$@" 2>&1 | tee "$SAVE_DIR/train.log"
