"""Wrong options fail at start-up with a message that names the option (or file), before
any training step or checkpoint.

Each row: (id, extra command-line arguments, text the error must contain). Every row
runs in-process through the steps fairseq-train takes before training (parse, task,
model, criterion, dataset); the rows in ``CLI_ROWS`` also run through the real
``fairseq-train`` CLI (a few seconds each), which checks the exit status and that no
step ran; rows that need fairseq's trainer (checkpoint loading) are CLI-only.
"""

import json
import random
import re
import shutil

import pytest

from helpers import make_binarized, run_cli, train_args

ERROR_LINE = re.compile(r"^(?:[\w.]*(?:Error|Exception)|fairseq-train: error|error): .+")

CASES = [
    # augmentations
    ("unknown-augmentation", ["--augmentations", "del-wrod"],
     "--augmentations: unknown augmentation 'del-wrod'"),
    ("unknown-augmentation-in-mix", ["--augmentation-mix", "del-word:0.5;oops:0.5"],
     "--augmentation-mix: unknown augmentation 'oops'"),
    ("mix-without-probability", ["--augmentation-mix", "del-word"], "--augmentation-mix"),
    ("identity-with-others", ["--augmentations", "none,del-word"], "--augmentations"),
    # rates outside [0, 1] (nan included)
    ("del-word-rate-above-1", ["--del-word-rate", "1.5"], "--del-word-rate must be in [0, 1]"),
    ("del-word-rate-nan", ["--del-word-rate", "nan"], "--del-word-rate must be in [0, 1]"),
    ("subs-rate-negative", ["--subs-rate", "-0.1"], "--subs-rate must be in [0, 1]"),
    ("del-span-ratio-above-1", ["--del-span-ratio", "2"], "--del-span-ratio must be in [0, 1]"),
    ("reorder-span-ratio-negative", ["--reorder-span-ratio", "-1"], "--reorder-span-ratio"),
    ("del-span-count-negative", ["--del-span-count", "-2"], "--del-span-count must be >= 0"),
    # accepted values that used to change nothing (0% of sentences) are refused with the range
    ("del-span-ratio-1", ["--augmentations", "del-span", "--del-span-ratio", "1"],
     "--del-span-count x --del-span-ratio is the expected share deleted and must be below 1"),
    ("del-span-ratio-0.9", ["--augmentations", "del-span", "--del-span-ratio", "0.9"],
     "must be below 1, got 5 x 0.9"),
    ("reorder-span-ratio-0.6", ["--augmentations", "reorder", "--reorder-span-ratio", "0.6", "--reorder-pairs", "1"],
     "2 x --reorder-pairs x --reorder-span-ratio is the expected share moved and must be at most 1"),
    ("mask-prob-0", ["--mask-prob", "0"], "--mask-prob must be strictly between 0 and 1"),
    ("mask-prob-1", ["--mask-prob", "1"], "--mask-prob must be strictly between 0 and 1"),
    ("unmasked-plus-random-above-1", ["--leave-unmasked-prob", "0.6", "--random-token-prob", "0.6"],
     "--leave-unmasked-prob + --random-token-prob must be at most 1"),
    ("mask-prob-above-1", ["--mask-prob", "1.2"], "--mask-prob must be in [0, 1]"),
    # the loss
    ("temperature-zero", ["--temperature", "0"], "--temperature must be > 0"),
    ("matryoshka-dims-not-numbers", ["--matryoshka-dims", "64,x"], "--matryoshka-dims must be comma-separated"),
    ("matryoshka-weights-count", ["--matryoshka-dims", "64,32", "--matryoshka-weights", "1"],
     "--matryoshka-weights gives 1 weights for 2 --matryoshka-dims"),
    ("matryoshka-dims-too-large", ["--matryoshka-dims", "4096,64"], "--matryoshka-dims 4096,64: the largest size"),
    ("guide-margin-nan", ["--guide-margin", "nan"], "--guide-margin must be finite"),
    ("guide-model-missing", ["--guide-model", "/nonexistent/guide"], "model directory '/nonexistent/guide'"),
    ("temperature-negative", ["--temperature", "-0.1"], "--temperature must be > 0"),
    ("temperature-inf", ["--temperature", "inf"], "--temperature must be > 0 and finite"),
    ("cl-weight-negative", ["--cl-weight", "-1"], "--cl-weight must be >= 0"),
    ("cl-weight-nan", ["--cl-weight", "nan"], "--cl-weight must be >= 0 and finite"),
    ("hard-negative-weight-nan", ["--hard-negative-weight", "nan"], "--hard-negative-weight"),
    ("loss-form-unknown", ["--loss-form", "infonce"], "argument --loss-form: invalid choice"),
    ("fp16-on-cpu", ["--fp16"], "--fp16 needs a CUDA GPU"),
    ("tpu-without-torch-xla", ["--tpu"], "--tpu needs torch_xla"),
    ("bf16-and-tpu-without-torch-xla", ["--bf16", "--tpu"], "needs torch_xla, which is not installed"),
    ("gather-on-world-size-1", ["--gather-negatives", "on"],
     "--gather-negatives on needs distributed training, but the world size is 1"),
    # subs
    ("subs-without-table", ["--augmentations", "subs"], "no --synonym-table was given"),
    ("subs-table-missing", ["--augmentations", "subs", "--synonym-table", "{tmp}/none.json"],
     "--synonym-table: cannot read file '{tmp}/none.json'"),
    ("subs-table-not-json", ["--augmentations", "subs", "--synonym-table", "{tmp}/bad.json"],
     "--synonym-table: '{tmp}/bad.json' is not valid JSON"),
    ("subs-sentencepiece-missing",
     ["--augmentations", "subs", "--synonym-table", "{tmp}/ok.json", "--sentencepiece-model",
      "{tmp}/none.model"], "--sentencepiece-model"),
    ("subs-table-empty", ["--augmentations", "subs", "--synonym-table", "{tmp}/empty.json"],
     "--synonym-table: none of its 0 entries is usable"),
    ("subs-table-out-of-vocabulary", ["--augmentations", "subs", "--synonym-table", "{tmp}/oov.json"],
     "--synonym-table: none of its 2 entries is usable"),
    ("subs-table-nested", ["--augmentations", "subs", "--synonym-table", "{tmp}/nested.json"],
     "is nested too deeply"),
    # task and model shape
    ("sample-break-mode", ["--sample-break-mode", "sentences"], "--sample-break-mode must be one of eos, complete"),
    ("tokens-per-sample-2", ["--tokens-per-sample", "2"], "--tokens-per-sample must be >= 3"),
    ("projection-layers-negative", ["--projection-layers", "-1"], "--projection-layers must be >= 0"),
    # fairseq masked_lm options no contrastive task reads, and options of another task
    ("mask-whole-words", ["--mask-whole-words"], "--mask-whole-words is not used by --task clear"),
    ("mask-multiple-length", ["--mask-multiple-length", "3"], "--mask-multiple-length is not used by --task clear"),
    ("shorten-method", ["--shorten-method", "truncate"], "--shorten-method is not used by --task clear"),
    ("declutr-sample-break-mode", ["--task", "declutr", "--sample-break-mode", "eos"],
     "--sample-break-mode is not used by --task declutr"),
    ("declutr-augmentations", ["--task", "declutr", "--augmentations", "del-word"],
     "unrecognized arguments: --augmentations"),
    ("declutr-double-mlm", ["--task", "declutr", "--double-mlm"], "unrecognized arguments: --double-mlm"),
    # DeCLUTR spans
    ("declutr-min-above-max", ["--task", "declutr", "--min-span-length", "16",
                               "--max-span-length", "8"],
     "--max-span-length (8) must be >= --min-span-length (16)"),
    # data and checkpoints
    ("no-dict", ["DATA={tmp}/empty_dir"], "has no dict.txt"),
    ("no-train-split", ["DATA={tmp}/dict_only"], "split 'train' not found"),
    ("dictionary-size-mismatch", ["--restore-file", "{other_ckpt}"],
     "the checkpoint was trained with a dictionary of"),
]


