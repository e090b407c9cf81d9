#!/usr/bin/env bash
# Seed 004's pipeline: contrastive pre-training, then multi-task fine-tuning of sentiment, paraphrase
# and STS heads (fusion by default), then the seed's table (sentiment acc, paraphrase acc, STS
# Pearson, Overall = their mean).
#
#   examples/multitask/run.sh MODEL_DIR GLUE_DIR OUT [extra fine-tuning fairseq-train options]
#
# MODEL_DIR  a Hugging Face model directory (bert-base-uncased, all-MiniLM-L6-v2, ...), imported
#            with clear-import-hf; or a directory with model.pt + dict.txt + its tokenizer (fairseq's
#            roberta.base, clear-import-hf's output, or our checkpoint copied as model.pt beside its
#            data directory's dict.txt and tokenizer files)
# GLUE_DIR   glue_data/ with SST-2, STS-B and the paraphrase task (PARAPHRASE: QQP, the seed's Quora,
#            or MRPC)
# OUT        OUT/model (the import), OUT/data (clear-prepare-multitask), OUT/pairs (clear-prepare-pairs),
#            OUT/pretrain, OUT/finetune (checkpoints and logs), OUT/eval.json
#
# Environment: CPU=1 (CPU-sized: LIMIT train rows per task, default 512, 200 dev rows, 1 pre-training
# epoch, 1 NLI epoch, 2 fine-tuning epochs, batch 16), PARAPHRASE (QQP), SCHEDULE (fusion; average is
# the seed's final model), PRETRAIN=0 (skip the contrastive pre-training: the seed's "no pre-training"
# baseline), PRETRAIN_DATA (3given: the seed's "3 Given", Table 2; quora: the paraphrase pairs only,
# Table 4's "Quora Only"), PRETRAIN_EPOCHS (seed: 5), NLI_EPOCHS (seed: 3, Table 8), EPOCHS (seed: 10), SEED.
# NLI=nli_for_simcse.csv (SimCSE's sent0,sent1,hard_neg) adds a SimCSE-sup phase on NLI, with
# NLI_ORDER=before (NLI, then the 3 datasets' pre-training) or after (the 3 datasets, then NLI): the
# sequential schedules of §5.3, Table 5. Each phase starts from the previous phase's checkpoint_last.pt
# (OUT/pretrain-nli; 3given: OUT/pretrain-pairs-E, OUT/pretrain-unsup-E for each epoch E; quora:
# OUT/pretrain); the log says "recipe: phase NAME from START".
# The seed's values (§5.3): lr 1e-5, τ 0.05, batch 16, 10 epochs, heads of hidden 768 with dropout 0.3
# (the task's defaults), the first head layer shared between paraphrase and STS; pre-training (§4.1)
# on the paraphrase pairs with the non-paraphrases as negative pairs whose loss is maximised, "in each
# epoch ... followed by unsupervised training on the other 2 datasets sequentially" (SimCSE-unsup on
# the SST sentences, then on the STS sentences: one fairseq-train run per dataset group and epoch,
# each from the last one's weights, so Adam's moments restart with each; the lr is fixed).
set -euo pipefail
if [[ $# -lt 3 ]]; then awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 1; fi
MODEL_DIR=$1; GLUE_DIR=$2; OUT=$3; shift 3
case "$MODEL_DIR" in -*) MODEL_DIR=./$MODEL_DIR ;; esac
case "$GLUE_DIR" in -*) GLUE_DIR=./$GLUE_DIR ;; esac
case "$OUT" in -*) OUT=./$OUT ;; esac
PYTHON=${PYTHON:-python}
PARAPHRASE=${PARAPHRASE:-QQP}
[[ -d "$MODEL_DIR" ]] || { echo "error: model directory '$MODEL_DIR' does not exist" >&2; exit 1; }
[[ -d "$GLUE_DIR/$PARAPHRASE" ]] || { echo "error: no '$GLUE_DIR/$PARAPHRASE' (set PARAPHRASE=MRPC or QQP)" >&2; exit 1; }
NLI_ORDER=${NLI_ORDER:-before}
case "$NLI_ORDER" in before|after) ;; *) echo "error: NLI_ORDER must be before or after, got '$NLI_ORDER'" >&2; exit 1 ;; esac
PRETRAIN_DATA=${PRETRAIN_DATA:-3given}
case "$PRETRAIN_DATA" in 3given|quora) ;; *) echo "error: PRETRAIN_DATA must be 3given or quora, got '$PRETRAIN_DATA'" >&2; exit 1 ;; esac
SEED=${SEED:-1}
[[ -z "${NLI:-}" || -f "${NLI:-}" ]] || { echo "error: NLI file '$NLI' does not exist (SimCSE's nli_for_simcse.csv)" >&2; exit 1; }
mkdir -p "$OUT"
USER_DIR=$("$PYTHON" -c "import fairseq_clear, os; print(os.path.dirname(fairseq_clear.__file__))")

