"""A sentence-transformers model's Dense modules and include_prompt false survive clear-import-hf,
embed(), training and clear-export-hf.

Before, the import refused both in one line: a folder with ``2_Dense`` (LaBSE: Pooling -> Dense ->
Normalize) and a Pooling config with ``include_prompt: false`` (the default prompt's tokens left out of
the pooling). Here a tiny BERT saved by sentence-transformers with mean pooling, a Dense layer (tanh,
32 -> 16) and Normalize, and a tiny XLM-R with a default prompt and include_prompt false, go through the
import (its check compares with sentence-transformers' ``encode()``), ``embed()``, a training step and
the export, each compared with ``encode()`` of the source (cosine >= 0.9999).
"""

import json
import shutil

import numpy as np
import pytest
import torch

from hf_standins import make_bert, make_xlmr

pytest.importorskip("sentence_transformers")
pytestmark = pytest.mark.xdist_group("test_st_dense_and_prompt")

SENTENCES = ["A man is playing a guitar.", "A Capitalised Sentence About Zürich.", "",
             " ".join(["the quick brown fox jumps over the lazy dog"] * 20), "plain words"]


def _cosines(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def _st(source, out, pooling="mean", dense=(), normalize=False, **pooling_options):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Dense, Normalize, Pooling, Transformer

    torch.manual_seed(0)
    encoder = Transformer(str(source), max_seq_length=64)  # the long sentence is cut, prompt included
    modules = [encoder, Pooling(encoder.get_embedding_dimension(), pooling, **pooling_options)]
    width = encoder.get_embedding_dimension()
    for out_features, activation in dense:
        modules.append(Dense(width, out_features, activation_function=activation))
        width = out_features
    SentenceTransformer(modules=modules + ([Normalize()] if normalize else []), device="cpu").save(str(out))
    return out


@pytest.fixture(scope="module")
def dense_import(tmp_path_factory):
    """(source: BERT -> mean -> Dense(tanh, 32 -> 16) -> Dense(identity, 16 -> 12) -> Normalize, its encode(),
    the import's summary, its folder, its hub)."""
    from sentence_transformers import SentenceTransformer

    from fairseq_clear.export.from_hf import import_hf
    from fairseq_clear.models.hub_interface import from_pretrained

    root = tmp_path_factory.mktemp("dense")
    source = _st(make_bert(root / "bert"), root / "st", dense=((16, torch.nn.Tanh()), (12, torch.nn.Identity())),
                 normalize=True)
    want = SentenceTransformer(str(source), device="cpu").encode(SENTENCES, convert_to_numpy=True)
    summary = import_hf(str(source), str(root / "imported"))  # its check: embed() against encode()
    return source, want, summary, root / "imported", from_pretrained(str(root / "imported"), "model.pt", ".")


def test_dense_modules_are_imported_into_the_sentence_embedding(dense_import):
    source, want, summary, folder, hub = dense_import
    assert summary["options"]["sentence_dense"] == "16:tanh,12:linear"
    assert summary["options"]["sentence_normalize"] is True
    assert summary["max_difference"] is not None and summary["max_difference"] < 1e-4
    assert "--sentence-dense 16:tanh,12:linear" in (folder / "fairseq_args.txt").read_text()
    from fairseq_clear.checkpoint_safety import safe_load

    state = safe_load(folder / "model.pt")["model"]
    assert {k: tuple(v.shape) for k, v in state.items() if k.startswith("sentence_dense.")} == {
        "sentence_dense.layers.0.linear.weight": (16, 32), "sentence_dense.layers.0.linear.bias": (16,),
        "sentence_dense.layers.1.linear.weight": (12, 16), "sentence_dense.layers.1.linear.bias": (12,)}
    got = hub.embed(SENTENCES)
    assert got.shape == (len(SENTENCES), 12) and hub.dim == 12
    assert _cosines(got, want).min() >= 0.9999
    # clear-eval-sts and clear-embed go through the same loop
    from fairseq_clear.evaluation.sts.scoring import hub_encoder

    np.testing.assert_allclose(hub_encoder(hub, ("mean",))(SENTENCES)["mean"],
                               hub.embed(SENTENCES, normalize=False), atol=1e-5)


def test_the_export_writes_the_dense_modules_back(dense_import, tmp_path):
    from sentence_transformers import SentenceTransformer

    from fairseq_clear.export.hf import CHECK_SENTENCES, export

    _, want, _, _, hub = dense_import
    export(hub, str(tmp_path / "out"), check_sentences=CHECK_SENTENCES, onnx=has_onnx())  # ONNX checked against embed()
    modules = json.loads((tmp_path / "out" / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[1] for m in modules] == ["Transformer", "Pooling", "Dense", "Dense", "Normalize"]
    config = json.loads((tmp_path / "out" / "2_Dense" / "config.json").read_text())
    assert config["activation_function"] == "torch.nn.modules.activation.Tanh" and config["out_features"] == 16
    assert (tmp_path / "out" / "2_Dense" / "model.safetensors").is_file()
    card = (tmp_path / "out" / "README.md").read_text()  # what the model was before the plugin touched it
    assert "Dense layers 16:tanh,12:linear" in card and "then its Dense layers" in card
    got = SentenceTransformer(str(tmp_path / "out"), device="cpu").encode(SENTENCES, convert_to_numpy=True)
    assert _cosines(got, want).min() >= 0.9999
    if has_onnx():  # the Dense layers are in the ONNX graph's sentence_embedding
        from fairseq_clear.export.onnx import session

        sess = session(tmp_path / "out" / "onnx" / "model.onnx")
        assert sess.get_outputs()[1].name == "sentence_embedding" and sess.get_outputs()[1].shape[-1] == 12


def has_onnx():
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("onnx", "onnxruntime"))


def test_a_pytorch_model_bin_dense_is_read_weights_only(dense_import, tmp_path):
    """A Dense saved as pytorch_model.bin (sentence-transformers' safe_serialization=False) is read with
    torch.load(weights_only=True), to the same layer."""
    from safetensors.torch import load_file

    from fairseq_clear.export.from_hf import read_dense

    source = shutil.copytree(dense_import[0], tmp_path / "st")
    weights = source / "2_Dense" / "model.safetensors"
    torch.save(load_file(str(weights)), source / "2_Dense" / "pytorch_model.bin")
    weights.unlink()
    (spec, got), _ = read_dense(str(source))
    assert (spec.out_features, spec.activation, spec.bias) == (16, "tanh", True)
    (_, want), _ = read_dense(str(dense_import[0]))
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)


