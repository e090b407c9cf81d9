#!/usr/bin/env bash
# The long reliability checks (about 10-15 minutes on 2 CPU cores), after the CI ones.
#   bash scripts/reliability/run_all.sh            # everything
#   SKIP_CI_TESTS=1 bash scripts/reliability/run_all.sh   # only the long checks
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} PYTHONUNBUFFERED=1

if [[ -z "${SKIP_CI_TESTS:-}" ]]; then
  echo "== CI reliability tests"
  $PY -m pytest -q tests/reliability/test_reliability_resume.py tests/reliability/test_reliability_checkpoints.py \
    tests/reliability/test_reliability_bad_input.py tests/unit/test_numerics.py tests/reliability/test_config_errors.py \
    tests/reliability/test_distributed_faults.py
fi

echo "== resume: 4 kills after checkpoints (mid-epoch and at an epoch's end) + random kills, 3 epochs"
for workers in 0 2; do
  $PY scripts/reliability/check_resume.py --num-workers "$workers" | tail -n 1
done

echo "== bad input with a 10 MB line"
NASTY_BIG_LINE_MB=10 $PY -m pytest -q tests/reliability/test_reliability_bad_input.py

echo "== dead and hung ranks (2 gloo ranks under torchrun)"
$PY scripts/reliability/check_hung_rank.py --heartbeat-timeout 5 ${CONTROL:+--control}
