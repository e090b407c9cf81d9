"""examples/distill/run.sh (issue 44 item 2): a teacher imported from a Hugging Face folder distilled
into a student of its first layers on a plain text file, exported for sentence-transformers."""

import math

import pytest
import torch

from fairseq_clear.checkpoint_safety import safe_load
from helpers import REPO, run_cli

pytestmark = pytest.mark.xdist_group("test_distill_recipe")


def _encoder(path):
    """The encoder's tensors of a fairseq checkpoint (an import's LM head is fresh, so random)."""
    state = safe_load(str(path))["model"]
    return {k: v for k, v in state.items() if k.startswith("encoder.sentence_encoder.")}


def test_the_recipe_distils_a_teacher_into_its_first_layers(tmp_path):
    from hf_standins import make_bert, saved_by_sentence_transformers, varied_sentences
    from sentence_transformers import SentenceTransformer

    from fairseq_clear.evaluation.training_log import records
    from fairseq_clear.export.from_hf import import_hf

    # a 2-layer sentence-transformers stand-in for all-MiniLM-L6-v2 (mean pooling, Normalize)
    teacher = saved_by_sentence_transformers(make_bert(tmp_path / "bert", lm_head=False), tmp_path / "teacher")
    corpus = tmp_path / "corpus.txt"
    # 64 training sentences (8 go to valid): batches of 16, none of one sentence, which has no candidate
    corpus.write_text("\n".join(varied_sentences(87)[15:]) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    # the teacher imported here, in-process (the recipe skips an import it finds: its clear-import-hf
    # line is pretrained/run.sh's), so that the guide's weights can be compared after training
    import_hf(str(teacher), str(out / "teacher"))
    before = _encoder(out / "teacher/model.pt")
    result = run_cli(["bash", REPO / "examples/distill/run.sh", corpus, out, "--batch-size", "16", "--log-interval", "1"], cwd=tmp_path,
            env={"CPU": "1", "MAX_UPDATE": "2", "STUDENT_LAYERS": "1", "TEACHER": str(teacher),
                 "PREPARE_ARGS": "--workers 1 --valid-size 8 --test-size 0",
                 "PYTHONPATH": str(REPO)})

    # the export: a 1-layer student that sentence-transformers loads and runs
    st = SentenceTransformer(str(out / "export"), device="cpu")
    assert st[0].auto_model.config.num_hidden_layers == 1
    v = st.encode(["a man plays guitar", "the weather was cold"])
    assert v.shape == (2, 32) and abs(float((v[0] ** 2).sum()) - 1) < 1e-4
    # the distillation term was trained: logged, finite, nonzero at every update
    with open(out / "checkpoints/train.log", encoding="utf-8") as f:
        logged = [r for r in records(f) if "kd_loss" in r]
    assert [int(r["num_updates"]) for r in logged] == [1, 2], logged
    assert all(math.isfinite(float(r["kd_loss"])) and float(r["kd_loss"]) > 0 for r in logged), logged
    # the recipe says which warm-up replaces SimCSE's (6% of MAX_UPDATE=2: 0) and where the lr came from
    assert "recipe: warmup 0 instead (6% of the updates" in result.stdout, result.stdout[-3000:]
    assert "lr 1e-3 (the distillation recipe's" in result.stdout
    # the measured distillation settings (BENCHMARKS §12c): the MSE beside the KL, on the pooled vector
    # (no projection head), lr 1e-3 named as the recipe's, and no warning that it is a from-scratch lr
    assert all(math.isfinite(float(r["kd_mse"])) and float(r["kd_mse"]) > 0 for r in logged), logged
    log = (out / "checkpoints/train.log").read_text(encoding="utf-8")
    assert "'lr': [0.001]" in log and "'distill_mse_weight': 1000.0" in log and "from-scratch" not in log
    assert not any(k.startswith("projection_head.") for k in safe_load(str(out / "checkpoints/checkpoint_last.pt"))["model"])
    # the guide is unchanged by training; the student started from its first layer and moved
    guide = _encoder(out / "teacher/model.pt")
    assert guide.keys() == before.keys() and all(torch.equal(guide[k], before[k]) for k in guide)
    student = _encoder(out / "checkpoints/checkpoint_last.pt")
    first = "encoder.sentence_encoder.layers.0.fc1.weight"
    assert "encoder.sentence_encoder.layers.1.fc1.weight" not in student
    assert student[first].shape == guide[first].shape and not torch.equal(student[first], guide[first])


def test_keeping_layers_renumbers_them_keeps_the_head_and_refuses_a_layer_the_checkpoint_lacks():
    """--encoder-layers-to-keep on a checkpoint: the kept layers renumbered from 0, the projection head's
    own ".layers.N." keys kept (fairseq's prune_state_dict drops them), a checkpoint already cut (a
    resume) as it is, a missing layer named."""
    from argparse import Namespace

    from fairseq_clear.models.clear_roberta import EncoderShapeError, keep_encoder_layers

    enc = "encoder.sentence_encoder.layers."
    teacher = {f"{enc}{i}.fc1.weight": torch.full((1,), float(i)) for i in range(3)}
    teacher["projection_head.layers.0.weight"] = torch.ones(1)
    state, args = dict(teacher), Namespace(encoder_layers_to_keep="1,2")
    keep_encoder_layers(args, state)
    assert sorted(state) == [f"{enc}0.fc1.weight", f"{enc}1.fc1.weight", "projection_head.layers.0.weight"]
    assert state[f"{enc}0.fc1.weight"].item() == 1 and state[f"{enc}1.fc1.weight"].item() == 2
    assert args.encoder_layers_to_keep is None  # the saved model has its own layers alone
    resumed = dict(state)
    keep_encoder_layers(Namespace(encoder_layers_to_keep="1,2"), resumed)
    assert {k: v.item() for k, v in resumed.items()} == {k: v.item() for k, v in state.items()}
    with pytest.raises(EncoderShapeError, match=r"--encoder-layers-to-keep 0,5: the checkpoint's encoder has 3 layers"):
        keep_encoder_layers(Namespace(encoder_layers_to_keep="0,5"), dict(teacher))
