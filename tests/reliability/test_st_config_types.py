"""sentence-transformers config files of the wrong type or size are refused, naming the file and field.

``"pooling_mode_mean_tokens": "yes"`` (or a list, or a number) was taken as mean pooling, and
``sentence_bert_config.json``'s ``max_seq_length`` as a string or 10**12 was accepted, by both
``clear-import-hf`` and ``clear-eval-sts --model``; now each ends in one ``error:`` line naming the
file and the field (``max_seq_length`` bounded by the model's positions: 128 in the stand-in).
"""

import json
import shutil

import pytest

from embedding_helpers import write_senteval_tree
from hf_standins import make_bert
from helpers import bin_path, run_captured

pytest.importorskip("transformers")

POOLING = {"word_embedding_dimension": 32, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
           "pooling_mode_max_tokens": False, "include_prompt": True}

#: case -> (file under the model directory, the fields changed, the field the error must name)
CASES = {
    "mean-flag-a-string": ("1_Pooling/config.json", {"pooling_mode_mean_tokens": "yes"}, "pooling_mode_mean_tokens"),
    "mean-flag-a-list": ("1_Pooling/config.json", {"pooling_mode_mean_tokens": [True]}, "pooling_mode_mean_tokens"),
    "max-flag-a-number": ("1_Pooling/config.json", {"pooling_mode_max_tokens": 0.5}, "pooling_mode_max_tokens"),
    "pooling-mode-a-number": ("1_Pooling/config.json", {"pooling_mode": 5}, "pooling_mode"),
    "dimension-a-string": ("1_Pooling/config.json", {"word_embedding_dimension": "32"}, "word_embedding_dimension"),
    "dimension-not-the-width": ("1_Pooling/config.json", {"word_embedding_dimension": 64}, "word_embedding_dimension"),
    "max-seq-length-a-string": ("sentence_bert_config.json", {"max_seq_length": "128"}, "max_seq_length"),
    "max-seq-length-huge": ("sentence_bert_config.json", {"max_seq_length": 10**12}, "max_seq_length"),
    "max-seq-length-past-positions": ("sentence_bert_config.json", {"max_seq_length": 129}, "max_seq_length"),
    "do-lower-case-a-string": ("sentence_bert_config.json", {"do_lower_case": "false"}, "do_lower_case"),
}
#: what clear-import-hf checks: every case but the pooling width (it reads the pooling mode and max_seq_length)
IMPORT_CASES = [c for c in CASES if c != "dimension-not-the-width"]
EVAL_CASES = ["mean-flag-a-string", "pooling-mode-a-number", "dimension-not-the-width", "max-seq-length-huge",
              "max-seq-length-past-positions"]


@pytest.fixture(scope="module")
def st(tmp_path_factory):
    """A sentence-transformers layout of the tiny BERT stand-in: Transformer (the root) -> mean Pooling."""
    model = make_bert(tmp_path_factory.mktemp("st_types") / "st")
    (model / "modules.json").write_text(json.dumps(
        [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
         {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    (model / "1_Pooling").mkdir()
    (model / "1_Pooling" / "config.json").write_text(json.dumps(POOLING))
    (model / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128, "do_lower_case": False}))
    return model


def _damaged(st, model, case):
    shutil.copytree(st, model)
    name, fields, _ = CASES[case]
    cfg = json.loads((model / name).read_text())
    cfg.update(fields)
    (model / name).write_text(json.dumps(cfg))
    return str(model / name)


def _run(args):
    return run_captured(args)


def _one_error_line(proc, *needles):
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    assert len(errors) == 1 and all(n in errors[0] for n in needles), proc.stderr[-3000:]


@pytest.mark.parametrize("case", IMPORT_CASES)
def test_import_hf_refuses_wrong_types(st, tmp_path, case):
    from fairseq_clear.export.from_hf import SentenceTransformersConfigError, import_hf

    named = _damaged(st, tmp_path / "model", case)
    with pytest.raises(SentenceTransformersConfigError) as e:
        import_hf(str(tmp_path / "model"), str(tmp_path / "out"))
    assert named in str(e.value) and f"'{CASES[case][2]}'" in str(e.value), str(e.value)
    assert not (tmp_path / "out").exists()


def test_import_hf_cli_names_file_and_field(st, tmp_path):
    named = _damaged(st, tmp_path / "model", "mean-flag-a-string")
    _one_error_line(_run([bin_path("clear-import-hf"), tmp_path / "model", tmp_path / "out"]),
                    named, "pooling_mode_mean_tokens")


def test_import_hf_accepts_the_right_types(st, tmp_path):
    from fairseq_clear.export.from_hf import import_hf

    assert import_hf(str(st), str(tmp_path / "out"))["options"]["pretrained_pooling"] == "mean"


@pytest.mark.parametrize("case", EVAL_CASES)
def test_eval_sts_model_refuses_wrong_types(st, tmp_path, case):
    named = _damaged(st, tmp_path / "model", case)
    tree = write_senteval_tree(tmp_path / "sts")
    _one_error_line(_run([bin_path("clear-eval-sts"), "--model", tmp_path / "model", "--cpu", "--sts-dir", tree,
                          "--tasks", "STS-B", "--output", tmp_path / "o.json"]), named, CASES[case][2])
    assert not (tmp_path / "o.json").exists()
