"""A trained encoder → a Hugging Face XLM-R model that sentence-transformers loads (``clear-export-hf``).

    clear-export-hf --checkpoint checkpoints/checkpoint_best.pt --data data-bin --out clear-st
    python -c "from sentence_transformers import SentenceTransformer as S; print(S('clear-st').encode(['Hi']))"

The output directory is a sentence-transformers model (modules.json, pooling,
optional dense layers) whose transformer is a ``transformers``
``XLMRobertaForMaskedLM`` (encoder + LM head; ``AutoModel`` loads the encoder)
with the pre-training sentencepiece model as an XLM-R tokenizer. This works
because dict.txt follows XLM-R's layout (fairseq id = sentencepiece id + 1,
``<mask>`` after the pieces; see docs/design.md); the export checks that.

The exported model is verified before the command returns: it is reloaded
with ``SentenceTransformer`` and its vectors for a few sentences must equal
the hub's ``embed()`` within ``--tolerance``.
"""

import json
import logging
import os
import shutil
import tempfile

import numpy as np
import torch

from .errors import ExportError  # noqa: F401  (part of this module's API)
from ..hf_tokenizers import build_tokenizer, keep_special_text  # noqa: F401  (part of this module's API)
from ..models.dense import DENSE_ACTIVATIONS
from ..models.inference import encode_sentences
from ..models.pooling import POOLINGS
from ..atomic_files import write_json
from .output_dir import staged_output

logger = logging.getLogger(__name__)

#: fairseq activation -> transformers hidden_act
HIDDEN_ACT = {"gelu": "gelu", "relu": "relu", "gelu_accurate": "gelu_new", "gelu_fast": "gelu_new", "tanh": "tanh"}
#: fairseq activation -> torch module for sentence-transformers' Dense: the one table the import reads too
DENSE_ACT = DENSE_ACTIVATIONS

CHECK_SENTENCES = [
    "A man is playing a guitar.",
    "Someone is playing music on a stage, and the crowd is singing along with him.",
    "",
    "Café naïve résumé: 3.5% of ½ the coöperation – “quoted” text…",
    "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG",
    "   leading and trailing   spaces   ",
]


def check_vocabulary_layout(tokenizer, dictionary):
    """Raise :class:`ExportError` when the export cannot write the tokenizer of ``tokenizer`` (a
    :class:`~fairseq_clear.vocabulary.DictionaryEncoder`) for ``dictionary`` (its class's ``hf_check``)."""
    tokenizer.tokenizer.hf_check(dictionary)


