"""Issue 28 items 3 and 5 in the recipes: budgets from the corpus (EPOCHS, not the papers' corpus
sizes), the CPU detected, workers within the cores, a one-sentence-per-line corpus in clear (and
DeCLUTR's one-line refusal), training output (the config dump, model repr and third-party warnings
in OUT/checkpoints/train.log, not on the terminal; fairseq's progress bar on a terminal) and CLSR's
continued-training call."""

import json
import math
import os
import re
import subprocess

import pytest

from harness.runs import logged
from helpers import REPO, run_cli

pytest.importorskip("transformers")

RUN = str(REPO / "examples" / "pretrained" / "run.sh")
#: the user's environment must not decide what these tests check
UNSET = {"CPU": "", "MAX_UPDATE": "", "EPOCHS": "", "PREPARE_ARGS": "", "STS_DEV": "", "PYTHONPATH": str(REPO)}


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    from hf_standins import make_bert

    return make_bert(tmp_path_factory.mktemp("hf") / "bert")


@pytest.fixture(scope="module")
def lines_run(bert, tmp_path_factory):
    """run.sh clear on a one-sentence-per-line file, with no CPU, MAX_UPDATE or PREPARE_ARGS."""
    from hf_standins import varied_sentences

    root = tmp_path_factory.mktemp("lines_run")
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(s for s in varied_sentences(160) if s.strip()) + "\n", encoding="utf-8")
    proc = run_cli([RUN, "clear", bert, corpus, root / "out", "--tokens-per-sample", "64"], env=UNSET, cwd=root)
    return root, corpus, proc


def _updates(text):
    return [int(r["num_updates"]) for r in logged(text)]


def test_clear_takes_one_sentence_per_line_and_sizes_the_run_from_it(lines_run):
    """No blank line in the input: clear-prepare reads one sentence per line (it used to fail carving
    one document); --max-update = EPOCHS (1) x ceil(sentences / batch 32), the CPU detected without
    CPU=1 (no --cpu used to plan the GPU settings: 20,000 updates of 256), no workers on a CPU, a log
    line every update of a short run."""
    import torch

    root, _, proc = lines_run
    out = proc.stdout
    assert "has no blank line: one sentence per line (--input-format lines --documents lines" in out, out[-4000:]
    summary = json.loads((root / "out" / "data" / "summary.json").read_text())
    sentences = summary["splits"]["train"]["sentences"]
    assert summary["options"]["documents"] == "lines" and sentences > 100
    from fairseq_clear.budget import updates_per_epoch

    expected = updates_per_epoch(sentences, 32 if not torch.cuda.is_available() else 256)
    assert f"recipe: max-update {expected} = 1 epoch(s)" in out, out[-4000:]
    assert f"over {sentences:,} sentences" in out
    log = (root / "out" / "checkpoints" / "train.log").read_text()
    if not torch.cuda.is_available():
        assert "recipe: no CUDA device: the CPU settings" in out
        assert "'cpu': True" in log and "'num_workers': 0" in log
    assert f"'max_update': {expected}," in log
    assert re.search(rf"'total_num_update': \[?{expected}(\.0)?\]?,", log)
    assert _updates(out) == list(range(1, expected + 1))


def test_training_output_keeps_the_config_model_and_warnings_in_the_log_file(lines_run):
    """Not a terminal: plain json lines on stdout, without fairseq's config dump, the model repr and
    hydra's deprecation warnings; OUT/checkpoints/train.log has all of them (its path printed) and
    every line stdout shows."""
    root, _, proc = lines_run
    out = proc.stdout
    log_path = root / "out" / "checkpoints" / "train.log"
    log = log_path.read_text()
    assert f"training log (config, model, warnings and every line below): {root / 'out' / 'checkpoints' / 'train.log'}" in out \
        or "training log (config, model, warnings and every line below): out/checkpoints/train.log" in out
    training = out[out.index("training log (config"):out.index("checkpoint: ")]
    for kept_out in ("{'_name': None, 'common':", "ClearRobertaModel(", "(layers): ModuleList(", "hydra",
                     "UserWarning", "can_reuse_epoch_itr"):
        assert kept_out not in training, kept_out
        assert kept_out in log, kept_out
    for line in training.splitlines()[1:]:
        if " | INFO | " in line:
            assert line in log, line
    assert _updates(out) and _updates(log) == _updates(out)


