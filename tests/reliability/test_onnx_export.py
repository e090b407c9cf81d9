"""``clear-export-hf --onnx`` (issue 42, item 3): sentence-transformers' ONNX layout written with
torch.onnx.export and onnxruntime, read by onnxruntime alone, equal to the hub's ``embed()``."""

import json

import numpy as np
import pytest

from helpers import bin_path, run_cli

pytest.importorskip("onnxruntime", reason="needs the onnx extra (pip install -e .[onnx])")
pytestmark = pytest.mark.xdist_group("test_onnx_export")

# literal special-token text is left to the export's own probes: the tiny model's sentencepiece
# cannot spell them, and the export records that it reads them as the tokens (literal_special_tokens)
SENTENCES = ["A dog reads a story.", "The cat sees the ball.", "", "a b " * 40,
             "Café naïve: 3.5% of ½ the coöperation", "THE QUICK BROWN FOX, twice: the quick brown fox."]


@pytest.fixture(scope="module")
def exported(ckpt, tmp_path_factory):
    """The tiny model exported by clear-export-hf --onnx (one forked run)."""
    checkpoint, data = ckpt
    out = tmp_path_factory.mktemp("onnx") / "st"
    proc = run_cli([bin_path("clear-export-hf"), "--checkpoint", checkpoint, "--data", data, "--out", out,
                    "--onnx"])
    assert "so does onnx/model.onnx's sentence_embedding under onnxruntime" in proc.stdout, proc.stdout[-2000:]
    return out


def test_layout_and_manifest(exported):
    import onnxruntime as ort

    fp32 = ort.InferenceSession(str(exported / "onnx" / "model.onnx"), providers=["CPUExecutionProvider"])
    # what optimum's ORTModelForFeatureExtraction (sentence-transformers' backend="onnx") feeds and reads
    assert [i.name for i in fp32.get_inputs()] == ["input_ids", "attention_mask"]
    assert [o.name for o in fp32.get_outputs()] == ["last_hidden_state", "sentence_embedding"]
    manifest = json.loads((exported / "export_manifest.json").read_text())["files"]
    assert {"onnx/model.onnx", "onnx/model_qint8_avx512_vnni.onnx"} <= set(manifest)  # a rerun replaces them


def test_onnxruntime_equals_hub(exported, hub):
    from sentence_transformers import SentenceTransformer

    from fairseq_clear.export.onnx import encode, session, tokenizer_of
    from fairseq_clear.models.inference import cosine_rows

    import torch

    tokenizer = tokenizer_of(SentenceTransformer(str(exported), device="cpu"))
    ours = hub.embed(SENTENCES)
    fp32 = encode(session(exported / "onnx" / "model.onnx", 1), tokenizer, SENTENCES, batch_size=4)
    assert np.abs(fp32 - ours).max() < 1e-4
    int8 = encode(session(exported / "onnx" / "model_qint8_avx512_vnni.onnx", 1), tokenizer, SENTENCES)
    assert not np.array_equal(int8, fp32)  # quantized indeed
    assert cosine_rows(torch.from_numpy(int8), torch.from_numpy(fp32)).min() > 0.95


def test_missing_onnxruntime_is_one_line(monkeypatch):
    import builtins

    from fairseq_clear.export.errors import ExportError
    from fairseq_clear.export.onnx import check_available

    real_import = builtins.__import__

    def no_onnxruntime(name, *args, **kwargs):
        if name == "onnxruntime":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_onnxruntime)
    with pytest.raises(ExportError, match=r"--onnx needs onnxruntime: pip install 'fairseq-clear\[onnx\]'"):
        check_available()