def convert_model(model, layout: str = "xlm-roberta"):
    """``XLMRobertaForMaskedLM`` (or ``RobertaForMaskedLM`` / ``BertForMaskedLM`` for ``layout``)
    with the weights of a ``ClearRobertaModel``'s encoder and LM head; token ids are the rows
    of the fairseq dictionary. BERT counts positions from 0 where fairseq starts at 2, and gets
    zero token-type rows (fairseq has none; an import from BERT folded type 0 into positions)."""
    import transformers

    args = model.args
    problems = []
    if getattr(args, "encoder_normalize_before", False):
        problems.append("--encoder-normalize-before (pre-LN; XLM-R is post-LN)")
    if not getattr(args, "layernorm_embedding", True):
        problems.append("no embedding layer norm")
    if not getattr(args, "no_scale_embedding", True):
        problems.append("scaled token embeddings")
    if getattr(args, "activation_fn", "gelu") not in HIDDEN_ACT:
        problems.append(f"--activation-fn {args.activation_fn}")
    if getattr(args, "no_token_positional_embeddings", False) or not getattr(args, "encoder_learned_pos", True):
        problems.append("no learned positional embeddings")
    if problems:
        raise ExportError("this encoder has no XLM-R equivalent: " + "; ".join(problems))

    enc = model.encoder.sentence_encoder
    sd = {k: v.detach().float().cpu() for k, v in model.state_dict().items()}
    vocab, dim = enc.embed_tokens.weight.shape
    p = "encoder.sentence_encoder."
    positions = sd[p + "embed_positions.weight"]
    bert = layout == "bert"
    if bert:
        positions = positions[enc.padding_idx + 1:]
    config_class, model_class, prefix = {
        "xlm-roberta": ("XLMRobertaConfig", "XLMRobertaForMaskedLM", "roberta."),
        "roberta": ("RobertaConfig", "RobertaForMaskedLM", "roberta."),
        "bert": ("BertConfig", "BertForMaskedLM", "bert."),
    }[layout]
    config = getattr(transformers, config_class)(
        vocab_size=vocab,
        hidden_size=dim,
        num_hidden_layers=len(enc.layers),
        num_attention_heads=args.encoder_attention_heads,
        intermediate_size=args.encoder_ffn_embed_dim,
        hidden_act=HIDDEN_ACT[args.activation_fn],
        hidden_dropout_prob=args.dropout,
        attention_probs_dropout_prob=args.attention_dropout,
        max_position_embeddings=positions.size(0),
        type_vocab_size=2 if bert else 1,
        layer_norm_eps=enc.layernorm_embedding.eps,
        pad_token_id=1, bos_token_id=0, eos_token_id=2,
        tie_word_embeddings=not getattr(args, "untie_weights_roberta", False),
    )
    hf = getattr(transformers, model_class)(config)
    new = {
        prefix + "embeddings.word_embeddings.weight": sd[p + "embed_tokens.weight"],
        prefix + "embeddings.position_embeddings.weight": positions,
        prefix + "embeddings.token_type_embeddings.weight": torch.zeros(config.type_vocab_size, dim),
        prefix + "embeddings.LayerNorm.weight": sd[p + "layernorm_embedding.weight"],
        prefix + "embeddings.LayerNorm.bias": sd[p + "layernorm_embedding.bias"],
    }
    pairs = {
        "attention.self.query": "self_attn.q_proj", "attention.self.key": "self_attn.k_proj",
        "attention.self.value": "self_attn.v_proj", "attention.output.dense": "self_attn.out_proj",
        "attention.output.LayerNorm": "self_attn_layer_norm", "intermediate.dense": "fc1",
        "output.dense": "fc2", "output.LayerNorm": "final_layer_norm",
    }
    for i in range(len(enc.layers)):
        for hf_name, fs_name in pairs.items():
            for w in ("weight", "bias"):
                new[f"{prefix}encoder.layer.{i}.{hf_name}.{w}"] = sd[f"{p}layers.{i}.{fs_name}.{w}"]
    lm = "encoder.lm_head."
    head = ({"dense": "cls.predictions.transform.dense", "layer_norm": "cls.predictions.transform.LayerNorm",
             "decoder": "cls.predictions.decoder", "bias": "cls.predictions.bias"} if bert else
            {"dense": "lm_head.dense", "layer_norm": "lm_head.layer_norm", "decoder": "lm_head.decoder",
             "bias": "lm_head.bias"})
    new.update({
        head["dense"] + ".weight": sd[lm + "dense.weight"], head["dense"] + ".bias": sd[lm + "dense.bias"],
        head["layer_norm"] + ".weight": sd[lm + "layer_norm.weight"],
        head["layer_norm"] + ".bias": sd[lm + "layer_norm.bias"],
        head["decoder"] + ".weight": sd[lm + "weight"], head["bias"]: sd[lm + "bias"],
        head["decoder"] + ".bias": sd[lm + "bias"],
    })
    expected = set(hf.state_dict())
    missing = expected - set(new)
    if missing:
        raise ExportError(f"no source for {sorted(missing)[:5]} (transformers version mismatch?)")
    hf.load_state_dict({k: v for k, v in new.items() if k in expected}, strict=True)
    return hf.eval()


def _dense(linear: torch.nn.Linear, activation: str):
    from sentence_transformers.sentence_transformer.modules import Dense

    if activation not in DENSE_ACT:
        raise ExportError(f"activation '{activation}' has no sentence-transformers Dense equivalent")
    dense = Dense(linear.in_features, linear.out_features, bias=linear.bias is not None,
                  activation_function=DENSE_ACT[activation]())
    with torch.no_grad():
        dense.linear.weight.copy_(linear.weight.float())
        if linear.bias is not None:
            dense.linear.bias.copy_(linear.bias.float())
    return dense


