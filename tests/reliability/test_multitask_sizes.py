"""Seed 004's heads cannot make a loader allocate more than the checkpoint's own weights.

``--task multitask`` adds its heads where fairseq builds the model, sized by the task's config
(``head_hidden_dim``, ``num_sentiment_classes``). A 30 MB checkpoint whose config says 10**9
made every loader try to allocate 0.5-3 TB. The sizes are checked, with the model's, in
``checkpoint_sizes.check_sizes`` before anything is built: against a ceiling given next to each
option (``bounds`` in the dataclass field's metadata) and against the heads' weights in the
file, which the task builds on the meta device. Every loader runs here under a memory cap.
"""

import sys
import textwrap

import pytest
import torch

import fairseq_clear  # noqa: F401
from fairseq_clear.checkpoint_safety import safe_load
from fairseq_clear.checkpoint_sizes import CheckpointSizeError, check_sizes
from helpers import bin_path, run_captured, run_cli, train_args
from multitask_helpers import make_multitask_data
from multitask_helpers import train_args as multitask_train_args

#: the module fixture is built once: every test of this file on one pytest-xdist worker
pytestmark = pytest.mark.xdist_group("test_multitask_sizes")

MEMORY_CAP = 3 * 2**30


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(multitask checkpoint, its data directory, the tokenizer's binarized data) after one update."""
    root = tmp_path_factory.mktemp("mt_sizes")
    data = make_multitask_data(root)
    run_cli(multitask_train_args(data, root / "ck", max_update=1, max_epoch=1))
    return root / "ck" / "checkpoint_last.pt", data, root / "spm"


def _crafted(checkpoint, out, section="task", **fields):
    state = safe_load(checkpoint)
    for key, value in fields.items():
        state["cfg"][section][key] = value
    torch.save(state, out)
    return out


#: (config fields, the words the refusal names)
BOMBS = {
    "hidden-1e9": (dict(head_hidden_dim=10**9), "head_hidden_dim is 1000000000: outside 1..65536"),
    "classes-1e9": (dict(num_sentiment_classes=10**9), "num_sentiment_classes is 1000000000: outside"),
    # under the ceiling: the weights' heads are 768 wide, so 30000 (1.8G parameters) is refused by shape
    "hidden-30000": (dict(head_hidden_dim=30000), "classification_heads.sentiment.dense.weight of shape (30000,"),
    "classes-500": (dict(num_sentiment_classes=500), "classification_heads.sentiment.out_proj.weight of shape (500,"),
    "hidden-text": (dict(head_hidden_dim="768"), "head_hidden_dim is '768': not an integer"),
    "dropout-nan": (dict(head_dropout=float("nan")), "head_dropout is nan: outside"),
    "tasks": (dict(tasks="sentiment,evil"), "--tasks must name each of"),
}


@pytest.mark.parametrize("bomb", sorted(BOMBS))
def test_check_sizes_refuses_head_sizes_before_anything_is_built(trained, tmp_path, bomb):
    checkpoint, _, _ = trained
    fields, words = BOMBS[bomb]
    evil = _crafted(checkpoint, tmp_path / "evil.pt", **fields)
    with pytest.raises(CheckpointSizeError, match="refusing checkpoint") as e:
        check_sizes(torch.load(evil, map_location="cpu", weights_only=True, mmap=True), str(evil))
    assert words in str(e.value), str(e.value)
    check_sizes(torch.load(checkpoint, map_location="cpu", weights_only=True, mmap=True), str(checkpoint))


def test_heads_missing_from_the_weights_count_against_the_file(trained, tmp_path):
    """Without head weights to compare, the heads the config describes must fit the file."""
    checkpoint, _, _ = trained
    state = safe_load(checkpoint)
    state["model"] = {k: v for k, v in state["model"].items() if not k.startswith("classification_heads.")}
    state["cfg"]["task"]["head_hidden_dim"] = 60000  # under the ceiling: 3 x 60000² parameters
    with pytest.raises(CheckpointSizeError, match="describes a model of"):
        check_sizes(state, "x.pt")
    state["cfg"]["task"]["head_hidden_dim"] = 768  # the seed's heads, built fresh: fine
    check_sizes(state, "x.pt")


def test_the_ceilings_are_the_options_own():
    """One list: the bounds live next to each option, and the start-up check reads the same ones."""
    from fairseq_clear.checkpoint_sizes import bounds
    from fairseq_clear.tasks.multitask import MAX_SENTIMENT_CLASSES, MultitaskConfig

    found = bounds(MultitaskConfig)
    assert found["head_hidden_dim"][1] == 65536 and found["num_sentiment_classes"] == (0, MAX_SENTIMENT_CLASSES)
    assert found["head_dropout"] == (0.0, 1.0)


def _loader_commands(evil_dir, evil, data, spm, tmp_path):
    from embedding_helpers import write_senteval_tree, write_stsb

    (tmp_path / "in.txt").write_text("a sentence\n", encoding="utf-8")
    stsb = write_stsb(tmp_path / "sts-train.tsv", n=12)
    sts = write_senteval_tree(tmp_path / "sts")
    ck = ["--checkpoint", evil, "--data", data, "--cpu"]
    hub = textwrap.dedent(f"""
        from fairseq_clear.models import ClearRobertaModel
        ClearRobertaModel.from_pretrained({str(evil_dir)!r}, {evil.name!r}, {str(data)!r})
    """)
    return {
        "hub": [sys.executable, "-c", hub],
        "clear-embed": [bin_path("clear-embed"), *ck, "--input", tmp_path / "in.txt", "--output", tmp_path / "o.npy"],
        "clear-eval-sts": [bin_path("clear-eval-sts"), *ck, "--sts-dir", sts, "--tasks", "STS-B",
                           "--output", tmp_path / "o.json"],
        "clear-export-hf": [bin_path("clear-export-hf"), *ck, "--out", tmp_path / "export"],
        "clear-mine-negatives": [sys.executable, "-m", "fairseq_clear.cli.mine_negatives", "--train", stsb,
                                 "--format", "stsb", *ck, "--out", tmp_path / "mined.csv"],
        "clear-eval-senteval": [sys.executable, "-m", "fairseq_clear.cli.eval_senteval", *ck, "--sts-dir", sts,
                                "--tasks", "STS-B", "--output", tmp_path / "se.json"],
        "clear-eval-multitask": [sys.executable, "-m", "fairseq_clear.cli.eval_multitask", evil, "--data", data],
        "guide-model": train_args(spm, tmp_path / "save", "--guide-model", evil_dir, "--guide-checkpoint",
                                  evil.name, max_update=1),
    }


LOADERS = ["hub", "clear-embed", "clear-eval-sts", "clear-export-hf", "clear-mine-negatives", "clear-eval-senteval",
           "clear-eval-multitask", "guide-model"]


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize("bomb", ["hidden-1e9", "classes-1e9", "hidden-30000"])
def test_every_loader_refuses_the_head_bombs_under_a_memory_cap(trained, tmp_path, loader, bomb):
    checkpoint, data, spm = trained
    evil_dir = tmp_path / "evil"
    evil_dir.mkdir()
    evil = _crafted(checkpoint, evil_dir / "model.pt", **BOMBS[bomb][0])
    args = _loader_commands(evil_dir, evil, data, spm, tmp_path)[loader]
    proc = run_captured(args, memory_cap=MEMORY_CAP)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-2000:]
    assert "refusing checkpoint" in out and BOMBS[bomb][1] in out, out[-3000:]
    assert "MemoryError" not in out and "can't allocate" not in out
    if loader.startswith("clear-"):  # one error line, no traceback
        assert proc.returncode == 2 and "Traceback" not in out, out[-3000:]
        assert out.strip().splitlines()[-1].startswith("error: "), out[-2000:]