CLI_ROWS = {
    "unknown-augmentation", "del-word-rate-above-1", "temperature-inf", "cl-weight-nan", "fp16-on-cpu",
    "loss-form-unknown", "gather-on-world-size-1", "bf16-and-tpu-without-torch-xla", "subs-without-table",
    "declutr-min-above-max", "no-dict", "mask-whole-words", "declutr-augmentations", "dictionary-size-mismatch", "subs-table-empty", "mask-prob-1",
    "matryoshka-dims-too-large", "guide-model-missing",
}
#: need fairseq's trainer (they fail while loading a checkpoint)
CLI_ONLY = {"dictionary-size-mismatch"}


def _resolve(workspace, extra, expected):
    fill = lambda s: s.format(tmp=workspace["tmp"], other_ckpt=workspace["other_ckpt"])  # noqa: E731
    extra = [fill(a) for a in extra]
    data = workspace["data"]
    if extra and extra[0].startswith("DATA="):
        data, extra = extra[0][len("DATA="):], extra[1:]
    return data, extra, fill(expected)


@pytest.fixture(scope="module")
def workspace(tiny_data, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("config_errors")
    (tmp / "bad.json").write_text('{"cat": ["feline"], ', encoding="utf-8")
    (tmp / "ok.json").write_text(json.dumps({"cat": ["feline"]}), encoding="utf-8")
    (tmp / "empty.json").write_text("{}", encoding="utf-8")
    # words whose pieces are not in the synthetic corpus's dictionary
    (tmp / "oov.json").write_text(json.dumps({"\u0416\u0416\u0416": ["\u0429\u0429"], "\u4e2d\u4e2d": ["\u6587\u6587"]}), encoding="utf-8")
    (tmp / "nested.json").write_text("[" * 100000 + "]" * 100000, encoding="utf-8")
    (tmp / "empty_dir").mkdir()
    (tmp / "dict_only").mkdir()
    shutil.copy(tiny_data / "dict.txt", tmp / "dict_only" / "dict.txt")
    # a model trained on another vocabulary (random letters: a larger dictionary)
    rng = random.Random(0)
    words = lambda: " ".join(  # noqa: E731
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 7)))
        for _ in range(8)
    )
    other = make_binarized(tmp / "other", [words() for _ in range(300)], [words() for _ in range(20)],
                           vocab_size=150)
    run_cli(train_args(other, tmp / "other_ckpt", max_update=1))
    return {"tmp": str(tmp), "other_ckpt": str(tmp / "other_ckpt" / "checkpoint_last.pt"),
            "data": tiny_data}