def head_modules(model, head: str):
    """Dense modules for an import's own Dense layers (--sentence-dense), CLSR's e (``representation``) and
    the projection head g (``projection``), in the model's order."""
    modules = []
    if head == "pooled":
        return modules
    if model.sentence_dense is not None:
        modules += [_dense(layer.linear, layer.activation) for layer in model.sentence_dense.layers]
    if model.sentence_mlp is not None:
        modules += [_dense(model.sentence_mlp.fc1, "relu"), _dense(model.sentence_mlp.fc2, "linear")]
    if head == "projection":
        g = model.projection_head
        if g is None:
            raise ExportError("--head projection: this checkpoint has no projection head")
        act = model.args.projection_activation_fn
        out_act = getattr(model.args, "projection_output_activation_fn", "linear") or "linear"
        for i, layer in enumerate(g.layers):
            modules.append(_dense(layer, out_act if i == len(g.layers) - 1 else act))
    return modules


def export(hub, out_dir: str, pooling: str = None, head: str = "representation", normalize: bool = None,
           with_lm_head: bool = False, overwrite: bool = False, check_sentences=None, tolerance: float = 1e-4,
           sts_table=None, onnx: bool = False):
    """Write a sentence-transformers model for ``hub`` into ``out_dir``; returns the ``SentenceTransformer``.

    The export is written into a temporary sibling of ``out_dir``, verified
    against the hub on ``check_sentences`` (when given) and only then moved into
    place; see :func:`fairseq_clear.export.output_dir.staged_output` for what an
    existing ``out_dir`` may hold. ``pooling`` and ``normalize`` default to the model's own
    (``--sentence-pooling``, ``--sentence-normalize``): an imported sentence-transformers model
    keeps its Pooling and Normalize modules. ``onnx``: also its ONNX files (:mod:`.onnx`), checked
    against the hub on ``check_sentences`` (the built-in ones when None) before anything is published.
    """
    if normalize is None:
        normalize = bool(getattr(hub.model.args, "sentence_normalize", False))
    with staged_output(out_dir, overwrite=overwrite) as staging:
        st = _write_export(hub, staging, pooling, head, normalize, with_lm_head, sts_table)
        if check_sentences is not None:
            diff = verify(hub, staging, check_sentences, pooling, head, normalize, tolerance)
            logger.info("verified: the export matches the hub within %.1e on %d sentences", diff, len(check_sentences))
        if onnx:
            from .onnx import write_onnx

            write_onnx(hub, staging, CHECK_SENTENCES if check_sentences is None else check_sentences,
                       pooling, head, normalize, tolerance, probes=literal_special_probes,
                       model_kwargs=load_kwargs(staging))
    return st


