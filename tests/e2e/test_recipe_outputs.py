"""Issue 40 items 1, 2 and 4: a recipe keeps the checkpoints it needs and says what they take (and
refuses a disk without room for two), a rerun into the same OUT leaves no stale export, and every
table of several models names each row once."""

import json
import os
import shutil

import numpy as np
import pytest

from helpers import REPO, bin_path, run_cli

#: the module fixture is built once: every test of this file on one pytest-xdist worker
pytestmark = pytest.mark.xdist_group("test_recipe_outputs")

pytest.importorskip("sentence_transformers")

RUN = str(REPO / "examples" / "pretrained" / "run.sh")
#: the user's environment must not decide what these tests check
UNSET = {"CPU": "1", "MAX_UPDATE": "", "EPOCHS": "", "PREPARE_ARGS": "", "STS_DEV": "", "KEEP": "",
         "PYTHONPATH": str(REPO)}
SENTENCES = ["A man is playing a guitar.", "Someone plays music.", "The weather is cold.", "dog"]


def _checkpoints(save):
    return sorted(p.name for p in save.glob("checkpoint*.pt"))


def _updates(path):
    from fairseq_clear.checkpoint_safety import safe_load

    return safe_load(path)["optimizer_history"][-1]["num_updates"]


def _export_vectors(out):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(out / "export"), device="cpu").encode(SENTENCES)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """run.sh simcse-unsup on a tiny BERT with STS_DEV, twice into one OUT: 3 updates, then 7 with
    KEEP=2 (the second resumes the first). What each left is recorded before the next."""
    from embedding_helpers import write_stsb
    from hf_standins import make_bert, varied_sentences

    root = tmp_path_factory.mktemp("recipe_outputs")
    bert = make_bert(root / "bert")
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(s for s in varied_sentences(160) if s.strip()) + "\n", encoding="utf-8")
    # 20 pairs: a validation costs under a ninth of an update, so the interval is every update
    # (continued.sts_interval) and the interval saves below are every update's
    sts = write_stsb(root / "sts-dev.csv", n=20)
    # one gold score for every pair: each STS-B dev score ties (no ranks: 0), and fairseq moves
    # checkpoint_best.pt on a tie, so the second run surely moves it past the first run's export
    rows = [line.split("\t") for line in sts.read_text(encoding="utf-8").splitlines()]
    sts.write_text("".join("\t".join(r[:4] + ["3.000"] + r[5:]) + "\n" for r in rows), encoding="utf-8")
    save = root / "out" / "checkpoints"
    result = {"root": root, "save": save}
    for i, (max_update, keep) in enumerate([("3", ""), ("7", "2")]):
        env = dict(UNSET, MAX_UPDATE=max_update, KEEP=keep, STS_DEV=str(sts))
        proc = run_cli([RUN, "simcse-unsup", bert, corpus, root / "out", "--lr", "1e-3"], env=env, cwd=root)
        result[i] = {"out": proc.stdout, "files": _checkpoints(save), "best": _updates(save / "checkpoint_best.pt"),
                     "export": _export_vectors(root / "out")}
    return result


def test_sts_dev_keeps_the_best_and_the_last_and_states_their_disk(runs):
    """Every update was an interval save (a tenth of 3 updates): the run keeps checkpoint_best.pt and
    checkpoint_last.pt only (it used to keep every interval checkpoint), after one line saying so with
    the size they take; a checkpoint is about 3 x the starting weights (Adam's two moments)."""
    first = runs[0]
    assert first["files"] == ["checkpoint_best.pt", "checkpoint_last.pt"], first["files"]
    assert "Saving checkpoint to" in first["out"] and "checkpoint_1_2.pt" in first["out"]  # interval saves ran
    from fairseq_clear.budget import ADAM_COPIES, size_text, weight_bytes
    from fairseq_clear.checkpoint_safety import safe_load

    each = ADAM_COPIES * weight_bytes(safe_load(runs["root"] / "out" / "model" / "model.pt"))
    stated = [line for line in first["out"].splitlines() if line.startswith("recipe: checkpoints in ")]
    assert len(stated) == 1, first["out"][-4000:]
    assert "checkpoint_best.pt and checkpoint_last.pt" in stated[0] and f"about {size_text(each)} each" in stated[0]
    assert f": {size_text(2 * each)}, up to {size_text(5 * each)} while one is written" in stated[0], stated[0]
    # the rule, measured: the tiny model's checkpoints carry its config beside 143 kB of weights
    size = os.path.getsize(runs["save"] / "checkpoint_last.pt")
    assert 0.95 * each <= size <= 1.25 * each, (size, each)