def test_a_training_step_keeps_the_dense_layers_in_the_checkpoint(dense_import, tmp_path):
    """A contrastive step from the import (in-process: its fairseq_args.txt, the model built by --task clear):
    the Dense layers are trained with the encoder, the projection head sits on their output, and the saved
    state has them under the same names and shapes."""
    from fairseq import checkpoint_utils, tasks
    from harness.runs import training_config

    _, _, _, folder, hub = dense_import
    words = (folder / "fairseq_args.txt").read_text().split()[2:]  # without --arch clear_roberta
    cfg = training_config(folder, *words, "--augmentations", "dropout", "--projection-layers", "2", arch="clear_roberta")
    task = tasks.setup_task(cfg.task)
    model = task.build_model(cfg.model)
    state = checkpoint_utils.load_checkpoint_to_cpu(str(folder / "model.pt"))["model"]
    model.load_state_dict(state, model_cfg=cfg.model)
    assert model.projection_head.layers[0].in_features == 12
    src = hub.tokenizer.encode(SENTENCES[:2])
    batch = torch.full((4, max(len(t) for t in src)), task.source_dictionary.pad())
    for i, t in enumerate(src + src):
        batch[i, :len(t)] = t
    model.train()
    z, _ = model(batch, contrastive=True)
    z = torch.nn.functional.normalize(z, dim=-1)
    loss = torch.nn.functional.cross_entropy(z[:2] @ z[2:].T / 0.05, torch.arange(2))
    loss.backward()
    grad = model.sentence_dense.layers[0].linear.weight.grad
    assert grad is not None and float(grad.abs().sum()) > 0
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    saved = tmp_path / "checkpoint.pt"
    torch.save({"model": model.state_dict()}, saved)
    after = torch.load(saved, weights_only=True)["model"]
    assert {k: tuple(v.shape) for k, v in after.items() if k.startswith("sentence_dense.")} == \
        {k: tuple(v.shape) for k, v in state.items() if k.startswith("sentence_dense.")}
    assert not torch.equal(after["sentence_dense.layers.0.linear.weight"],
                           state["sentence_dense.layers.0.linear.weight"])