def test_start_up_refuses_the_same_values_naming_the_option(trained, tmp_path):
    _, data, _ = trained
    proc = run_captured(multitask_train_args(data, tmp_path / "s", "--head-hidden-dim", "1000000000", max_update=1),
                        memory_cap=MEMORY_CAP)
    assert proc.returncode != 0
    assert "--head-hidden-dim 1000000000: outside 1..65536" in proc.stdout + proc.stderr
    assert not (tmp_path / "s" / "checkpoint_last.pt").exists()


def test_a_class_count_in_the_data_outside_the_bounds_is_refused(trained, tmp_path):
    """Loading with --num-sentiment-classes 0 reads DATA/multitask.json's count: it is bounded too."""
    import json
    import shutil

    _, data, _ = trained
    copy = tmp_path / "mt"
    shutil.copytree(data, copy)
    meta = json.loads((copy / "multitask.json").read_text())
    meta["tasks"]["sentiment"]["num_classes"] = 10**9
    (copy / "multitask.json").write_text(json.dumps(meta))
    proc = run_captured(multitask_train_args(copy, tmp_path / "s", max_update=1), memory_cap=MEMORY_CAP)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "sentiment class count 1000000000 is not an integer in 2.." in out, out[-2000:]


def test_average_ensemble_of_different_class_counts_is_one_line(trained, tmp_path):
    """clear-eval-multitask --ensemble average of a 5-class and a 2-class checkpoint gave numpy's
    'inhomogeneous shape' traceback."""
    checkpoint, data, _ = trained
    state = safe_load(checkpoint)
    state["model"]["classification_heads.sentiment.out_proj.weight"] = torch.randn(5, 768)
    state["model"]["classification_heads.sentiment.out_proj.bias"] = torch.randn(5)
    state["cfg"]["task"]["num_sentiment_classes"] = 5
    torch.save(state, tmp_path / "five.pt")
    proc = run_captured([sys.executable, "-m", "fairseq_clear.cli.eval_multitask", tmp_path / "five.pt",
                         checkpoint, "--data", data, "--ensemble", "average"])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: --ensemble average") and "sentiment" in last and "(32, 2), (32, 5)" in last, last