def test_keep_keeps_that_many_interval_checkpoints(runs):
    """KEEP=2: the newest two interval checkpoints too (updates 5-7 of epoch 2; update 4 ended epoch 1)."""
    second = runs[1]
    assert second["files"] == ["checkpoint_2_6.pt", "checkpoint_2_7.pt", "checkpoint_best.pt",
                               "checkpoint_last.pt"], second["files"]
    assert "+ the newest 2 interval checkpoint(s) (KEEP)" in second["out"]


def test_a_rerun_exports_the_checkpoint_it_keeps_now(runs):
    """The second run moved checkpoint_best.pt on: OUT/export is remade from it (it kept the first
    run's model, and said nothing), and the output names the checkpoint it came from."""
    from fairseq_clear.models.hub_interface import from_pretrained

    assert runs[1]["best"] > runs[0]["best"], (runs[0]["best"], runs[1]["best"])  # else nothing could go stale
    save = runs["save"]
    hub = from_pretrained(str(save), "checkpoint_best.pt", str(runs["root"] / "out" / "data" / "data-bin"))
    best = hub.embed(SENTENCES)
    assert np.abs(runs[1]["export"] - best).max() <= 1e-6
    assert np.abs(runs[0]["export"] - best).max() > 1e-4  # the first export was a different model
    assert f"sentence-transformers model: {runs['root'] / 'out' / 'export'}, exported from {save}/checkpoint_best.pt" \
        in runs[1]["out"], runs[1]["out"][-3000:]


# ---- the disk check, in the process (continued.py is what the recipes call before training) -------
def _plan(runs, save, monkeypatch, capsys, free, keep=""):
    """continued.py as the recipes call it, with ``free`` bytes free: (its exit, stdout, stderr)."""
    from fairseq_clear import continued

    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real(p)._replace(free=free))
    monkeypatch.setenv("KEEP", keep)
    code = None
    try:
        continued.main(["simcse-unsup", str(runs["root"] / "out" / "model" / "model.pt"), "--cpu",
                        "--max-update", "30", "--save-dir", str(save), "--sts-dev", str(runs["root"] / "sts-dev.csv")])
    except SystemExit as e:
        code = e.code
    out = capsys.readouterr()
    return code, out.out, out.err


def _each(runs):
    from fairseq_clear.budget import ADAM_COPIES, weight_bytes
    from fairseq_clear.checkpoint_safety import safe_load

    return ADAM_COPIES * weight_bytes(safe_load(runs["root"] / "out" / "model" / "model.pt"))


def test_a_disk_without_room_for_two_checkpoints_is_refused_before_training(runs, tmp_path, monkeypatch, capsys):
    from fairseq_clear.budget import size_text

    each, save = _each(runs), tmp_path / "deep" / "checkpoints"
    code, out, _ = _plan(runs, save, monkeypatch, capsys, free=2 * each - 1)
    assert isinstance(code, str) and "\n" not in code and out == "", (code, out)
    assert code.startswith(f"error: {save}: ") and "SAVE_DIR" in code, code
    assert f"too little for checkpoint_best.pt and checkpoint_last.pt (about {size_text(2 * each)}: 2 x " \
        f"{size_text(each)})" in code, code
    assert not (tmp_path / "deep").exists()


def test_a_disk_with_room_for_two_but_not_for_a_save_is_warned(runs, tmp_path, monkeypatch, capsys):
    code, out, err = _plan(runs, tmp_path / "ck", monkeypatch, capsys, free=3 * _each(runs))
    words = out.splitlines()
    assert code is None and words[words.index("--keep-interval-updates") + 1] == "1", (code, out)
    assert "recipe: warning: " in err and "a save can take at once" in err, err


def test_keep_must_be_a_number(runs, tmp_path, monkeypatch, capsys):
    code, _, _ = _plan(runs, tmp_path / "ck", monkeypatch, capsys, free=10 ** 12, keep="all")
    assert code == "error: KEEP must be a number of interval checkpoints to keep (0 or more), got 'all'"


# ---- the validation interval, for what a validation costs (issue 40 item 5) -----------------------
def test_the_interval_and_the_validations_share_are_stated(runs):
    """The fixture's dev set is tiny (40 short sentences against 64 x 2 views an update): every update
    is validated, and the start-up line says what one validation costs and its share of the run."""
    stated = [line for line in runs[0]["out"].splitlines() if line.startswith("recipe: STS dev ")]
    assert len(stated) == 1, runs[0]["out"][-4000:]
    assert "then every 1 updates (one validation takes about " in stated[0], stated[0]
    assert "distinct dev sentences of " in stated[0] and "% of the run's time)" in stated[0], stated[0]