@pytest.mark.parametrize("change, named", [
    ({"activation_function": "os.system"}, "activation_function"),
    ({"activation_function": "torch.nn.modules.activation.Softmax"}, "activation_function"),
    ({"out_features": 10 ** 9}, "out_features"),
    ({"in_features": 17}, "in_features"),
    ({"use_residual": True}, "use_residual"),
])
def test_a_hostile_dense_config_is_one_line_and_nothing_is_built(dense_import, tmp_path, change, named):
    from fairseq_clear.errors import FairseqClearError
    from fairseq_clear.export.from_hf import import_hf

    source = shutil.copytree(dense_import[0], tmp_path / "st")
    path = source / "2_Dense" / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **change}))
    with pytest.raises(FairseqClearError) as e:
        import_hf(str(source), str(tmp_path / "out"))
    message = str(e.value)
    assert str(path) in message and named in message and "\n" not in message
    assert str(change[named]) in message
    assert not (tmp_path / "out").exists()


def test_dense_weights_that_are_not_the_configs_sizes_are_refused_before_loading(dense_import, tmp_path):
    from safetensors.torch import save_file

    from fairseq_clear.errors import FairseqClearError
    from fairseq_clear.export.from_hf import import_hf

    source = shutil.copytree(dense_import[0], tmp_path / "st")
    save_file({"linear.weight": torch.zeros(8, 32), "linear.bias": torch.zeros(8)},
              str(source / "2_Dense" / "model.safetensors"))
    with pytest.raises(FairseqClearError) as e:
        import_hf(str(source), str(tmp_path / "out"))
    assert "2_Dense" in str(e.value) and "(16, 32)" in str(e.value) and "\n" not in str(e.value)


def test_a_checkpoint_whose_dense_option_is_not_its_weights_is_refused(dense_import, tmp_path):
    """The option bounds what is built: a config saying 100000-wide Dense layers over 16-wide weights
    is refused by the size check, before the model is built."""
    from fairseq_clear.checkpoint_safety import safe_load
    from fairseq_clear.checkpoint_sizes import CheckpointSizeError, check_sizes

    state = safe_load(dense_import[3] / "model.pt")
    state["cfg"]["model"].sentence_dense = "60000:tanh,12:linear"
    with pytest.raises(CheckpointSizeError) as e:
        check_sizes(state, "model.pt")
    assert "sentence_dense" in str(e.value) and "(60000, 32)" in str(e.value)
    state["cfg"]["model"].sentence_dense = "16:os.system"
    with pytest.raises(CheckpointSizeError) as e:
        check_sizes(state, "model.pt")
    assert "--sentence-dense" in str(e.value) and "os.system" in str(e.value)


def test_clear_glue_model_args_carry_the_dense_layers(dense_import):
    from fairseq_clear.continued import model_args

    words = model_args(str(dense_import[3] / "model.pt"))
    assert words[words.index("--sentence-dense") + 1] == "16:tanh,12:linear"


