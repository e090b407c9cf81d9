"""The ONNX files of an export (``clear-export-hf --onnx``): sentence-transformers' ONNX layout,
written with ``torch.onnx.export`` and onnxruntime alone (no optimum).

* ``onnx/model.onnx``: the exported sentence-transformers model in fp32. Inputs ``input_ids`` and
  ``attention_mask`` (int64, batch x tokens, both dynamic); outputs ``last_hidden_state`` (what
  sentence-transformers' ``backend="onnx"``, i.e. optimum's ``ORTModelForFeatureExtraction``, reads
  and pools itself) and ``sentence_embedding`` (the export's Pooling, Dense and Normalize modules
  applied: the vector, for onnxruntime without anything else; a Pooling with ``include_prompt``
  false leaves out the default prompt's tokens, so feed that prompt as ``encode()`` does).
* ``onnx/model_qint8_avx512_vnni.onnx``: onnxruntime's dynamic int8 quantization of it (int8
  weights per output channel, activations quantized at run time), under the name
  sentence-transformers' ``export_dynamic_quantized_onnx_model(model, "avx512_vnni", ...)`` gives.

Both are checked before the export is published: ``sentence_embedding`` of ``model.onnx`` must
equal the hub's ``embed()`` within the export's tolerance; the int8 file's cosine to it is logged.
"""

import logging
import os
import warnings

import numpy as np
import torch

from .errors import ExportError

logger = logging.getLogger(__name__)

ONNX_DIR = "onnx"
FP32_FILE = "model.onnx"
#: sentence-transformers' name for the dynamic int8 file of its "avx512_vnni" configuration
INT8_FILE = "model_qint8_avx512_vnni.onnx"
INPUTS = ("input_ids", "attention_mask")
OUTPUTS = ("last_hidden_state", "sentence_embedding")
#: 17: layer norm exported as one LayerNormalization node (earlier opsets spell it out)
OPSET = 17


class _Pipeline(torch.nn.Module):
    """The sentence-transformers model as a function of two tensors (what the ONNX graph computes)."""

    def __init__(self, st, prompt_length=None):
        super().__init__()
        self.st = st
        self.prompt_length = prompt_length

    def forward(self, input_ids, attention_mask):
        features = {"input_ids": input_ids, "attention_mask": attention_mask}
        if self.prompt_length:  # include_prompt false: the default prompt's tokens, a constant of the graph
            features["prompt_length"] = self.prompt_length
        out = self.st(features)
        return out["token_embeddings"], out["sentence_embedding"]


