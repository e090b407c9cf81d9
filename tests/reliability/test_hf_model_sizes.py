"""A Hugging Face directory's config.json cannot make us allocate more than its weights need.

transformers builds the model from config.json before it reads the weights: ``intermediate_size =
10**9`` in a tiny BERT's config made ``clear-eval-sts --model`` (and the verification of
``clear-import-hf``) try to allocate 128 GB. One check (checkpoint_sizes.check_hf_sizes) compares
config.json's sizes with the weights' shapes read from the safetensors header, and with ceilings,
before anything is built. Every command runs under an address-space cap set here, so an unchecked
size fails the test (MemoryError, a kill) instead of taking the machine down.
"""

import json
import shutil
import struct

import pytest

from embedding_helpers import write_senteval_tree
from hf_standins import make_bert
from helpers import bin_path, run_captured

pytest.importorskip("transformers")

#: the cap of every process here: the tiny stand-in needs far less, a bomb far more
MEMORY_CAP = 4 * 2**30


def _run(args):
    return run_captured(args, memory_cap=MEMORY_CAP)


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return make_bert(tmp_path_factory.mktemp("sizes") / "bert")


#: config.json field -> a value the tiny stand-in's weights do not have (each a memory bomb)
BOMBS = {"intermediate_size": 10**9, "max_position_embeddings": 10**9, "num_hidden_layers": 100000,
         "hidden_size": 10**6, "vocab_size": 10**9, "type_vocab_size": 10**9}


def _bombed(bert, model, field, value):
    shutil.copytree(bert, model)
    cfg = json.loads((model / "config.json").read_text())
    cfg[field] = value
    (model / "config.json").write_text(json.dumps(cfg))
    return model


def _one_error_line(proc, *needles):
    assert "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    assert len(errors) == 1 and all(n in errors[0] for n in needles), proc.stderr[-3000:]


@pytest.mark.parametrize("field", sorted(BOMBS))
def test_eval_sts_model_refuses_config_sizes_its_weights_do_not_have(bert, tmp_path, field):
    model = _bombed(bert, tmp_path / "model", field, BOMBS[field])
    tree = write_senteval_tree(tmp_path / "sts")
    _one_error_line(_run([bin_path("clear-eval-sts"), "--model", model, "--cpu", "--sts-dir", tree,
                          "--tasks", "STS-B", "--output", tmp_path / "o.json"]),
                    str(model / "config.json"), field)
    assert not (tmp_path / "o.json").exists()


def test_eval_sts_sentence_transformers_dir_is_checked_too(bert, tmp_path):
    """The Transformer module's config.json of a sentence-transformers directory (here its root)."""
    model = _bombed(bert, tmp_path / "model", "type_vocab_size", 10**9)
    (model / "modules.json").write_text(json.dumps(
        [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
         {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    (model / "1_Pooling").mkdir()
    (model / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": 32, "pooling_mode_mean_tokens": True}))
    tree = write_senteval_tree(tmp_path / "sts")
    _one_error_line(_run([bin_path("clear-eval-sts"), "--model", model, "--cpu", "--sts-dir", tree,
                          "--tasks", "STS-B", "--output", tmp_path / "o.json"]),
                    str(model / "config.json"), "type_vocab_size")


@pytest.mark.parametrize("field", ["intermediate_size", "type_vocab_size", "max_position_embeddings"])
def test_import_hf_refuses_config_sizes_naming_config_json(bert, tmp_path, field):
    model = _bombed(bert, tmp_path / "model", field, BOMBS[field])
    _one_error_line(_run([bin_path("clear-import-hf"), model, tmp_path / "out"]), str(model / "config.json"), field)
    assert not (tmp_path / "out").exists()


def _safetensors(path, header, data=b""):
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


def test_a_header_that_claims_more_than_the_file_holds_is_refused(bert, tmp_path):
    """Shapes are believed only when the file holds their bytes: a 100-byte file claiming a
    4M-row embedding (matching its config, under the ceiling) is refused, naming the weights file."""
    from fairseq_clear.checkpoint_sizes import CheckpointSizeError, check_hf_sizes

    model = _bombed(bert, tmp_path / "model", "vocab_size", 4_000_000)
    (model / "model.safetensors").unlink()
    _safetensors(model / "model.safetensors", {"bert.embeddings.word_embeddings.weight": {
        "dtype": "F32", "shape": [4_000_000, 32], "data_offsets": [0, 128]}}, b"\0" * 128)
    with pytest.raises(CheckpointSizeError, match="not backed by the file's bytes") as e:
        check_hf_sizes(str(model))
    assert str(model / "model.safetensors") in str(e.value)


def test_a_config_much_larger_than_its_weights_is_refused(bert, tmp_path):
    """Without the layers to compare with, the model config.json describes must fit the file."""
    from safetensors.torch import load_file, save_file

    from fairseq_clear.checkpoint_sizes import CheckpointSizeError, check_hf_sizes

    model = _bombed(bert, tmp_path / "model", "num_hidden_layers", 200)
    cfg = json.loads((model / "config.json").read_text())
    cfg.update(hidden_size=4096, num_attention_heads=32, intermediate_size=16384)
    (model / "config.json").write_text(json.dumps(cfg))
    sd = {k: v for k, v in load_file(str(model / "model.safetensors")).items() if "embeddings." not in k
          and ".layer." not in k}
    save_file(sd, str(model / "model.safetensors"))
    with pytest.raises(CheckpointSizeError, match="describe a model of"):
        check_hf_sizes(str(model))
    check_hf_sizes(str(bert))  # the real one passes


def test_unknown_model_types_are_refused_not_built(bert, tmp_path):
    from fairseq_clear.checkpoint_sizes import CheckpointSizeError, check_hf_sizes

    model = _bombed(bert, tmp_path / "model", "model_type", "gpt2")
    with pytest.raises(CheckpointSizeError, match="model_type 'gpt2'"):
        check_hf_sizes(str(model))