#: the default prompt, whose tokens the source's Pooling leaves out (include_prompt false)
PROMPTS = {"query": "query: ", "passage": "passage: "}


@pytest.fixture(scope="module")
def xlmr(tmp_path_factory):
    return make_xlmr(tmp_path_factory.mktemp("xlmr") / "xlmr")


def test_include_prompt_false_is_imported_embedded_and_exported(xlmr, tmp_path):
    """Mean pooling through the import, embed() and the export; every other mode of the table through embed()
    against the same source pooled that way (cls takes the first token after the prompt, lasttoken </s>)."""
    from sentence_transformers import SentenceTransformer

    from fairseq_clear.export.from_hf import import_hf
    from fairseq_clear.export.hf import export
    from fairseq_clear.models.hub_interface import from_pretrained
    from fairseq_clear.models.pooling import POOLINGS

    source = _st(xlmr, tmp_path / "st", include_prompt=False)
    path = source / "config_sentence_transformers.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "prompts": PROMPTS, "default_prompt_name": "query"}))
    st = SentenceTransformer(str(source), device="cpu")
    want = st.encode(SENTENCES, convert_to_numpy=True, prompt_name="query")
    summary = import_hf(str(source), str(tmp_path / "imported"))  # its check: embed() against encode()
    assert summary["options"]["sentence_exclude_prompt"] is True
    hub = from_pretrained(str(tmp_path / "imported"), "model.pt", ".")
    assert _cosines(hub.embed(SENTENCES), want).min() >= 0.9999
    for pooling in POOLINGS:
        st[1].pooling_mode = POOLINGS[pooling].st_mode
        theirs = st.encode(SENTENCES, convert_to_numpy=True, prompt_name="query")
        assert _cosines(hub.embed(SENTENCES, pooling=pooling), theirs).min() >= 0.9999, pooling
        if pooling in ("mean", "cls"):  # the setting matters: the prompt pooled gives other vectors
            st[1].include_prompt = True
            pooled = st.encode(SENTENCES, convert_to_numpy=True, prompt_name="query")
            st[1].include_prompt = False
            assert _cosines(pooled, theirs).min() < 0.9999, pooling
    # clear-eval-sts and the STS validation pool as embed() does
    from fairseq_clear.evaluation.sts.scoring import hub_encoder
    from fairseq_clear.models.inference import embed_batches, pooling_skip
    from fairseq_clear.tasks.sts_validation import StsValidator

    plain = hub.embed(SENTENCES, pooling="mean", normalize=False)
    np.testing.assert_allclose(hub_encoder(hub, ("mean",))(SENTENCES)["mean"], plain, atol=1e-5)
    sts = tmp_path / "sts-dev.csv"
    sts.write_text("".join(f"main-captions\tMSRvid\t2012test\t{i:04d}\t{i % 5}.0\t{a}\t{b}\n"
                           for i, (a, b) in enumerate(zip(SENTENCES[:2], SENTENCES[3:]))))
    validator = StsValidator(str(sts), hub.tokenizer.tokenizer, hub.task.source_dictionary, pooling="mean")
    got = embed_batches(hub.model, validator.batches(hub.model), len(validator.sentences), ("mean",),
                        skip=pooling_skip(validator.tokenizer, hub.model))["mean"]
    np.testing.assert_allclose(got.numpy(), hub.embed(validator.sentences, pooling="mean", normalize=False),
                               atol=1e-5)
    # the ONNX graph's sentence_embedding (checked against embed() by the export) leaves the prompt out too
    export(hub, str(tmp_path / "out"), check_sentences=SENTENCES, onnx=has_onnx())
    config = json.loads((tmp_path / "out" / "1_Pooling" / "config.json").read_text())
    assert config["include_prompt"] is False
    got = SentenceTransformer(str(tmp_path / "out"), device="cpu").encode(SENTENCES, convert_to_numpy=True)
    assert _cosines(got, want).min() >= 0.9999


