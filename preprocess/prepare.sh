#!/usr/bin/env bash
# preprocess/prepare.sh RAW... OUT_DIR [options]
#
# Raw text -> sentences -> sentencepiece -> fairseq-preprocess, into OUT_DIR/data-bin
# (trainable with `fairseq-train OUT_DIR/data-bin --user-dir fairseq_clear --task clear`).
# Every step is resumable: run the same command again after a crash.
# All options are clear-prepare's (`preprocess/prepare.sh --help`); see docs/data.md.
#
# Uses $PYTHON if set, else the repository's .venv, else python3 on PATH.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x "$repo/.venv/bin/python" ]]; then PYTHON="$repo/.venv/bin/python"; else PYTHON=python3; fi
fi
# WordNet/Punkt data installed by `make wordnet` (only the synonym tools need WordNet)
if [[ -z "${NLTK_DATA:-}" && -d "$repo/nltk_data" ]]; then export NLTK_DATA="$repo/nltk_data"; fi
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
# importable even without `pip install -e .`; relative paths stay relative to the caller
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
exec "$PYTHON" -m fairseq_clear.cli.prepare "$@"
