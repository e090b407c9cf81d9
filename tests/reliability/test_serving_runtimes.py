"""An export that older sentence-transformers releases and their ONNX backend load (issue 42).

benchmarks/studies/serving_runtimes.py loads exports in a side virtualenv (sentence-transformers 5.7,
transformers 4.57, optimum-onnx, optimum-intel); these tests hold in this one what it found:
sentence-transformers 5.x has no ``sentence_transformers.base.modules.normalize`` (the name 6.x saves),
its ONNX backend passes ``sentence_bert_config.json``'s model arguments to optimum's ORTModel, which
refuses ``add_pooling_layer``, and transformers 4.x fails on transformers 5's list of
``extra_special_tokens`` (a sentencepiece export's)."""

import json

import pytest

pytestmark = pytest.mark.xdist_group("test_serving_runtimes")


@pytest.fixture(scope="module")
def exported(hub, tmp_path_factory):
    from fairseq_clear.export.hf import export

    out = tmp_path_factory.mktemp("serving") / "st"
    # Transformer, Pooling and Normalize modules; checked: the exported tokenizer's ids are the hub's
    export(hub, str(out), normalize=True, check_sentences=["A dog reads a story.", "The cat sees the ball."])
    return out


def test_module_types_are_the_names_every_release_reads(exported):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.util.misc import import_from_string

    entries = json.loads((exported / "modules.json").read_text())
    # sentence_transformers.models.X: written by releases before 6, read (as an alias) by all of them
    assert [e["type"] for e in entries] == ["sentence_transformers.models.Transformer",
                                            "sentence_transformers.models.Pooling",
                                            "sentence_transformers.models.Normalize"]
    loaded = SentenceTransformer(str(exported), device="cpu")
    assert [import_from_string(e["type"]) for e in entries] == [type(m) for m in loaded]


def test_no_torch_only_model_arguments(exported):
    # sentence-transformers' ONNX and OpenVINO backends pass these to optimum's model classes
    config = json.loads((exported / "sentence_bert_config.json").read_text())
    assert not config.get("model_args") and not config.get("model_kwargs"), config


def test_extra_special_tokens_under_the_name_transformers_4_reads(exported):
    from transformers import AutoTokenizer

    config = json.loads((exported / "tokenizer_config.json").read_text())
    assert not isinstance(config.get("extra_special_tokens"), list), config  # 4.x: a dict of named tokens
    assert {"<s>", "</s>"} <= set(config["additional_special_tokens"])
    # transformers 5 reads the old name: the same special tokens as the hub's
    assert set(AutoTokenizer.from_pretrained(str(exported)).all_special_tokens) >= {"<s>", "</s>", "<mask>"}


def test_the_exports_own_checks_build_no_pooler(hub, tmp_path, capfd):
    # without model_args in the folder, the export's checks say themselves what it leaves out
    # (else transformers reports the pooler's weights as newly initialised in every export's output)
    from fairseq_clear.export.hf import export

    export(hub, str(tmp_path / "st"), check_sentences=["A dog reads a story."])
    out, err = capfd.readouterr()
    assert "pooler" not in out + err


def test_benchmarks_md_holds_the_study_s_table_as_generated():
    """BENCHMARKS.md §5's serving table is report.py's rendering of results/serving_runtimes.json."""
    import importlib.util
    import sys

    from helpers import REPO

    bench = REPO / "benchmarks"
    sys.path.insert(0, str(bench))  # report.py imports common.py beside it
    try:
        spec = importlib.util.spec_from_file_location("report_for_serving", bench / "report.py")
        report = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(report)
    finally:
        sys.path.remove(str(bench))
    lines = report.serving_lines(report.load("serving_runtimes.json"))
    assert any("onnx/model_qint8_avx512_vnni.onnx" in line for line in lines)
    assert "\n".join(lines) in (REPO / "BENCHMARKS.md").read_text(encoding="utf-8")