def test_data_prepared_from_a_lower_casing_import_is_lower_cased(xlmr, tmp_path):
    """sentence-transformers lower-cases in its tokenize(), in training too: the encoder of clear-prepare
    --tokenizer-from (both binarizers) and of clear-prepare-pairs, for an import with do_lower_case (a cased
    sentencepiece here), gives "Hello World" the ids of "hello world". Before, the import's tokenizer encoded
    the text as written: training saw what serving never does."""
    from fairseq_clear import vocabulary
    from fairseq_clear.export.from_hf import import_hf
    from fairseq_clear.preprocessing.encode import tokenizer_vocabulary

    source = _st(xlmr, tmp_path / "st")
    config = source / "sentence_bert_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "do_lower_case": True}))
    import_hf(str(source), str(tmp_path / "imported"))
    record = json.loads((tmp_path / "imported" / "clear_tokenizer.json").read_text())
    assert record.pop("sentence_lowercase") is True
    cased = vocabulary.from_record(str(tmp_path / "imported"), record)  # the tokenizer alone: cased
    assert cased.encode_ids(["Hello World"]) != cased.encode_ids(["hello world"])
    one, _, _, _, many = tokenizer_vocabulary(str(tmp_path / "imported"))  # clear-prepare's encoder
    assert one("Hello World") == one("hello world") and many(["Hello World"]) == many(["hello world"])
    pairs = vocabulary.find(str(tmp_path / "imported"), "--data")  # clear-prepare-pairs' tokenizer
    assert pairs.encode_ids(["Hello World"]) == pairs.encode_ids(["hello world"])
    # a data directory prepared before (no lower-casing in its record) is refused for this model
    data = tmp_path / "old-data"
    data.mkdir()
    (data / "clear_tokenizer.json").write_text(json.dumps(record))
    with pytest.raises(vocabulary.TokenizerError, match="clear-prepare --tokenizer-from"):
        vocabulary.check_same(str(data), str(tmp_path / "imported"))


def test_senteval_vectors_of_other_sentence_settings_never_share_a_cache_entry(dense_import, tmp_path):
    """clear-eval-senteval's cache keyed a checkpoint by its file, tokenizer, head and positions: a model read
    with another prompt, lower-casing, length or prompt pooling (options the loaded model has, not the file)
    got the vectors cached for the first."""
    import argparse

    from fairseq_clear.cli.eval_senteval import checkpoint_fingerprint
    from fairseq_clear.evaluation.senteval.transfer import VectorCache
    from fairseq_clear.models.inference import prompts_word

    folder, hub = dense_import[3], dense_import[4]
    args = argparse.Namespace(checkpoint=str(folder / "model.pt"), head="representation")
    changes = [("sentence_lowercase", True), ("sentence_max_length", 20),
               ("sentence_prompts", prompts_word(PROMPTS, "query")), ("sentence_exclude_prompt", True)]
    saved = {name: getattr(hub.model.args, name) for name, _ in changes}
    prints = [checkpoint_fingerprint(args, hub)]
    try:
        for name, value in changes:  # cumulative: each run differs from the one before in one setting
            setattr(hub.model.args, name, value)
            prints.append(checkpoint_fingerprint(args, hub))
    finally:
        for name, value in saved.items():
            setattr(hub.model.args, name, value)
    assert len(set(prints)) == len(prints)
    cache = VectorCache(str(tmp_path / "cache"))
    digest = VectorCache.digest(["a sentence"])
    cache.put("m", "MR", prints[0], digest, {"mean": np.ones((1, 3), np.float32)}, ["mean"])
    assert all(cache.get("m", "MR", p, digest, ["mean"]) is None for p in prints[1:])
    assert cache.get("m", "MR", prints[0], digest, ["mean"]) is not None
