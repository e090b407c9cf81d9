"""clear-import-hf refuses what it would otherwise mis-convert silently, before converting any weight:
sentence-transformers pooling modes and modules without a counterpart, an untied LM head, a causal or
cross-attention config, a config.json of the wrong shape; layer_norm_eps defaults as transformers'
do; dropped token-type rows are logged."""

import json
import logging
import shutil

import pytest
import torch

from hf_standins import make_bert, make_roberta
from helpers import bin_path, run_cli

pytest.importorskip("transformers")

LOGGER = "fairseq_clear.export.from_hf"


@pytest.fixture(scope="module")
def hf(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf_refusals")
    return {"bert": make_bert(root / "bert"), "roberta": make_roberta(root / "roberta", lm_head=True)}


@pytest.fixture
def no_conversion(monkeypatch):
    """Refusals come before any weight is converted."""
    from fairseq_clear.export import from_hf

    def converted(*a, **k):
        raise AssertionError("convert_state ran: the refusal came too late")

    monkeypatch.setattr(from_hf, "convert_state", converted)


def _copy(src, dst, **config):
    shutil.copytree(src, dst)
    if config:
        cfg = json.loads((dst / "config.json").read_text())
        cfg.update(config)
        (dst / "config.json").write_text(json.dumps(cfg))
    return dst


def _refused(model_dir, out, *needles):
    from fairseq_clear.export.from_hf import ImportHfError, import_hf

    with pytest.raises(ImportHfError) as e:
        import_hf(str(model_dir), str(out))
    for n in needles:
        assert n in str(e.value), str(e.value)
    assert not out.exists()
    return str(e.value)


#: modules.json types as sentence-transformers < 6 and >= 6 write them
ST_TYPES = {
    "v5": {k: f"sentence_transformers.models.{k}" for k in ("Transformer", "Pooling", "Dense", "Normalize")},
    "v6": {"Transformer": "sentence_transformers.base.modules.transformer.Transformer",
           "Pooling": "sentence_transformers.sentence_transformer.modules.pooling.Pooling",
           "Dense": "sentence_transformers.base.modules.dense.Dense",
           "Normalize": "sentence_transformers.base.modules.normalize.Normalize"},
}
LEGACY = {"cls": "cls_token", "mean": "mean_tokens", "max": "max_tokens", "mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
          "weightedmean": "weightedmean_tokens", "lasttoken": "lasttoken"}


def _sentence_transformers(model_dir, pooling, *extra, style="v5"):
    """modules.json (Transformer, Pooling, then ``extra`` (path, class) modules) and 1_Pooling/config.json
    with the ``pooling`` modes (sentence-transformers' names: cls, mean, max, ...) in ``style``'s format."""
    types = ST_TYPES[style]
    modules = [{"idx": 0, "name": "0", "path": "", "type": types["Transformer"]},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": types["Pooling"]}]
    for i, (path, kind) in enumerate(extra, 2):
        modules.append({"idx": i, "name": str(i), "path": path, "type": types[kind]})
        (model_dir / path).mkdir()
    (model_dir / "modules.json").write_text(json.dumps(modules))
    (model_dir / "1_Pooling").mkdir()
    if style == "v5":
        cfg = {"word_embedding_dimension": 32, **{f"pooling_mode_{m}": False for m in LEGACY.values()},
               "include_prompt": True}
        cfg.update({f"pooling_mode_{LEGACY[m]}": True for m in pooling})
    else:
        cfg = {"embedding_dimension": 32, "pooling_mode": pooling[0] if len(pooling) == 1 else pooling,
               "include_prompt": True}
    (model_dir / "1_Pooling" / "config.json").write_text(json.dumps(cfg))
    return model_dir


def _mode_names(modes, style):
    return [f"pooling_mode_{LEGACY[m]}" for m in modes] if style == "v5" else [repr(m) for m in modes]


# ---- 1. sentence-transformers pooling and modules ----------------------------------------------
@pytest.mark.parametrize("style", sorted(ST_TYPES))
@pytest.mark.parametrize("modes", [["cls", "mean"], ["mean", "max"]])
def test_unsupported_pooling_mode_is_refused(hf, tmp_path, no_conversion, modes, style):
    model = _sentence_transformers(_copy(hf["bert"], tmp_path / "st"), modes, style=style)
    _refused(model, tmp_path / "out", "1_Pooling/config.json", *_mode_names(modes, style))


def test_pooling_without_modules_json_is_checked_too(hf, tmp_path, no_conversion):
    model = _sentence_transformers(_copy(hf["bert"], tmp_path / "st"), ["mean", "max"])
    (model / "modules.json").unlink()
    _refused(model, tmp_path / "out", "1_Pooling/config.json", "pooling_mode_max_tokens")


@pytest.mark.parametrize("style", sorted(ST_TYPES))
@pytest.mark.parametrize("mode", ["cls", "mean", "max", "mean_sqrt_len_tokens", "weightedmean", "lasttoken"])
def test_cls_and_mean_pooling_are_read(hf, tmp_path, mode, style):
    from fairseq_clear.export.from_hf import sentence_pooling

    model = _sentence_transformers(_copy(hf["bert"], tmp_path / "st"), [mode], style=style)
    assert sentence_pooling(str(model)) == mode


@pytest.mark.parametrize("style", sorted(ST_TYPES))
def test_dense_module_is_refused(hf, tmp_path, no_conversion, style):
    """LaBSE-style: Transformer, Pooling, 2_Dense, Normalize, with no 2_Dense/config.json: nothing says what
    the Dense projection is (a complete one is imported: tests/reliability/test_st_dense_and_prompt.py)."""
    model = _sentence_transformers(_copy(hf["bert"], tmp_path / "labse"), ["cls"],
                                   ("2_Dense", "Dense"), ("3_Normalize", "Normalize"), style=style)
    _refused(model, tmp_path / "out", "modules.json", "2_Dense", ST_TYPES[style]["Dense"])


def test_dense_module_is_refused_by_the_cli(hf, tmp_path):
    model = _sentence_transformers(_copy(hf["bert"], tmp_path / "labse"), ["cls"], ("2_Dense", "Dense"))
    proc = run_cli([bin_path("clear-import-hf"), model, tmp_path / "out"], check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stdout, proc.stdout[-2000:]
    assert "modules.json" in proc.stdout and "2_Dense" in proc.stdout and "Dense" in proc.stdout
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("style", sorted(ST_TYPES))
def test_normalize_module_is_accepted_and_recorded(hf, tmp_path, style):
    """all-MiniLM-L6-v2's layout: the import records the pooling and the Normalize module, so that
    training, embed() and the export keep them (tests/e2e/test_start_model.py follows them through)."""
    from fairseq_clear.export.from_hf import sentence_head, sentence_pooling

    model = _sentence_transformers(_copy(hf["bert"], tmp_path / "st"), ["mean"], ("2_Normalize", "Normalize"),
                                   style=style)
    assert sentence_pooling(str(model)) == "mean"
    assert sentence_head(str(model)) == {"pretrained_kind": "sentence-embedding", "pretrained_pooling": "mean",
                                         "sentence_normalize": True}


# ---- 2. untied LM head -------------------------------------------------------------------------
def _untied(src, dst, kind):
    from transformers import AutoConfig, BertForMaskedLM, RobertaForMaskedLM

    model = _copy(src, dst)
    cfg = AutoConfig.from_pretrained(str(model))
    cfg.tie_word_embeddings = False
    torch.manual_seed(0)
    {"bert": BertForMaskedLM, "roberta": RobertaForMaskedLM}[kind](cfg).save_pretrained(str(model))
    return model


@pytest.mark.parametrize("kind", ["bert", "roberta"])
def test_untied_lm_head_is_refused(hf, tmp_path, no_conversion, kind):
    from fairseq_clear.export.from_hf import read_weights

    model = _untied(hf[kind], tmp_path / "untied", kind)
    assert json.loads((model / "config.json").read_text())["tie_word_embeddings"] is False
    decoder = "cls.predictions.decoder.weight" if kind == "bert" else "lm_head.decoder.weight"
    assert decoder in read_weights(str(model))  # the stand-in really holds a separate decoder
    _refused(model, tmp_path / "out", "config.json", "tie_word_embeddings", decoder)


def test_untied_flag_with_equal_decoder_or_tied_flag_is_accepted(hf):
    """A decoder equal to the embeddings is a tied head; with tie_word_embeddings true transformers ties it."""
    from fairseq_clear.export.from_hf import _strip, check_lm_head, read_config, read_weights

    cfg = read_config(str(hf["bert"]))
    enc, head = _strip(read_weights(str(hf["bert"])), "bert")
    word = enc["embeddings.word_embeddings.weight"]
    check_lm_head(enc, {**head, "cls.predictions.decoder.weight": word.clone()},
                  {**cfg, "tie_word_embeddings": False}, "here")
    check_lm_head(enc, {**head, "cls.predictions.decoder.weight": torch.randn_like(word)},
                  {**cfg, "tie_word_embeddings": True}, "here")


# ---- 3. causal / cross-attention configs -------------------------------------------------------
@pytest.mark.parametrize("key", ["is_decoder", "add_cross_attention"])
def test_decoder_configs_are_refused(hf, tmp_path, no_conversion, key):
    model = _copy(hf["roberta"], tmp_path / "dec", **{key: True})
    _refused(model, tmp_path / "out", "config.json", key)


# ---- 4. layer_norm_eps default -----------------------------------------------------------------
@pytest.mark.parametrize("model_type,cls_name", [("bert", "BertConfig"), ("roberta", "RobertaConfig"),
                                                  ("xlm-roberta", "XLMRobertaConfig")])
def test_missing_layer_norm_eps_is_transformers_default(hf, tmp_path, model_type, cls_name):
    import transformers

    from fairseq_clear.export.from_hf import model_options, read_config

    model = _copy(hf["roberta"], tmp_path / "noeps", model_type=model_type)
    cfg = json.loads((model / "config.json").read_text())
    del cfg["layer_norm_eps"]
    (model / "config.json").write_text(json.dumps(cfg))
    want = getattr(transformers, cls_name)().layer_norm_eps
    assert want == 1e-12
    assert model_options(read_config(str(model)), "cls")["layernorm_eps"] == want


# ---- 5. token-type rows ------------------------------------------------------------------------
def test_dropped_token_type_rows_are_logged(hf, tmp_path, caplog):
    """BERT with type_vocab_size 2: imported (type 0 folded in), and one log line says type 1 is dropped."""
    from fairseq_clear.export.from_hf import import_hf

    with caplog.at_level(logging.INFO, logger=LOGGER):
        summary = import_hf(str(hf["bert"]), str(tmp_path / "out"))
    assert summary["max_difference"] < 1e-4
    lines = [r.getMessage() for r in caplog.records if "token-type" in r.getMessage()]
    assert len(lines) == 1 and "rows 1..1 are dropped" in lines[0], caplog.text


# ---- 6. config.json of the wrong shape ---------------------------------------------------------
@pytest.mark.parametrize("field,value", [("layer_norm_eps", "abc"), ("layer_norm_eps", [1e-5]),
                                         ("hidden_dropout_prob", "x"), ("attention_probs_dropout_prob", None),
                                         ("hidden_size", True), ("hidden_act", ["gelu"]),
                                         ("type_vocab_size", "2"), ("tie_word_embeddings", "false")])
def test_bad_config_values_are_refused(hf, tmp_path, no_conversion, field, value):
    model = _copy(hf["bert"], tmp_path / "bad", **{field: value})
    _refused(model, tmp_path / "out", "config.json", field)


def test_config_that_is_not_an_object_is_refused(hf, tmp_path, no_conversion):
    model = _copy(hf["bert"], tmp_path / "list")
    (model / "config.json").write_text(json.dumps([{"model_type": "bert"}]))
    _refused(model, tmp_path / "out", str(model / "config.json"), "JSON object")
