#!/usr/bin/env bash
# GLUE tsv -> fairseq binarized data for fine-tuning a CLEAR checkpoint with
# fairseq's sentence_prediction task, the way fairseq's
# examples/roberta/preprocess_GLUE_tasks.sh does it for GPT-2 BPE, but with the
# pre-training corpus's own sentencepiece model and dict.txt:
#
#   examples/glue/prepare.sh GLUE_DIR PRETRAIN_DATA OUT_DIR TASK [TASK ...]
#
#   GLUE_DIR       glue_data/ (one folder per task: RTE/train.tsv, dev.tsv, test.tsv, ...)
#   PRETRAIN_DATA  the binarized pre-training data (dict.txt and its tokenizer), or a model
#                  directory: clear-import-hf's output, fairseq's roberta.base (GPT-2 BPE)
#   OUT_DIR        writes OUT_DIR/TASK-bin/{input0,input1,label}/ (+ sentencepiece.model)
#   TASK           RTE MRPC STS-B CoLA SST-2 QNLI QQP MNLI WNLI, or ALL
#
# Sentence pairs go to input0/input1 (the task adds <s> and the separator
# </s>: --init-token 0 --separator-token 2); labels are binarized with their
# own dictionary, except STS-B, whose score / 5 is written as label/*.label
# (a regression target), as fairseq does.
set -euo pipefail

if [[ $# -lt 4 ]]; then
  sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
  exit 1
fi
GLUE_DIR=$1; PRETRAIN_DATA=$2; OUT_DIR=$3; shift 3
# a path starting with "-" would be read as an option by the tools below
case "$GLUE_DIR" in -*) GLUE_DIR=./$GLUE_DIR ;; esac
case "$PRETRAIN_DATA" in -*) PRETRAIN_DATA=./$PRETRAIN_DATA ;; esac
case "$OUT_DIR" in -*) OUT_DIR=./$OUT_DIR ;; esac
TASKS=("$@")
if [[ "${TASKS[0]}" == "ALL" ]]; then
  TASKS=(RTE MRPC STS-B CoLA SST-2 QNLI QQP MNLI)
fi
PYTHON=${PYTHON:-python}
WORKERS=${WORKERS:-1}

DICT="$PRETRAIN_DATA/dict.txt"
# the tokenizer: SENTENCEPIECE_MODEL, else the one PRETRAIN_DATA holds (fairseq_clear.vocabulary.detect)
SPM="${SENTENCEPIECE_MODEL:-$PRETRAIN_DATA}"
[[ -f "$DICT" ]] || { echo "error: no dict.txt in PRETRAIN_DATA '$PRETRAIN_DATA'" >&2; exit 1; }
[[ -e "$SPM" ]] || { echo "error: no sentencepiece model '$SPM' (set SENTENCEPIECE_MODEL)" >&2; exit 1; }

# fairseq-preprocess splits --validpref/--testpref at commas, so the split text files go to a
# comma-free temporary folder; each TASK-bin is built beside its final name and moved in when
# complete, so a failure leaves no half-written TASK-bin (and the previous one, if any, intact)
mkdir -p "$OUT_DIR"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/glue-prepare.XXXXXX")
PARTIAL=
trap 'rm -rf "$WORK" ${PARTIAL:+"$PARTIAL"}' EXIT
[[ "$WORK" != *,* ]] || { echo "error: the temporary folder '$WORK' has a comma (set TMPDIR)" >&2; exit 1; }

for TASK in "${TASKS[@]}"; do
  [[ -d "$GLUE_DIR/$TASK" ]] || { echo "error: no folder '$GLUE_DIR/$TASK'" >&2; exit 1; }
  echo "== $TASK"
  FINAL="$OUT_DIR/$TASK-bin"
  # a TASK-bin that is not empty and not an earlier output of this script is refused now
  "$PYTHON" -m fairseq_clear.cli.glue publish --check-only "" "$FINAL"
  PARTIAL="$OUT_DIR/.$TASK-bin.partial-$$"
  DEST=$PARTIAL
  RAW="$WORK/$TASK-raw"
  rm -rf "$RAW"
  # header and column handling, tokenisation: fairseq_clear/evaluation/glue/finetune.py
  # input0/input1: the encoder's ids straight into fairseq's .bin/.idx (--bin), byte-identical to
  # fairseq-preprocess --only-source --srcdict on the split's text (test_prepare_at_scale.py)
  "$PYTHON" -m fairseq_clear.cli.glue split "$GLUE_DIR" "$TASK" "$SPM" "$RAW" --bin "$DEST" --dict "$DICT"

  DEV_SPLITS=dev
  [[ "$TASK" != "MNLI" ]] || DEV_SPLITS="dev_matched dev_mismatched"
  if [[ "$TASK" != "STS-B" ]]; then
    VALIDPREF=$(for s in $DEV_SPLITS; do printf '%s,' "$RAW/$s.label"; done); VALIDPREF=${VALIDPREF%,}
    fairseq-preprocess --only-source --trainpref "$RAW/train.label" --validpref "$VALIDPREF" \
      --destdir "$DEST/label" --workers "$WORKERS"
  else
    mkdir -p "$DEST/label"
    cp "$RAW/train.label" "$DEST/label/train.label"
    cp "$RAW/dev.label" "$DEST/label/valid.label"
  fi
  # the hub finds the tokenizer next to the data (ClearRobertaModel.from_pretrained)
  "$PYTHON" -m fairseq_clear.cli.glue copy-tokenizer "$SPM" "$DEST"
  rm -rf "$RAW"
  # only the files an earlier run wrote are replaced (export_manifest.json); a file of yours there stays
  "$PYTHON" -m fairseq_clear.cli.glue publish "$PARTIAL" "$FINAL"
  PARTIAL=
  echo "wrote $FINAL"
done
