#!/usr/bin/env bash
# WikiText-103 -> clear-prepare -> synonym tables -> the paper's ablation-sized CLEAR run
# (Wu et al. 2020, Table 3: WikiText-103, 500 epochs, 64 GPUs). See README.md here.
#
#   examples/wikitext103/run.sh                 # download (online), prepare, synonyms; print the training command
#   TRAIN=1 NNODES=8 NODE_RANK=$i MASTER_ADDR=host0 examples/wikitext103/run.sh   # ... and train (64 GPUs)
#   SMOKE=1 examples/wikitext103/run.sh         # offline check on ../shared/data/corpus + 20 CPU updates
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
ROOT=${ROOT:-wikitext103}              # working directory (downloads, prepared data, synonym tables)
VARIANT=${VARIANT:-raw}                # raw: wikitext-103-raw-v1 (cased, no <unk>); tokens: wikitext-103-v1
WORKERS=${WORKERS:-$(nproc)}
VOCAB=${VOCAB:-32000}
AUG=${AUG:-subs,del-span}              # Table 3 rows: del-word, del-span, subs,del-span, del-span,reorder ...
EPOCHS=${EPOCHS:-500}
SENTENCES_PER_UPDATE=${SENTENCES_PER_UPDATE:-8192}
COUNTERFITTED=${COUNTERFITTED:-$repo/../shared/data/synonyms/counterfitted_neighbors.json}
export NLTK_DATA=${NLTK_DATA:-$repo/nltk_data}
PY=${PYTHON:-$( [[ -x "$repo/.venv/bin/python" ]] && echo "$repo/.venv/bin/python" || echo python3 )}
BIN="$(dirname "$PY")"
mkdir -p "$ROOT"

# ---- 1. the corpus -------------------------------------------------------------------------
if [[ "${SMOKE:-0}" == 1 ]]; then
  c="$repo/../shared/data/corpus"
  TRAIN_FILE="$c/wikitext-103/wiki.train.tokens.first_articles"   # 143 articles of the train split
  VALID_FILE="$c/wikitext-103/wiki.valid.tokens"
  TEST_FILE="$c/wikitext-103/wiki.test.tokens"
  VOCAB=${SMOKE_VOCAB:-2000}
else
  if [[ "$VARIANT" == raw ]]; then name=wikitext-103-raw-v1; dir=wikitext-103-raw; ext=raw
  else name=wikitext-103-v1; dir=wikitext-103; ext=tokens; fi
  TRAIN_FILE="$ROOT/$dir/wiki.train.$ext"; VALID_FILE="$ROOT/$dir/wiki.valid.$ext"; TEST_FILE="$ROOT/$dir/wiki.test.$ext"
  if [[ ! -f "$TEST_FILE" ]]; then
    # the original S3 address (used by fairseq's prepare-wikitext-103.sh) and its current mirror
    for url in "https://s3.amazonaws.com/research.metamind.io/wikitext/$name.zip" \
               "https://wikitext.smerity.com/$name.zip"; do
      echo "downloading $url"
      if curl -fL --retry 3 -o "$ROOT/$name.zip.part" "$url"; then
        mv "$ROOT/$name.zip.part" "$ROOT/$name.zip"; break
      fi
    done
    [[ -f "$ROOT/$name.zip" ]] || { echo "could not download $name.zip (offline?): put $dir/wiki.{train,valid,test}.$ext under $ROOT" >&2; exit 1; }
    (cd "$ROOT" && unzip -q -o "$name.zip")
  fi
fi

# ---- 2. sentences -> sentencepiece -> fairseq-preprocess (resumable) -----------------------
"$repo/preprocess/prepare.sh" "$TRAIN_FILE" "$ROOT/prepared" --valid "$VALID_FILE" --test "$TEST_FILE" \
  --vocab-size "$VOCAB" --workers "$WORKERS"
DATA="$ROOT/prepared/data-bin"

# ---- 3. synonym table for subs (the paper's counter-fitted list if present, else WordNet) ---
if [[ -f "$COUNTERFITTED" ]]; then
  TABLE="$ROOT/synonyms-counterfitted.json"
  [[ -f "$TABLE" ]] || "$BIN/clear-synonyms" counterfitted "$COUNTERFITTED" "$TABLE"
else
  TABLE="$ROOT/synonyms-wordnet.json"
  [[ -f "$TABLE" ]] || "$BIN/clear-synonyms" wordnet "$TABLE"
fi
"$BIN/clear-synonyms" coverage "$TABLE" --data "$DATA" --split valid | tee "$ROOT/synonym-coverage.json"

# ---- 4. training -----------------------------------------------------------------------------
# The paper: 500 epochs of WikiText-103, the hyperparameters of the main run (RoBERTa-base,
# 8,192 sentences per update, peak lr 6e-4, polynomial decay, warm-up 4.8% of the updates).
read -r SENTS UPDATES WARMUP < <("$PY" - "$ROOT/prepared/summary.json" "$EPOCHS" "$SENTENCES_PER_UPDATE" <<'PYEOF'
import json, math, sys
s = json.load(open(sys.argv[1]))["splits"]["train"]["sentences"]
updates = int(sys.argv[2]) * math.ceil(s / int(sys.argv[3]))
print(s, updates, max(1, round(0.048 * updates)))
PYEOF
)
echo "train split: $SENTS sentences -> $UPDATES updates for $EPOCHS epochs at $SENTENCES_PER_UPDATE sentences/update"

if [[ "${SMOKE:-0}" == 1 ]]; then
  exec "$BIN/fairseq-train" "$DATA" --user-dir "$repo/fairseq_clear" --task clear --criterion clear \
    --arch clear_roberta_tiny --augmentations "$AUG" --synonym-table "$TABLE" \
    --tokens-per-sample 128 --batch-size 32 --max-update 20 \
    --optimizer adam --adam-betas '(0.9,0.98)' --lr 1e-3 --lr-scheduler inverse_sqrt --warmup-updates 5 \
    --cpu --num-workers 0 --log-format simple --log-interval 5 --save-dir "$ROOT/checkpoints-smoke" \
    --no-epoch-checkpoints --disable-validation
fi

# 64 GPUs (8 nodes x 8) x 128 sentences = 8,192 per update, update-freq 1 (see train_256gpu.sh)
NNODES=${NNODES:-8}
CMD=(env NNODES="$NNODES" AUG="$AUG" SAVE="${SAVE:-$ROOT/checkpoints/clear-${AUG//,/+}}"
     bash "$repo/examples/pretrain_paper/train_256gpu.sh" "$DATA"
     --batch-size $((SENTENCES_PER_UPDATE / (NNODES * ${GPUS_PER_NODE:-8})))
     --synonym-table "$TABLE"
     --max-update "$UPDATES" --total-num-update "$UPDATES" --warmup-updates "$WARMUP"
     --max-epoch "$EPOCHS")
if [[ "${TRAIN:-0}" == 1 ]]; then
  exec "${CMD[@]}"
fi
echo "training command (run on every node with NODE_RANK and MASTER_ADDR set, or TRAIN=1 $0):"
printf '%q ' "${CMD[@]}"; echo