def _write_export(hub, out_dir, pooling, head, normalize, with_lm_head, sts_table=None):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    model = hub.model
    pooling = pooling or model.args.sentence_pooling
    source = hub.tokenizer.tokenizer  # its class carries its Hugging Face layout
    dictionary = hub.task.source_dictionary
    source.hf_check(dictionary)
    max_positions = model.max_positions()
    with tempfile.TemporaryDirectory() as tmp:
        hf = convert_model(model, source.hf_architecture)
        if not with_lm_head:
            hf = getattr(hf, hf.base_model_prefix)  # the encoder alone (built without the unused pooler)
        hf.save_pretrained(tmp)
        vocab_dir = tempfile.mkdtemp(dir=tmp)
        tokenizer = source.hf_tokenizer(dictionary, max_positions, vocab_dir)
        literal_specials = None  # Hugging Face's reading (an imported model's own tokenizer.json)
        if source.reads_special_text_as_text():
            not_text = keep_special_text(tokenizer)
            literal_specials = {"text": True, "except": not_text}
            if not_text:
                logger.warning("literal %s in input text will be read as special tokens by the exported tokenizer "
                               "(its sentencepiece model has no piece for some of their characters); our hub "
                               "reads them as text", ", ".join(not_text))
        tokenizer.save_pretrained(tmp)
        # no pooler: sentence vectors come from the Pooling module, as in the paper; the length and
        # lower-casing the hub embeds with (an imported model's own)
        transformer = Transformer(tmp, max_seq_length=hub.max_length, do_lower_case=hub.lowercase,
                                  model_kwargs={"add_pooling_layer": False})
        # the prompt's tokens left out of the pooling, as the hub pools (an import's include_prompt false)
        modules = [transformer, Pooling(model.args.encoder_embed_dim, pooling_mode=POOLINGS[pooling].st_mode,
                                        include_prompt=not getattr(model.args, "sentence_exclude_prompt", False))]
        modules += head_modules(model, head)
        if normalize:
            modules.append(Normalize())
        # the starting model's similarity function (sentence-transformers' similarity()), if it had another
        prompts, default_prompt = hub.prompts  # the starting model's, put before sentences as the hub does
        st = SentenceTransformer(modules=modules, device="cpu", prompts=prompts or None,
                                 default_prompt_name=default_prompt,
                                 similarity_fn_name=getattr(model.args, "sentence_similarity", None))
        st.save(out_dir)
        if literal_specials:
            specials_out_of_text(os.path.join(out_dir, "tokenizer.json"))
        # vocab.json + merges.txt / vocab.txt too: the files fairseq's bpe and clear-import-hf read
        for name in os.listdir(vocab_dir):
            shutil.copyfile(os.path.join(vocab_dir, name), os.path.join(out_dir, name))
    config_path = os.path.join(out_dir, "sentence_bert_config.json")
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    # sentence-transformers >= 6 keeps these two in the tokenizer's files; older ones (and other
    # runtimes) read them here
    config.update(max_seq_length=hub.max_length, do_lower_case=hub.lowercase)
    # no model_args such as add_pooling_layer (which would keep transformers from building the unused
    # pooler): sentence-transformers' ONNX and OpenVINO backends pass them to optimum, which refuses them
    write_json(config_path, config)
    write_legacy_pooling_keys(os.path.join(out_dir, "1_Pooling", "config.json"))
    write_portable_names(out_dir)
    for name, path in source.hf_files().items():
        shutil.copyfile(path, os.path.join(out_dir, name))
    from .model_card import render

    with open(os.path.join(out_dir, "README.md"), "w", encoding="utf-8") as f:  # replaces the generic card
        f.write(render(hub, pooling, head, normalize, len(modules), sts_table, literal_specials))
    with open(os.path.join(out_dir, "fairseq_clear_export.json"), "w", encoding="utf-8") as f:
        json.dump({"pooling": pooling, "head": head, "normalize": normalize,
                   "max_positions": max_positions, "max_seq_length": hub.max_length, "lowercase": hub.lowercase,
                   "arch": getattr(model.args, "arch", None),
                   "literal_special_tokens": literal_specials,
                   # the vectors keep every dimension; the sizes --matryoshka-dims trained (of the
                   # projection head's output when the model has one) are recorded here
                   "dim": model.representation_dim(head),
                   "matryoshka_dims": hub.matryoshka_dims,
                   "matryoshka_head": ("projection" if getattr(model, "projection_head", None) is not None
                                       else "representation") if hub.matryoshka_dims else None}, f, indent=2)
    return st


def specials_out_of_text(path: str):
    """tokenizer.json without its special added tokens: a runtime that reads it alone (the tokenizers
    library: TEI, Rust and ONNX servers) matches their text ('<s>', '<mask>') inside a sentence, where
    fairseq and transformers (told by tokenizer_config.json's split_special_tokens, which only it reads)
    read it as text; tokenizer.json has no setting for that. The post-processor still adds <s> and </s> by
    id, and transformers adds the specials back from tokenizer_config.json when it loads the folder."""
    with open(path, encoding="utf-8") as f:
        state = json.load(f)
    state["added_tokens"] = [t for t in state.get("added_tokens") or [] if not t.get("special")]
    write_json(path, state)


def write_legacy_pooling_keys(path: str):
    """Add sentence-transformers' older ``pooling_mode_*`` flags beside its ``pooling_mode``: TEI and other
    runtimes read only the flags (all of them, no defaults); sentence-transformers drops them when
    ``pooling_mode`` is there."""
    from .from_hf import ST_LEGACY_POOLING

    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    mode = config["pooling_mode"]
    modes = [mode] if isinstance(mode, str) else list(mode)
    write_json(path, {**config, **{flag: name in modes for flag, name in ST_LEGACY_POOLING.items()}})