def test_a_dear_dev_set_is_validated_less_often(runs, tmp_path, monkeypatch, capsys):
    """2,000 long dev pairs against the same updates: validated at most half the run apart (two
    validations after the start), not every tenth, and the share at that interval is stated."""
    from fairseq_clear import continued

    words = " ".join(["the quiet garden near the sea"] * 8)
    (tmp_path / "dev.csv").write_text("".join(f"g\tx\t2012\t{i}\t3.0\t{words} {i}\t{i} {words}\n"
                                              for i in range(2000)), encoding="utf-8")
    monkeypatch.setenv("MAX_UPDATE", "40")
    continued.main(["simcse-unsup", str(runs["root"] / "out" / "model" / "model.pt"), "--cpu", "--data",
                    str(runs["root"] / "out" / "data" / "data-bin"), "--recipe-options", "--batch-size 64",
                    "--sts-dev", str(tmp_path / "dev.csv")])
    out = capsys.readouterr()
    words = out.out.splitlines()
    assert words[words.index("--validate-interval-updates") + 1] == "20", out.out  # not 4, a tenth
    assert words[words.index("--save-interval-updates") + 1] == "20", out.out
    assert "then every 20 updates (one validation takes about " in out.err, out.err


def test_a_malformed_dev_set_is_refused_before_training(runs, tmp_path, monkeypatch, capsys):
    """The interval's estimate reads STS_DEV: a bad line stops the recipe in one line naming it (the
    run's task used to refuse it only after loading the model)."""
    from fairseq_clear import continued

    (tmp_path / "dev.csv").write_text("g\tx\t2012\t0\t3.0\ta b\tc d\nnot a pair\n", encoding="utf-8")
    monkeypatch.setenv("MAX_UPDATE", "40")
    with pytest.raises(SystemExit) as info:
        continued.main(["simcse-unsup", str(runs["root"] / "out" / "model" / "model.pt"), "--cpu", "--data",
                        str(runs["root"] / "out" / "data" / "data-bin"), "--recipe-options", "--batch-size 64",
                        "--sts-dev", str(tmp_path / "dev.csv")])
    message = str(info.value.code)
    assert message.startswith("error: STS_DEV: ") and "\n" not in message, message
    assert f"{tmp_path / 'dev.csv'}:2" in message, message
    assert capsys.readouterr().out == ""


# ---- row names: never two rows with one name, never a row dropped --------------------------------
def test_two_models_of_one_folder_name_are_two_rows_of_clear_eval_sts(runs, tmp_path):
    """Two recipe exports are both 'export': two rows (the second used to replace the first)."""
    from embedding_helpers import write_senteval_tree

    other = tmp_path / "other" / "export"
    shutil.copytree(runs["root"] / "out" / "export", other)
    tree = write_senteval_tree(tmp_path / "sts")
    out = tmp_path / "o.json"
    proc = run_cli([bin_path("clear-eval-sts"), "--sts-dir", tree, "--model", runs["root"] / "out" / "export",
                    "--model", other, "--model", other, "--output", out, "--tasks", "STS-B"])
    report = json.loads(out.read_text())
    names = ["out/export", "other/export", "other/export (2)"]
    assert list(report["models"]) == names, list(report["models"])
    rows = [line for line in proc.stdout.splitlines() if line.startswith(("out/", "other/"))]
    assert [row[:row.rindex("-")] for row in rows] == names, proc.stdout[-2000:]


def test_the_same_names_in_every_table(runs, tmp_path):
    """clear-eval-senteval and clear-eval-multitask name rows by the one helper clear-plot uses."""
    import argparse

    from fairseq_clear.cli.eval_senteval import build_encoders
    from fairseq_clear.evaluation.multitask.scoring import format_table

    other = tmp_path / "other" / "export"
    shutil.copytree(runs["root"] / "out" / "export", other)
    args = argparse.Namespace(checkpoint=None, name=None, model=[str(runs["root"] / "out" / "export"), str(other)],
                              poolings="mean", head="representation", batch_size=8, no_cache=True)
    encoders, _, _ = build_encoders(args, None)
    assert list(encoders) == ["out/export", "other/export"]

    row = {"overall": 0.5, "sentiment_acc": 0.5, "paraphrase_acc": 0.5, "sts_pearson": 0.5}
    table = format_table({"split": "valid", "rows": [{"model": "a/ck/checkpoint_best.pt", **row},
                                                     {"model": "b/ck/checkpoint_best.pt", **row},
                                                     {"model": "b/ck/checkpoint_best.pt", **row}]})
    assert [line.split("  ")[0] for line in table.splitlines()[1:4]] == \
        ["a/ck/checkpoint_best", "b/ck/checkpoint_best", "b/ck/checkpoint_best (2)"], table

    from fairseq_clear.evaluation.row_names import unique_names

    assert unique_names(["x/run1/checkpoints/train.log", "run2/checkpoints/train.log"], min_parts=2) == \
        ["run1/checkpoints/train.log", "run2/checkpoints/train.log"]
    assert unique_names(["a/b"], given=["b"]) == ["b"]
    assert unique_names(["ck/checkpoint_best", "runs/export", "b/export"], given=["export"]) == \
        ["export", "runs/export", "b/export"]