def test_declutr_says_in_one_line_what_it_needs(lines_run):
    """DeCLUTR cannot use one sentence per line: one error line naming what it needs."""
    root, corpus, _ = lines_run
    proc = run_cli([RUN, "declutr", root / "out" / "model", corpus, root / "declutr"], env=UNSET, cwd=root,
                   check=False)
    assert proc.returncode == 1
    errors = [line for line in proc.stdout.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "declutr needs documents of at least 2·A·ℓmax tokens" in errors[0], proc.stdout
    assert "separated by blank lines" in errors[0] and str(corpus) in errors[0]
    assert not (root / "declutr" / "data").exists()


def _pairs(path):
    path.write_text("sent0,sent1,hard_neg\n" + "".join(
        f"a man plays {w},someone plays {w},nobody plays {w}\n"
        for w in ["guitar", "football", "music", "chess", "tennis", "piano", "cards", "golf"] * 5))
    return path


def test_simcse_sup_runs_the_papers_three_epochs_of_the_pairs(bert, tmp_path):
    """simcse-sup: 3 epochs (SimCSE's) over the rows clear-prepare-pairs wrote (not 3 epochs of
    nli_for_simcse's 275,601 rows); EPOCHS changes it, a --max-update of yours wins."""
    pairs = _pairs(tmp_path / "pairs.csv")
    proc = run_cli([RUN, "simcse-sup", bert, pairs, tmp_path / "out", "--batch-size", "16"],
                   env=dict(UNSET, CPU="1"), cwd=tmp_path)
    rows = json.loads((tmp_path / "out" / "pairs" / "pairs.json").read_text())["splits"]["train"]["pairs_written"]
    from fairseq_clear.budget import updates_per_epoch

    per_epoch = updates_per_epoch(rows, 16)
    assert f"recipe: max-update {3 * per_epoch} = 3 epoch(s) (SimCSE: 3 epochs supervised) x {per_epoch} updates of 16" \
        in proc.stdout, proc.stdout[-3000:]
    assert _updates(proc.stdout) == list(range(1, 3 * per_epoch + 1))


def test_clsr_recipe_scores_the_start_and_keeps_the_models_pooling(bert, tmp_path):
    """CLSR calls the continued-training values: STS_DEV scores the start and keeps the best (it was
    ignored); CLSR's lr is its heads' (its encoder is frozen), not a continued-training one."""
    from embedding_helpers import write_stsb

    pairs = _pairs(tmp_path / "pairs.csv")
    (tmp_path / "my sts").mkdir()  # a space in STS_DEV: one argument (the recipes used to word-split it)
    sts_dev = write_stsb(tmp_path / "my sts" / "sts-dev.csv", n=40)
    proc = run_cli([RUN, "clsr", bert, pairs, tmp_path / "out", "--max-update", "2"],
                   env=dict(UNSET, CPU="1", EPOCHS="1", BATCH="16", STS_DEV=str(sts_dev)), cwd=tmp_path)
    assert "STS-B dev Spearman: start" in proc.stdout, proc.stdout[-3000:]
    assert "checkpoint_best.pt" in proc.stdout.split("checkpoint: ")[-1].splitlines()[0]
    assert "'lr': [0.001]" in (tmp_path / "out" / "checkpoints" / "train.log").read_text()


def test_continued_values_for_clsr_are_the_models_pooling_only():
    from fairseq_clear.continued import options

    st = {"pretrained_kind": "sentence-embedding", "pretrained_pooling": "cls", "sentence_normalize": False,
          "encoder_embed_dim": 384}
    words, _ = options("clsr", st, cpu=False, user=[], env={})
    assert words == ["--sentence-pooling", "cls"]
    words, log = options("clsr", st, cpu=False, user=["--sentence-pooling", "mean"], env={})
    assert words == [] and "sentence-pooling mean (yours: --sentence-pooling)" in log


def test_budget_yields_to_the_user(tiny_data):
    from fairseq_clear.budget import plan, updates_per_epoch

    # fairseq's batches: 2,940 sentences at 64 are 45 x 64, then 16 + 4 (--required-batch-size-multiple 8)
    assert [updates_per_epoch(2940, 64), updates_per_epoch(600, 64), updates_per_epoch(20, 16, 1),
            updates_per_epoch(21, 12, 8)] == [47, 10, 2, 2]

    data = str(tiny_data)
    words, log, n = plan("clear", data, "", 64, True, ["--batch-size", "64"], {})
    assert n == math.ceil(600 / 64) and words[words.index("--max-update") + 1] == str(n)
    assert words[words.index("--log-interval") + 1] == "1"
    words, log, n = plan("clear", data, "", 64, True, ["--batch-size", "64"], {"EPOCHS": "3"}, warmup_ratio=0.1)
    assert n == 3 * math.ceil(600 / 64) and "(yours: EPOCHS)" in log[0] and words[words.index("--warmup-updates") + 1] == "3"
    words, log, n = plan("clear", data, "", 64, True, ["--max-update", "7", "--log-interval", "2"], {})
    assert n == 7 and "--max-update" not in words and "--log-interval" not in words
    assert words == ["--total-num-update", "7"] and log == ["max-update 7 (yours: --max-update)"]
    words, log, n = plan("clear", data, "", 64, True, [], {"MAX_UPDATE": "5"})
    assert words[:2] == ["--max-update", "5"] and log == ["max-update 5 (yours: MAX_UPDATE)"]
    words, _, n = plan("clear", data, "", 64, True, ["--batch-size", "64"], {"EPOCHS": "100"})
    assert n == 100 * math.ceil(600 / 64) and words[words.index("--log-interval") + 1] == "3"  # CPU: a line soon
    with pytest.raises(ValueError, match="EPOCHS must be a positive number"):
        plan("clear", data, "", 64, True, [], {"EPOCHS": "0"})


@pytest.mark.parametrize("terminal", [False, True])
def test_progress_bar_on_a_terminal_plain_lines_elsewhere(tmp_path, terminal):
    """train_logged (examples/common.sh) asks fairseq for its tqdm bar (with its ETA) on a terminal,
    json lines elsewhere; a --log-format of yours comes after and wins."""
    if terminal and not os.path.exists("/usr/bin/script"):
        pytest.skip("needs script(1) for a terminal")
    probe = (f"CPU=1; source {REPO}/examples/common.sh; python() {{ echo \"ARGS: $*\"; }}; "
             "train_logged L data --log-format simple")
    cmd = ["script", "-qec", f"bash -c '{probe}'", "/dev/null"] if terminal else ["bash", "-c", probe]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         text=True, timeout=60).stdout
    fmt = "tqdm" if terminal else "json"
    assert f"ARGS: -m fairseq_clear.cli.train_log --log L -- --log-format {fmt} data --log-format simple" in out, out
