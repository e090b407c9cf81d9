#!/usr/bin/env bash
# Every mode of the plugin from a public pre-trained encoder, as the papers start:
# import (Hugging Face layout) -> data with the model's own tokenizer -> the mode's recipe.
#
#   examples/pretrained/run.sh MODE MODEL_DIR INPUT OUT [extra fairseq-train options]
#
# MODE       clear | declutr | simcse-unsup | simcse-sup | clsr (the modes of fairseq_clear/paper_defaults.py's
#            CONTINUED, which says how each prepares its corpus and which recipe it runs)
# MODEL_DIR  a Hugging Face model directory (config.json + weights + tokenizer files:
#            bert-base-uncased, roberta-base, distilroberta-base, xlm-roberta-base, an SBERT
#            model such as all-MiniLM-L6-v2), imported with clear-import-hf; or a fairseq
#            RoBERTa directory as fairseq ships it (model.pt, dict.txt, encoder.json, vocab.bpe)
# INPUT      raw text: for clear, one sentence per line or documents separated by blank lines
#            (a file without blank lines is read as one sentence per line); for declutr,
#            documents of at least 2·A·ℓmax tokens (256 with the CPU settings, 2,048 with the
#            GPU ones) separated by blank lines; for simcse-unsup, one sentence per line;
#            labelled pairs for simcse-sup / clsr
#            (any clear-prepare-pairs format: SimCSE's nli csv, SNLI/MNLI jsonl, STS-B tsv, ...)
# OUT        work directory: OUT/model (the import), OUT/data (clear-prepare) or OUT/pairs
#            (clear-prepare-pairs), OUT/checkpoints
#
# Each step is skipped when its output exists (clear-prepare resumes on its own).
# Environment: CPU (1: the recipes' CPU settings; default: 1 when there is no CUDA device),
# EPOCHS (passes over the corpus, default the mode's paper's: --max-update and the schedule come
# from the corpus size), MAX_UPDATE (the number of updates instead), STS_DEV (STS-B's sts-dev.csv
# or your own pairs in its format: the start is scored, the best checkpoint, the start included,
# is kept and exported to OUT/export, remade by every run into OUT; KEEP: interval checkpoints kept
# beside the best and the last, default 0), SEED, PREPARE_ARGS (more clear-prepare options, e.g.
# "--input-format text" for one paragraph per line), and for clear AUGMENTATIONS (default
# del-span,reorder: CLEAR's best GLUE pair, Table 1), LR.
# Training logs: OUT/checkpoints/train.log (all of it; the terminal gets a progress bar).
#
# Downloads (online; the plugin never downloads):
#   huggingface-cli download roberta-base --local-dir roberta-base
#   huggingface-cli download bert-base-uncased --local-dir bert-base-uncased
#   huggingface-cli download sentence-transformers/all-MiniLM-L6-v2 --local-dir all-MiniLM-L6-v2
#   wget https://dl.fbaipublicfiles.com/fairseq/models/roberta.base.tar.gz && tar xzf roberta.base.tar.gz
#   wget -P roberta.base https://dl.fbaipublicfiles.com/fairseq/gpt2_bpe/{encoder.json,vocab.bpe}
set -euo pipefail
if [[ $# -lt 4 ]]; then awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 1; fi
MODE=$1; MODEL_DIR=$2; INPUT=$3; OUT=$4; shift 4
# a path starting with "-" would be read as an option by the tools below
case "$MODEL_DIR" in -*) MODEL_DIR=./$MODEL_DIR ;; esac
case "$INPUT" in -*) INPUT=./$INPUT ;; esac
case "$OUT" in -*) OUT=./$OUT ;; esac
HERE=$(cd "$(dirname "$0")/.." && pwd)
# the mode's corpus and recipe from the one table of the modes (paper_defaults.CONTINUED), which
# refuses an unknown MODE with the list
RECIPE_TEXT=$(python -m fairseq_clear.continued --recipe-of "$MODE") || exit 1
mapfile -t RECIPE_OF < <(printf '%s' "$RECIPE_TEXT")  # its data (text, documents, lines, pairs), its recipe
DATA_KIND=${RECIPE_OF[0]}; RECIPE=${RECIPE_OF[1]:-}
[[ -d "$MODEL_DIR" ]] || { echo "error: model directory '$MODEL_DIR' does not exist" >&2; exit 1; }
[[ -e "$INPUT" ]] || { echo "error: input '$INPUT' does not exist" >&2; exit 1; }
mkdir -p "$OUT"

# 1. the model: fairseq's layout as it is, Hugging Face's through clear-import-hf
if [[ -f "$MODEL_DIR/model.pt" && -f "$MODEL_DIR/dict.txt" ]]; then
  MODEL=$MODEL_DIR
elif [[ -f "$MODEL_DIR/config.json" ]]; then
  MODEL=$OUT/model
  [[ -f "$MODEL/model.pt" ]] || clear-import-hf "$MODEL_DIR" "$MODEL"
else
  echo "error: '$MODEL_DIR' is neither a fairseq RoBERTa directory (model.pt + dict.txt) nor a Hugging Face one (config.json)" >&2
  exit 1
fi
INIT=$MODEL/model.pt

