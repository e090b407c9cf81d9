#!/bin/bash
# clear-prepare at 1 worker on about 1 GB of text that is already one sentence per line (a blank line
# between documents, as BookCorpus is distributed): --binarizer direct against --binarizer fairseq, the
# input read with --input-format lines (no Punkt: nothing to split). BENCHMARKS.md §5d.
#
#   bash benchmarks/studies/prepare_sentence_per_line.sh [WORK_DIR]     (about 25 minutes on 2 cores)
#
# 1. the corpus: benchmarks/bench_preprocess.py's (the WikiText-103 files of ../shared/data/corpus
#    repeated to about 1000 MB), split into sentences once by clear-prepare itself (its
#    work/train.inputs.sent: one sentence per line, a blank line between documents);
# 2. the two binarizers on it, 1 worker each, with bench_preprocess.py's other options; the .bin/.idx compared.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
W=${1:-/tmp/prepare-sentence-per-line}
mkdir -p "$W"
if [ ! -s "$W/lines1000.txt" ]; then
  $PY - "$W" <<'PYEOF'
import sys
from pathlib import Path
work = Path(sys.argv[1])
files = sorted(Path("../shared/data/corpus/wikitext-103").glob("*"))
base = b"".join(f.read_bytes() for f in files)
with open(work / "c1000.tokens", "wb") as out:
    for _ in range(max(1, round(1000e6 / len(base)))):
        out.write(base)
PYEOF
  rm -rf "$W/split"
  OMP_NUM_THREADS=1 $PY -m fairseq_clear.cli.prepare "$W/c1000.tokens" "$W/split" --workers 1 --vocab-size 8000 \
      --spm-sample-size 20000 --valid-size 0.01 --test-size 0 --no-progress > "$W/split.log" 2>&1
  mv "$W/split/work/train.inputs.sent" "$W/lines1000.txt"
  rm -rf "$W/split" "$W/c1000.tokens"
fi
for b in direct fairseq; do
  rm -rf "$W/lines-$b"
  s=$(date +%s.%N)
  OMP_NUM_THREADS=1 $PY -m fairseq_clear.cli.prepare "$W/lines1000.txt" "$W/lines-$b" --input-format lines \
      --documents blank-lines --workers 1 --binarizer $b --vocab-size 8000 --spm-sample-size 20000 \
      --valid-size 0.01 --test-size 0 --no-progress > "$W/lines-$b.log" 2>&1
  e=$(date +%s.%N)
  $PY -c "
import json;s=json.load(open('$W/lines-$b/summary.json'));print('$b', 'end to end %.2f s' % ($e-$s), {k:v['seconds'] for k,v in s['steps'].items()}, s['inputs']['train']['bytes']/1e6, 'MB', flush=True)"
done
cmp "$W/lines-direct/data-bin/train.bin" "$W/lines-fairseq/data-bin/train.bin" && \
  cmp "$W/lines-direct/data-bin/train.idx" "$W/lines-fairseq/data-bin/train.idx" && echo "train.bin/.idx identical"