# 1. the model
if [[ -f "$MODEL_DIR/model.pt" && -f "$MODEL_DIR/dict.txt" ]]; then
  MODEL=$MODEL_DIR
elif [[ -f "$MODEL_DIR/config.json" ]]; then
  MODEL=$OUT/model
  [[ -f "$MODEL/model.pt" ]] || "$PYTHON" -m fairseq_clear.cli.import_hf "$MODEL_DIR" "$MODEL"
else
  echo "error: '$MODEL_DIR' has neither model.pt + dict.txt nor config.json" >&2; exit 1
fi
INIT=$MODEL/model.pt

# 2. the three datasets (and the paraphrase pairs) with the model's own tokenizer
if [[ "${CPU:-0}" == "1" ]]; then
  LIMITS=(--limit-train "${LIMIT:-512}" --limit-valid 200)
  PRETRAIN_EPOCHS=${PRETRAIN_EPOCHS:-1}; NLI_EPOCHS=${NLI_EPOCHS:-1}; EPOCHS=${EPOCHS:-2}
  SETTINGS=(--cpu --num-workers 0)
else
  LIMITS=(); PRETRAIN_EPOCHS=${PRETRAIN_EPOCHS:-5}; NLI_EPOCHS=${NLI_EPOCHS:-3}; EPOCHS=${EPOCHS:-10}
  SETTINGS=(--num-workers 2)
fi
[[ -f "$OUT/data/multitask.json" ]] || "$PYTHON" -m fairseq_clear.cli.prepare_multitask --glue-dir "$GLUE_DIR" \
  --paraphrase "$PARAPHRASE" --tokenizer-from "$MODEL" --out "$OUT/data" ${LIMITS[@]+"${LIMITS[@]}"}
MODEL_ARGS_TEXT=$("$PYTHON" -m fairseq_clear.cli.glue model-args "$INIT")
mapfile -t MODEL_ARGS < <(printf '%s' "$MODEL_ARGS_TEXT")  # one argument per line, never word-split
START=$INIT

# 3. contrastive pre-training (§4.1): SimCSE's loss on [CLS] through a 2-layer MLP, the paraphrase
#    pairs as positives and the non-paraphrases as negative pairs whose loss is maximised, then (3given)
#    SimCSE-unsup on the SST and the STS sentences, every epoch; with NLI, SimCSE-sup on NLI
#    (contradictions as hard negatives) for NLI_EPOCHS before or after it (§5.3, Tables 5 and 8)
if [[ -n "${NLI:-}" ]]; then
  NLI_SRC=$NLI
  if [[ "${CPU:-0}" == "1" ]]; then  # the CPU form: the first LIMIT_PAIRS rows
    mkdir -p "$OUT/nli-src"
    head -n $(( ${LIMIT_PAIRS:-512} + 1 )) "$NLI" > "$OUT/nli-src/nli.csv"
    NLI_SRC=$OUT/nli-src/nli.csv
  fi
  [[ -f "$OUT/nli-pairs/pairs.json" ]] || "$PYTHON" -m fairseq_clear.cli.prepare_pairs --train "$NLI_SRC" \
    --format simcse-csv --data "$MODEL" --out "$OUT/nli-pairs"
fi
if [[ "${PRETRAIN:-1}" == "1" ]]; then
  FORMAT=$([[ "$PARAPHRASE" == "QQP" ]] && echo quora || echo mrpc)
  TRAIN_PAIRS=$GLUE_DIR/$PARAPHRASE/train.tsv
  if [[ "${CPU:-0}" == "1" ]]; then  # the CPU form: the fine-tuning rows' pairs only
    mkdir -p "$OUT/pairs-src"
    head -n $(( ${LIMIT_PAIRS:-512} + 1 )) "$TRAIN_PAIRS" > "$OUT/pairs-src/train.tsv"
    TRAIN_PAIRS=$OUT/pairs-src/train.tsv
  fi
  [[ -f "$OUT/pairs/pairs.json" ]] || "$PYTHON" -m fairseq_clear.cli.prepare_pairs --train "$TRAIN_PAIRS" \
    --format "$FORMAT" --negative-pairs --data "$MODEL" --out "$OUT/pairs"