def check_available():
    """Raise :class:`ExportError` naming the packages when onnx or onnxruntime is missing
    (before any work: ``clear-export-hf --onnx`` calls it first)."""
    missing = []
    for name in ("onnx", "onnxruntime"):
        try:
            __import__(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise ExportError(f"--onnx needs {' and '.join(missing)}: pip install 'fairseq-clear[onnx]' "
                          "(or pip install onnx onnxruntime 'ml-dtypes<0.6', which keeps numpy below 2)")


def session(path, threads: int = None):
    """An onnxruntime CPU session of ``path`` with all graph optimizations (``threads``: intra-op)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def tokenizer_of(st):
    """sentence-transformers' own tokenization of ``st`` (``preprocess``; ``tokenize`` before 6): the
    ids its ``encode()`` feeds, which a plain call of its Hugging Face tokenizer does not always give
    (literal special-token text in a sentencepiece export)."""
    return getattr(st, "preprocess", None) or st.tokenize


def encode(sess, tokenize, sentences, batch_size: int = 32) -> np.ndarray:
    """``sentence_embedding`` of ``sentences`` from an onnxruntime session of an exported file;
    ``tokenize``: :func:`tokenizer_of` the export. Batches of similar length (as the hub), returned
    in input order."""
    from ..models.inference import length_batches

    sentences = list(sentences)
    if not sentences:
        return np.zeros((0, sess.get_outputs()[1].shape[-1]), dtype=np.float32)
    features = tokenize(sentences)
    ids, mask = (np.asarray(features[k], dtype=np.int64) for k in INPUTS)
    lengths = mask.sum(axis=1)
    out = None
    for rows in length_batches(lengths, batch_size):
        width = int(lengths[rows].max())  # right padding: the batch's own length
        vectors = sess.run(["sentence_embedding"], {"input_ids": ids[rows, :width],
                                                    "attention_mask": mask[rows, :width]})[0]
        if out is None:
            out = np.empty((len(sentences), vectors.shape[1]), dtype=np.float32)
        out[rows] = vectors
    return out


def write_onnx(hub, out_dir: str, sentences, pooling=None, head: str = "representation", normalize: bool = False,
               tolerance: float = 1e-4, probes=None, model_kwargs=None) -> dict:
    """Write ``onnx/model.onnx`` and its int8 file for the sentence-transformers model in ``out_dir``
    (a staged export) and check the fp32 one against ``hub.embed()`` on ``sentences`` (plus
    ``probes(tokenizer, out_dir)``: the export's own check sentences, given by its caller so that this
    module does not import it; ``model_kwargs``: its caller's for loading the export); returns
    {"max_difference": fp32 vs hub, "int8_min_cosine": int8 vs fp32}."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from sentence_transformers import SentenceTransformer

    check_available()
    # eager attention: plain MatMul/Softmax nodes, which onnxruntime's transformer optimizer can fuse
    # (it finds no attention in the graph of torch's scaled_dot_product_attention)
    st = SentenceTransformer(out_dir, device="cpu",
                             model_kwargs={"attn_implementation": "eager", **(model_kwargs or {})}).eval()
    folder = os.path.join(out_dir, ONNX_DIR)
    os.makedirs(folder, exist_ok=True)
    fp32, int8 = os.path.join(folder, FP32_FILE), os.path.join(folder, INT8_FILE)
    example = tokenizer_of(st)(["a short example", "a longer example sentence for the trace"])
    # the graph starts at the ids: a default prompt of the model is text its user prepends, as encode() does;
    # a Pooling with include_prompt false leaves out that prompt's tokens (counted as encode() counts them)
    prompt = st.prompts.get(st.default_prompt_name, "") if getattr(st, "default_prompt_name", None) else ""
    prompt_length = None
    if prompt and any(getattr(module, "include_prompt", True) is False for module in st):
        prompt_length = tokenizer_of(st)(["x"], prompt=prompt).get("prompt_length")
    batch_and_tokens = {0: "batch", 1: "tokens"}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)  # shape checks traced as constants: expected
        torch.onnx.export(
            _Pipeline(st, prompt_length), (example["input_ids"], example["attention_mask"]), fp32,
            input_names=list(INPUTS), output_names=list(OUTPUTS), opset_version=OPSET,
            dynamic_axes={"input_ids": batch_and_tokens, "attention_mask": batch_and_tokens,
                          "last_hidden_state": batch_and_tokens, "sentence_embedding": {0: "batch"}},
            dynamo=False,  # the TorchScript exporter: the dynamo one needs onnxscript
        )
    quantize_dynamic(fp32, int8, weight_type=QuantType.QInt8, per_channel=True, reduce_range=False,
                     op_types_to_quantize=["MatMul", "Gemm"])
    sentences = list(sentences) + (list(probes(st.tokenizer, out_dir)) if probes else [])
    ours = hub.embed(sentences, pooling=pooling, head=head, normalize=normalize)
    theirs = encode(session(fp32), tokenizer_of(st), [prompt + s for s in sentences])
    diff = float(np.abs(ours - theirs).max()) if len(sentences) else 0.0
    if not diff <= tolerance:  # written so that NaN fails too
        raise ExportError(f"{ONNX_DIR}/{FP32_FILE} differs from the hub by {diff:.2e} > {tolerance:g}")
    quantized = encode(session(int8), tokenizer_of(st), [prompt + s for s in sentences])
    cosine = float(_cosines(theirs, quantized).min()) if len(sentences) else 1.0
    logger.info("ONNX: %s matches the hub within %.1e; %s has cosine >= %.4f to it on %d sentences",
                FP32_FILE, diff, INT8_FILE, cosine, len(sentences))
    return {"max_difference": diff, "int8_min_cosine": cosine}


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    from ..models.inference import cosine_rows

    return cosine_rows(torch.from_numpy(a), torch.from_numpy(b))
