#!/bin/bash
# bench_gpu.py on a lent GPU machine that has torch but no fairseq and no network (section 6b).
# usage: bash G/run_bench_gpu.sh OUTDIR [bench_gpu options...], where the staging folder G (this file
# copied into it, carried to the machine) holds:
#   repo/                      git archive of the commit measured
#   shared/data/               corpus/wikitext-103 and sts/STSBenchmark/sts-test.csv (the repo's ../shared)
#   runs/data/prepared/data-bin  the benchmark corpus (benchmarks/common.prepare_corpus, made here)
#   sdist/fairseq_fixed-0.12.3.1.tar.gz, so312/*.so  (build_fairseq_ext.py with the machine's Python/numpy)
#   whl/*.whl                  hydra-core, omegaconf, antlr4-python3-runtime 4.9.3, bitarray, nltk
set -u
G=$(cd "$(dirname "$0")" && pwd)
OUTDIR=$1; shift
PY=${PY:-python3}
BIN=$(dirname "$($PY -c 'import sys; print(sys.executable)')")
FS=${FS:-/tmp/fs}
if [ ! -d "$FS/fairseq" ]; then
  mkdir -p /tmp/fsx && tar -xzf "$G/sdist/fairseq_fixed-0.12.3.1.tar.gz" -C /tmp/fsx && mv /tmp/fsx/fairseq_fixed-0.12.3.1 "$FS"
  cp "$G"/so312/*.so "$FS/fairseq/data/"
fi
if [ -d "$G/whl" ] && ls "$G"/whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$G"/whl/*.whl || exit 1
fi
export PYTHONPATH=$FS:$G/repo:/tmp/site${PYTHONPATH:+:$PYTHONPATH}
for s in fairseq-train; do
  [ -x "$BIN/$s" ] || printf '#!%s\nimport sys\nfrom fairseq_cli.train import cli_main\nsys.exit(cli_main())\n' "$($PY -c 'import sys; print(sys.executable)')" > "$BIN/$s"
  chmod +x "$BIN/$s"
done
cd "$G/repo"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 CLEAR_BENCH_RUNS=/tmp/bench_runs
mkdir -p /tmp/bench_runs "$OUTDIR"
$PY -c "import torch, numpy, fairseq, fairseq_clear; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'numpy', numpy.__version__, 'fairseq', fairseq.__file__)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null
$PY benchmarks/studies/bench_gpu.py --data "$G/runs/data/prepared/data-bin" --out "$OUTDIR/gpu.json" "$@" 2>&1 | tee "$OUTDIR/bench_gpu.log"
rc=${PIPESTATUS[0]}
cp /tmp/bench_runs/bench_gpu_*/*.log "$OUTDIR/" 2>/dev/null
exit $rc