fi

phase() {  # NAME EPOCHS SEED DATA [task options]: from $START into OUT/NAME, then START = its checkpoint_last.pt
  local name=$1 epochs=$2 seed=$3 data=$4 dir=$OUT/$1
  shift 4
  echo "recipe: phase $name from $START"
  mkdir -p "$dir"
  if [[ -f "$dir/checkpoint_last.pt" ]]; then  # done before: only if it started from the same checkpoint
    if [[ "$(cat "$dir/start.txt" 2>/dev/null)" != "$START" ]]; then
      echo "error: $dir was trained from '$(cat "$dir/start.txt" 2>/dev/null || echo unknown)', not '$START' (NLI, PRETRAIN_DATA or NLI_ORDER changed?): use a new OUT" >&2
      exit 1
    fi
  else
    echo "$START" > "$dir/start.txt"
    fairseq-train "$data" --user-dir "$USER_DIR" "$@" --temperature 0.05 --tokens-per-sample 128 \
      --sentence-pooling cls --projection-layers 2 --projection-output-activation-fn linear \
      --finetune-from-model "$START" "${MODEL_ARGS[@]}" \
      --optimizer adam --adam-betas '(0.9,0.999)' --lr 2e-5 --lr-scheduler fixed --batch-size 16 \
      --max-epoch "$epochs" --disable-validation --seed "$seed" \
      --save-dir "$dir" --no-epoch-checkpoints --log-format json --log-interval 10 \
      "${SETTINGS[@]}" 2>&1 | tee "$dir/train.log"
  fi
  START=$dir/checkpoint_last.pt
}
PAIRS=(--task contrastive_pairs --criterion clear --loss-form simcse)
# SimCSE-unsup on the SST sentences, then on the STS pairs' sentences (every row of each, no head)
UNSUP=(--task multitask --criterion multitask --schedule contrastive --contrastive-tasks sentiment,sts --downsample none)
pretrain_given() {
  if [[ "$PRETRAIN_DATA" == "quora" ]]; then
    phase pretrain "$PRETRAIN_EPOCHS" "$SEED" "$OUT/pairs" "${PAIRS[@]}" --negative-pairs
    return
  fi
  local e
  for (( e = 1; e <= PRETRAIN_EPOCHS; e++ )); do  # each epoch its own seed, so its own order and dropout
    phase "pretrain-pairs-$e" 1 $(( SEED + e - 1 )) "$OUT/pairs" "${PAIRS[@]}" --negative-pairs
    phase "pretrain-unsup-$e" 1 $(( SEED + e - 1 )) "$OUT/data" "${UNSUP[@]}"
  done
}
# (if, not &&: set -e does not apply inside a function called from an && list)
if [[ -n "${NLI:-}" && "$NLI_ORDER" == "before" ]]; then phase pretrain-nli "$NLI_EPOCHS" "$SEED" "$OUT/nli-pairs" "${PAIRS[@]}"; fi
if [[ "${PRETRAIN:-1}" == "1" ]]; then pretrain_given; fi
if [[ -n "${NLI:-}" && "$NLI_ORDER" == "after" ]]; then phase pretrain-nli "$NLI_EPOCHS" "$SEED" "$OUT/nli-pairs" "${PAIRS[@]}"; fi

# 4. multi-task fine-tuning (§4.2): the best dev Overall is kept (§5.3)
mkdir -p "$OUT/finetune"
echo "recipe: phase finetune from $START"
fairseq-train "$OUT/data" --user-dir "$USER_DIR" --task multitask --criterion multitask \
  --schedule "${SCHEDULE:-fusion}" --tokens-per-sample 128 --sentence-pooling cls \
  --finetune-from-model "$START" "${MODEL_ARGS[@]}" \
  --optimizer adam --adam-betas '(0.9,0.999)' --lr 1e-5 --lr-scheduler fixed --batch-size 16 \
  --max-epoch "$EPOCHS" --best-checkpoint-metric overall --maximize-best-checkpoint-metric \
  --seed "$SEED" --save-dir "$OUT/finetune" --no-epoch-checkpoints --log-format json --log-interval 10 \
  "${SETTINGS[@]}" "$@" 2>&1 | tee "$OUT/finetune/train.log"

# 5. the seed's table on the dev sets
"$PYTHON" -m fairseq_clear.cli.eval_multitask "$OUT/finetune/checkpoint_best.pt" --data "$OUT/data" \
  --json "$OUT/eval.json"