def write_portable_names(out_dir: str):
    """The names older releases read, where sentence-transformers 6 and transformers 5 save their own:
    sentence-transformers 5.x and transformers 4.x are what its ONNX and OpenVINO backends install with
    (benchmarks/studies/serving_runtimes.py), and the new releases read the old names too.

    * modules.json: each module's ``sentence_transformers.models.X`` (6.x saves the paths of its own
      layout, such as ``sentence_transformers.base.modules.normalize.Normalize``, which 5.x lacks);
    * tokenizer_config.json: a list of extra special tokens as ``additional_special_tokens`` (4.x reads
      ``extra_special_tokens`` as a dict of named tokens and fails on a list)."""
    path = os.path.join(out_dir, "modules.json")
    with open(path, encoding="utf-8") as f:
        entries = json.load(f)
    for entry in entries:
        if entry["type"].startswith("sentence_transformers."):
            entry["type"] = "sentence_transformers.models." + entry["type"].rsplit(".", 1)[1]
    write_json(path, entries)
    path = os.path.join(out_dir, "tokenizer_config.json")
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    if isinstance(config.get("extra_special_tokens"), list):
        config["additional_special_tokens"] = config.pop("extra_special_tokens")
        write_json(path, config)


def load_kwargs(out_dir: str) -> dict:
    """What the export's own checks load it with: an encoder without the pooler it was saved without
    (sentence_bert_config.json cannot say so for other runtimes: see write_portable_names' caller)."""
    with open(os.path.join(out_dir, "config.json"), encoding="utf-8") as f:
        masked_lm = any(a.endswith("ForMaskedLM") for a in json.load(f).get("architectures") or [])
    return {} if masked_lm else {"add_pooling_layer": False}


def literal_special_probes(tokenizer, out_dir: str) -> list:
    """Sentences with each special token's text inside, for the tokens the export reads as our hub
    does (all but ``literal_special_tokens.except`` of fairseq_clear_export.json)."""
    with open(os.path.join(out_dir, "fairseq_clear_export.json"), encoding="utf-8") as f:
        literal = json.load(f).get("literal_special_tokens") or {}
    # not the pad token: where it is read as the token (an imported model's tokenizer), fairseq masks
    # it out like padding and transformers attends to it
    skip = set(literal.get("except", [])) | {tokenizer.pad_token}
    tokens = [t for t in tokenizer.all_special_tokens if t not in skip]
    if not tokens:
        return []
    return [f"Literal {t} inside a sentence." for t in tokens] + ["x" + "y".join(tokens) + "z"]


def verify(hub, out_dir: str, sentences, pooling, head, normalize, tolerance=1e-4) -> float:
    """Max |difference| between the exported model's encode() and the hub's embed(); raises above tolerance."""
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(out_dir, device="cpu", model_kwargs=load_kwargs(out_dir))
    sentences = list(sentences) + literal_special_probes(st.tokenizer, out_dir)
    ours = hub.embed(sentences, pooling=pooling, head=head, normalize=normalize)
    theirs = st.encode(sentences, convert_to_numpy=True, batch_size=8)
    tokenize = getattr(st, "preprocess", None) or st.tokenize  # tokenize(): sentence-transformers < 6
    features = tokenize(sentences)
    for i, s in enumerate(sentences):
        got = features["input_ids"][i][features["attention_mask"][i].bool()].tolist()  # without the padding
        want = encode_sentences(hub.tokenizer, hub.model, [s], prompt=False)[0][0].tolist()  # preprocess: no prompt
        if got != want:
            raise ExportError(f"exported tokenizer disagrees on {s!r}: {got[:12]} vs {want[:12]}")
    diff = float(np.abs(ours - theirs).max()) if len(sentences) else 0.0
    if not diff <= tolerance:  # written so that NaN fails too
        raise ExportError(f"exported model differs from the hub by {diff:.2e} > {tolerance:g}")
    return diff