@pytest.mark.parametrize("extra,expected", [c[1:] for c in CASES if c[0] not in CLI_ONLY],
                         ids=[c[0] for c in CASES if c[0] not in CLI_ONLY])
def test_wrong_option_fails_before_training(workspace, tmp_path, extra, expected, capsys):
    """fairseq-train's start-up, in-process: parse, set up the task, model, criterion, data."""
    from fairseq import tasks

    from harness.runs import training_config

    data, extra, expected = _resolve(workspace, extra, expected)
    args = [*train_args(data, tmp_path / "save", *extra)[1:]]
    # train_args starts with the executable and DATA; training_config adds --user-dir/task/...
    args = args[args.index("--tokens-per-sample"):]
    with pytest.raises((ValueError, FileNotFoundError, SystemExit)) as info:
        cfg = training_config(data, *args)
        task = tasks.setup_task(cfg.task)
        task.build_model(cfg.model)
        task.build_criterion(cfg.criterion)
        task.load_dataset("train", combine=False, epoch=1)
    if info.type is SystemExit:  # argparse: the message went to stderr
        message = capsys.readouterr().err
        assert info.value.code == 2
    else:
        message = str(info.value)
        assert isinstance(info.value, ValueError) or "split" in message
    assert expected in message, message


@pytest.mark.parametrize("extra,expected", [c[1:] for c in CASES if c[0] in CLI_ROWS],
                         ids=[c[0] for c in CASES if c[0] in CLI_ROWS])
def test_wrong_option_fails_at_start_up_of_fairseq_train(workspace, tmp_path, extra, expected):
    data, extra, expected = _resolve(workspace, extra, expected)
    save = tmp_path / "save"
    proc = run_cli(train_args(data, save, *extra, max_update=2), check=False, timeout=300)
    out = proc.stdout
    assert proc.returncode != 0, f"accepted: {extra}\n{out[-1500:]}"
    errors = [line for line in out.splitlines() if ERROR_LINE.match(line)]
    assert errors, out[-2000:]
    # fairseq re-raises a failed checkpoint load as a bare Exception naming the file;
    # ours is the one above it in the chained traceback
    assert any(expected in line for line in errors), f"no error line names it: {errors}"
    # at start-up: no step, no checkpoint
    assert "| train_inner |" not in out and "begin training epoch" not in out
    assert not (save.exists() and list(save.glob("checkpoint*.pt")))
    # the failure is ours, not a deep one from fairseq or torch
    assert not re.search(r"^(RuntimeError|KeyError|IndexError|AttributeError|TypeError)", errors[-1])