# 2. the data, encoded with the model's tokenizer and dict.txt
case "$DATA_KIND" in
  text|documents)
    # a file without blank lines holds no document separators: one sentence per line
    LAYOUT=()
    if [[ -f "$INPUT" ]] && ! grep -qE '^[[:space:]]*$' "$INPUT"; then
      if [[ "$DATA_KIND" == "documents" ]]; then
        echo "error: $MODE needs documents of at least 2·A·ℓmax tokens (256 with the CPU settings, 2,048 with the GPU ones) separated by blank lines; '$INPUT' has no blank line (for one sentence per line use clear or simcse-unsup)" >&2
        exit 1
      fi
      case " ${PREPARE_ARGS:-} " in *" --input-format"*|*" --documents"*) ;; *)
        LAYOUT=(--input-format lines --documents lines)
        echo "recipe: '$INPUT' has no blank line: one sentence per line (--input-format lines --documents lines; PREPARE_ARGS='--input-format text' for paragraphs)" >&2 ;;
      esac
    fi
    # shellcheck disable=SC2086  # PREPARE_ARGS: more clear-prepare options, word-split
    clear-prepare "$INPUT" "$OUT/data" --tokenizer-from "$MODEL" --no-progress ${LAYOUT[@]+"${LAYOUT[@]}"} ${PREPARE_ARGS:-}
    DATA=$OUT/data/data-bin ;;
  lines)
    clear-prepare "$INPUT" "$OUT/data" --tokenizer-from "$MODEL" --input-format lines --documents lines --no-progress
    DATA=$OUT/data/data-bin ;;
  pairs)
    [[ -f "$OUT/pairs/pairs.json" ]] || clear-prepare-pairs --train "$INPUT" --valid "$INPUT" --data "$MODEL" --out "$OUT/pairs"
    DATA=$OUT/pairs ;;
esac

# 3. the mode's recipe, continuing from the model
export SAVE_DIR=$OUT/checkpoints
case "$RECIPE" in
  ?*) "$HERE/$RECIPE" "$DATA" "$INIT" "$@" ;;
  *)  # run.sh's own recipe: --task clear
    # CLEAR (000 §4.1) continued from a pre-trained encoder: MLM on s + NT-Xent between two
    # augmented views, [CLS], the 2-layer projection head, τ = 0.1 (the task's paper defaults); an
    # import keeps the pooling clear-import-hf recorded (mean for a folder with no pooling config)
    # a refusal (its error: line is on stderr) stops the recipe: set -e does not see a failure
    # inside "<<< $(...)", so the flags are captured first
    MODEL_ARGS_TEXT=$(python -m fairseq_clear.cli.glue model-args "$INIT")
    mapfile -t MODEL_ARGS < <(printf '%s' "$MODEL_ARGS_TEXT")  # one argument per line, never word-split
    USER_DIR=$(clear-user-dir 2>/dev/null || echo fairseq_clear)
    # shellcheck source=../common.sh  # CPU (detected), WORKERS, CPU_FLAG, train_logged
    source "$HERE/common.sh"
    if [[ "$CPU" == "1" ]]; then
      SETTINGS=(--batch-size 32 --cpu --num-workers "$WORKERS")
    else
      SETTINGS=(--batch-size 256 --num-workers "$WORKERS")
    fi
    # the continued-training values; --max-update, the schedule (warm-up over the first 10%) and the
    # log interval from the corpus's sentences and EPOCHS
    CONT=$(python -m fairseq_clear.continued "$MODE" "$INIT" ${CPU_FLAG[@]+"${CPU_FLAG[@]}"} --warmup-ratio 0.1 \
      --data "$DATA" --recipe-options "${SETTINGS[*]}" ${STS_DEV:+--sts-dev "$STS_DEV"} --save-dir "$SAVE_DIR" -- "$@") || exit 1
    mapfile -t CONTINUED < <(printf '%s' "$CONT")  # one argument per line, never word-split
    mkdir -p "$SAVE_DIR"
    train_logged "$SAVE_DIR/train.log" "$DATA" --user-dir "$USER_DIR" --task clear --criterion clear \
      --augmentations "${AUGMENTATIONS:-del-span,reorder}" \
      --finetune-from-model "$INIT" "${MODEL_ARGS[@]}" \
      --optimizer adam --adam-betas '(0.9,0.98)' --adam-eps 1e-6 --weight-decay 0.01 --clip-norm 0.0 \
      --lr "${LR:-1e-5}" --lr-scheduler polynomial_decay \
      --seed "${SEED:-1}" --save-dir "$SAVE_DIR" --no-epoch-checkpoints \
      "${SETTINGS[@]}" ${CONTINUED[@]+"${CONTINUED[@]}"} "$@"
    drop_interval_checkpoints "$SAVE_DIR" "$@" ;;  # KEEP=0: checkpoint_best.pt and checkpoint_last.pt alone
esac
# the best checkpoint by STS_DEV (the start included) when the run kept one, else the last
CKPT=checkpoint_last.pt
[[ -f "$SAVE_DIR/checkpoint_best.pt" ]] && CKPT=checkpoint_best.pt
echo "checkpoint: $SAVE_DIR/$CKPT (hub: from_pretrained('$SAVE_DIR', '$CKPT', '$DATA'))"
# the export is remade by every run, a rerun into the same OUT too, from the checkpoint kept now (an
# earlier run's export would hold an earlier best); --overwrite replaces only the files an export wrote
if python -c "import sentence_transformers" 2>/dev/null; then
  clear-export-hf --checkpoint "$SAVE_DIR/$CKPT" --data "$DATA" --out "$OUT/export" --cpu --overwrite
  echo "sentence-transformers model: $OUT/export, exported from $SAVE_DIR/$CKPT (SentenceTransformer('$OUT/export'))"
elif [[ -e "$OUT/export" ]]; then
  echo "recipe: $OUT/export is an earlier run's export, not $SAVE_DIR/$CKPT: sentence-transformers is not installed to remake it" >&2
fi
