"""The example recipes stop on a refusal with its message, and take any path they are given.

A refusal of ``clear-glue model-args`` must stop the recipe (it used to be swallowed by
``read <<< "$(...)"``, and fairseq-train then started without ``--arch``); a comma in GLUE's
OUT_DIR, or a path starting with ``-``, must not break a recipe or leave half-written output.
"""

import shutil

import pytest

from helpers import REPO, make_binarized, run_cli, synthetic_sentences, write_glue


EXAMPLES = REPO / "examples"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A tiny binarized corpus with its sentencepiece model (the recipes' DATA / PRETRAIN_DATA)."""
    return make_binarized(tmp_path_factory.mktemp("recipe_data"), synthetic_sentences(120, seed=0),
                          synthetic_sentences(20, seed=1))


def _recipe(name, tmp_path, data):
    """(command, env) running recipe ``name`` on a checkpoint that model-args refuses."""
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    env = {"CPU": "1", "SAVE_DIR": str(tmp_path / "save")}
    if name == "simcse/sup.sh":
        (tmp_path / "pairs" / "sent0").mkdir(parents=True)
        return [EXAMPLES / name, tmp_path / "pairs", bad], env
    if name == "clsr/train.sh":
        (tmp_path / "pairs").mkdir()
        (tmp_path / "pairs" / "pairs.json").write_text('{"splits": {"train": {"pairs_written": 10}}}')
        return [EXAMPLES / name, tmp_path / "pairs", bad], env
    if name == "pretrained/run.sh":
        model = tmp_path / "model"
        model.mkdir()
        shutil.copy(bad, model / "model.pt")
        for f in ("dict.txt", "sentencepiece.model"):
            shutil.copy(data / f, model / f)
        text = tmp_path / "corpus.txt"
        text.write_text("\n\n".join(synthetic_sentences(40, seed=3)) + "\n", encoding="utf-8")
        return [EXAMPLES / name, "clear", model, text, tmp_path / "out"], {"CPU": "1"}
    return [EXAMPLES / name, data, bad], env


@pytest.mark.parametrize("name", ["simcse/unsup.sh", "simcse/sup.sh", "declutr/train.sh",
                                  "clsr/train.sh", "pretrained/run.sh"])
def test_a_model_args_refusal_stops_the_recipe(name, tmp_path, data):
    args, env = _recipe(name, tmp_path, data)
    proc = run_cli(["bash", *args], env=env, check=False)
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert "error:" in proc.stdout and ("model.pt" in proc.stdout or "bad.pt" in proc.stdout), proc.stdout[-3000:]
    assert "Traceback" not in proc.stdout and "fairseq_cli.train" not in proc.stdout, proc.stdout[-3000:]
    assert not list(tmp_path.rglob("train.log"))  # fairseq-train never started


def test_finetune_takes_a_checkpoint_named_like_an_option(tmp_path):
    """``-ckpt.pt`` reaches model-args as a path (its refusal names the file), not as an option."""
    (tmp_path / "-ckpt.pt").write_bytes(b"not a checkpoint")
    data_bin = tmp_path / "bin"
    (data_bin / "input0").mkdir(parents=True)
    proc = run_cli(["bash", EXAMPLES / "glue" / "finetune.sh", "RTE", "-ckpt.pt"], cwd=tmp_path,
                   env={"DATA_BIN": str(data_bin), "SAVE_DIR": str(tmp_path / "ft")}, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("error:")]
    assert proc.returncode != 0 and "usage:" not in proc.stdout, proc.stdout[-3000:]
    assert len(lines) == 1 and "-ckpt.pt" in lines[0], proc.stdout[-3000:]


def test_glue_prepare_into_an_out_dir_with_a_comma(tmp_path, data):
    """fairseq-preprocess splits --validpref at commas: OUT_DIR may have one all the same."""
    root = write_glue(tmp_path / "glue", rows_per_split=12)
    out = tmp_path / "glue,bin"
    run_cli(["bash", EXAMPLES / "glue" / "prepare.sh", root, data, out, "MRPC"])
    for part in ("input0", "input1", "label"):
        assert (out / "MRPC-bin" / part / "train.bin").is_file()
        assert (out / "MRPC-bin" / part / "valid.bin").is_file()
    assert sorted(p.name for p in out.iterdir()) == ["MRPC-bin"]  # nothing else left behind


def test_glue_prepare_rerun_keeps_the_users_files_and_refuses_a_foreign_task_bin(tmp_path, data):
    """The rerun replaces only the files the first run wrote (it used to rm -rf TASK-bin), and a
    TASK-bin this script did not write is refused before any work, untouched."""
    root = write_glue(tmp_path / "glue", rows_per_split=12)
    out = tmp_path / "glue-bin"
    run_cli(["bash", EXAMPLES / "glue" / "prepare.sh", root, data, out, "MRPC"])
    (out / "MRPC-bin" / "notes.txt").write_text("mine", encoding="utf-8")
    (out / "MRPC-bin" / "checkpoints").mkdir()
    run_cli(["bash", EXAMPLES / "glue" / "prepare.sh", root, data, out, "MRPC"])
    assert (out / "MRPC-bin" / "notes.txt").read_text(encoding="utf-8") == "mine"
    assert (out / "MRPC-bin" / "checkpoints").is_dir() and (out / "MRPC-bin" / "label" / "valid.bin").is_file()
    (out / "CoLA-bin").mkdir()
    (out / "CoLA-bin" / "theirs.txt").write_text("x", encoding="utf-8")
    proc = run_cli(["bash", EXAMPLES / "glue" / "prepare.sh", root, data, out, "CoLA"], check=False)
    assert proc.returncode != 0 and "CoLA-bin" in proc.stdout and "Traceback" not in proc.stdout, proc.stdout[-3000:]
    assert sorted(p.name for p in (out / "CoLA-bin").iterdir()) == ["theirs.txt"]


def test_glue_prepare_leaves_no_half_written_task(tmp_path, data):
    """A task that fails half-way leaves neither a TASK-bin nor its partial build behind."""
    root = write_glue(tmp_path / "glue", rows_per_split=12)
    out = tmp_path / "glue-bin"
    (root / "MRPC" / "dev.tsv").write_text("Quality\t#1 ID\n1\t2\n", encoding="utf-8")  # too few columns
    proc = run_cli(["bash", EXAMPLES / "glue" / "prepare.sh", root, data, out, "CoLA", "MRPC"], check=False)
    assert proc.returncode != 0 and "dev.tsv" in proc.stdout, proc.stdout[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["CoLA-bin"]


@pytest.mark.parametrize("field,value", [("pretrained_pooling", "mean --user-dir /tmp/evil_plugin"),
                                         ("pretrained_kind", "encoder\n--user-dir"),
                                         ("encoder_embed_dim", "768 --user-dir x"),
                                         ("sentence_normalize", "--user-dir")])
def test_continued_refuses_metadata_that_is_not_its_options_value(plain_checkpoint, tmp_path, field, value):
    """The recipes put continued.py's words into fairseq-train's command line: a value from the model's
    folder must be what its option takes, never an option (a --user-dir imports code) or a path."""
    import sys

    import torch

    from fairseq_clear.checkpoint_safety import safe_load

    state = safe_load(plain_checkpoint)
    setattr(state["cfg"]["model"], field, value)
    evil = tmp_path / "evil.pt"
    torch.save(state, evil)
    proc = run_cli([sys.executable, "-m", "fairseq_clear.continued", "simcse-unsup", evil], check=False)
    assert proc.returncode != 0 and "--user-dir" not in proc.stdout.split("error:")[0], proc.stdout
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("error:") and str(evil) in last and field in last, proc.stdout


def test_continued_prints_one_argument_per_line(tmp_path):
    """A path with spaces stays one argument of fairseq-train (the recipes read the lines with mapfile)."""
    import sys

    from embedding_helpers import write_stsb

    (tmp_path / "my sts dir").mkdir()
    sts = write_stsb(tmp_path / "my sts dir" / "sts dev.csv", n=12)
    proc = run_cli([sys.executable, "-m", "fairseq_clear.continued", "simcse-unsup", "-", "--sts-dev", sts,
                    "--max-update", "20"], check=False)
    assert proc.returncode == 0, proc.stdout
    words = [w for w in proc.stdout.splitlines() if not w.startswith("recipe:")]
    assert "--sts-validation" in words and words[words.index("--sts-validation") + 1] == str(sts), words


def test_lr_in_the_environment_is_the_runs_lr(tiny_data, plain_checkpoint, tmp_path):
    """LR (README's knob table: every recipe) reaches fairseq-train; continued.py leaves --lr to the
    recipe when LR is set, and simcse/unsup.sh used to keep its own --lr then (LR logged, not used)."""
    save = tmp_path / "save"
    proc = run_cli(["bash", EXAMPLES / "simcse" / "unsup.sh", tiny_data, plain_checkpoint],
                   env={"CPU": "1", "LR": "7e-06", "MAX_UPDATE": "1", "SAVE_DIR": str(save)}, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    log = (save / "train.log").read_text()
    assert "'lr': [7e-06]" in log and "'lr': [0.0005]" not in log, log[:3000]
