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
from .output_dir import staged_output

logger = logging.getLogger(__name__)

#: fairseq activation -> transformers hidden_act
HIDDEN_ACT = {"gelu": "gelu", "relu": "relu", "gelu_accurate": "gelu_new", "gelu_fast": "gelu_new", "tanh": "tanh"}
#: fairseq activation -> torch module for sentence-transformers' Dense
DENSE_ACT = {"relu": torch.nn.ReLU, "gelu": torch.nn.GELU, "tanh": torch.nn.Tanh, "linear": torch.nn.Identity}

CHECK_SENTENCES = [
    "A man is playing a guitar.",
    "Someone is playing music on a stage, and the crowd is singing along with him.",
    "",
    "Café naïve résumé: 3.5% of ½ the coöperation – “quoted” text…",
    "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG",
    "   leading and trailing   spaces   ",
]


def check_vocabulary_layout(tokenizer, dictionary):
    """dict.txt must be XLM-R's layout: fairseq id = sentencepiece id + 1, <mask> right after."""
    if tokenizer.tokenizer.kind != "sentencepiece":
        raise ExportError(
            f"this model uses the {tokenizer.tokenizer.kind} tokenizer ({tokenizer.path}); "
            "clear-export-hf writes XLM-R's layout, which needs a sentencepiece model"
        )
    sp = tokenizer.tokenizer.sp
    if (sp.unk_id(), sp.bos_id(), sp.eos_id()) != (0, 1, 2):
        raise ExportError(
            f"sentencepiece model '{tokenizer.path}' has <unk>, <s>, </s> at ids "
            f"{sp.unk_id()}, {sp.bos_id()}, {sp.eos_id()}; XLM-R's tokenizer layout needs 0, 1, 2 "
            "(sentencepiece's defaults)"
        )
    bad = []
    for i in range(3, sp.get_piece_size()):
        if sp.is_control(i) or sp.is_unknown(i):
            continue
        if dictionary.index(sp.id_to_piece(i)) != i + 1:
            bad.append(f"{sp.id_to_piece(i)!r} (sentencepiece {i}, dict.txt {dictionary.index(sp.id_to_piece(i))})")
    if bad:
        raise ExportError(
            f"dict.txt does not follow the sentencepiece model's order (fairseq id = sentencepiece "
            f"id + 1) for {len(bad)} pieces, e.g. {', '.join(bad[:3])}: rebuild dict.txt from the "
            "sentencepiece model (preprocess/prepare.sh does)"
        )
    mask = dictionary.index("<mask>")
    if mask != sp.get_piece_size() + 1:
        raise ExportError(f"<mask> has id {mask} in dict.txt; XLM-R's tokenizer puts it at {sp.get_piece_size() + 1}")


def _model_type(spm_path) -> str:
    from sentencepiece import sentencepiece_model_pb2  # needs protobuf (the export extra)

    proto = sentencepiece_model_pb2.ModelProto()
    with open(spm_path, "rb") as f:
        proto.ParseFromString(f.read())
    return {1: "unigram", 2: "bpe"}.get(proto.trainer_spec.model_type, str(proto.trainer_spec.model_type))


def build_tokenizer(spm_path: str, max_positions: int):
    """An XLM-R tokenizer for the sentencepiece model (unigram models; BPE models as a generic fast tokenizer)."""
    kind = _model_type(spm_path)
    if kind == "unigram":
        from transformers import XLMRobertaTokenizer

        kwargs = XLMRobertaTokenizer.convert_to_native_format(vocab_file=spm_path)
        tok = XLMRobertaTokenizer(**kwargs)
    elif kind == "bpe":
        tok = _bpe_tokenizer(spm_path)
    else:
        raise ExportError(f"sentencepiece model type '{kind}' of '{spm_path}' is not supported (unigram or bpe)")
    tok.model_max_length = max_positions
    return tok


def keep_special_text(tok) -> list:
    """Make literal special-token text in the input (``<mask>``, ``</s>``) stay text, as fairseq's
    sentencepiece and GPT-2 BPE read it; returns the special tokens whose text still cannot.

    ``split_special_tokens`` (saved in tokenizer_config.json) stops transformers from matching
    special tokens in raw text. A unigram model would then still pick the special pieces in its
    lattice (XLM-R's conversion gives them score 0, the best), so their scores are put below
    any path of single-character pieces over their text; sentencepiece never matches them. A
    special whose text has a character without a piece of its own (an unknown character: the
    unknown penalty is relative to the lowest score) can still win, and is returned."""
    import json as _json

    from tokenizers import Tokenizer

    tok.split_special_tokens = True
    tok.init_kwargs["split_special_tokens"] = True
    state = _json.loads(tok.backend_tokenizer.to_str())
    if state["model"].get("type") != "Unigram":
        return []  # BPE merges never build the special tokens from text
    vocab = state["model"]["vocab"]
    special_ids = sorted(set(tok.all_special_ids))
    normal = [score for i, (_, score) in enumerate(vocab) if i not in special_ids]
    pieces = {piece for piece, _ in vocab}
    longest = max(len(vocab[i][0]) for i in special_ids)
    floor = (min(normal) - 10.0) * (longest + 1) - 1.0
    for i in special_ids:
        vocab[i][1] = floor
    tok._tokenizer = Tokenizer.from_str(_json.dumps(state))
    return [vocab[i][0] for i in special_ids if any(c not in pieces for c in vocab[i][0])]


def _bpe_tokenizer(spm_path):
    # transformers builds a BPE tokenizer from the .model with sentencepiece's own ids;
    # shift them into XLM-R's layout (<s> <pad> </s> <unk>, pieces at id + 1, <mask>)
    from tokenizers import AddedToken, Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import BPE
    from transformers.convert_slow_tokenizer import SentencePieceExtractor, SpmConverter
    from transformers.tokenization_utils_tokenizers import TokenizersBackend

    extractor = SentencePieceExtractor(spm_path)
    kw = extractor.extract(BPE)
    spm_vocab, merges = kw["vocab"], kw["merges"]
    base = SpmConverter.build_tokenizer_from_spm_proto(proto=extractor.proto, vocab=spm_vocab, merges=merges)
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for piece, i in spm_vocab.items():
        if i >= 3:
            vocab[piece] = i + 1
    vocab["<mask>"] = len(spm_vocab) + 1
    byte_fallback = bool(extractor.proto.trainer_spec.byte_fallback)
    tokenizer = Tokenizer(BPE(vocab, merges, unk_token="<unk>", fuse_unk=True, byte_fallback=byte_fallback))
    # sentencepiece: normalise (precompiled charsmap), collapse whitespace, prepend "▁" to
    # every word; pieces never cross a word boundary (as XLM-R's converter sets it up)
    charsmap = extractor.proto.normalizer_spec.precompiled_charsmap
    if charsmap:
        tokenizer.normalizer = normalizers.Precompiled(charsmap)
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")]
    )
    tokenizer.decoder = base.decoder
    tokenizer.add_special_tokens([AddedToken(t, special=True) for t in ("<s>", "<pad>", "</s>", "<unk>", "<mask>")])
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 2)]
    )
    return TokenizersBackend(
        tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", sep_token="</s>",
        cls_token="<s>", unk_token="<unk>", pad_token="<pad>", mask_token="<mask>",
    )


#: the tokenizer kind of a model -> the Hugging Face architecture it is exported as
LAYOUTS = {"sentencepiece": "xlm-roberta", "gpt2": "roberta", "bert": "bert"}


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


def _row_tokens(tokenizer, dictionary, specials):
    """The Hugging Face token of each dictionary row (row = id): fairseq's specials as ``specials``."""
    from ..vocabulary import APPENDED_SYMBOLS

    tokens = list(specials[:4])
    for row in range(dictionary.nspecial, len(dictionary)):
        symbol = dictionary[row]
        if symbol == APPENDED_SYMBOLS[0]:
            tokens.append(specials[4])
        elif symbol in APPENDED_SYMBOLS or tokenizer.kind != "gpt2":
            tokens.append(symbol)
        else:
            token = tokenizer.token(symbol)
            # fairseq's madeupword fillers and other non-id symbols keep their text
            tokens.append(token if token is not None else symbol)
    return tokens


def build_row_tokenizer(tokenizer, dictionary, max_positions: int, work_dir: str):
    """A Hugging Face tokenizer whose ids are the dictionary's rows, for a GPT-2 BPE (RoBERTa)
    or WordPiece (BERT) model: the vocabulary re-numbered as fairseq's dict.txt, as
    transformers' own fairseq RoBERTa conversion does."""
    if tokenizer.kind == "gpt2":
        from transformers import RobertaTokenizerFast

        tokens = _row_tokens(tokenizer, dictionary, ("<s>", "<pad>", "</s>", "<unk>", "<mask>"))
        vocab = {}
        for i, t in enumerate(tokens):
            vocab.setdefault(t, i)
        vocab_path, merges_path = os.path.join(work_dir, "vocab.json"), os.path.join(work_dir, "merges.txt")
        with open(vocab_path, "w", encoding="utf-8") as f:
            json.dump(vocab, f, ensure_ascii=False)
        with open(tokenizer.files["vocab_bpe"], encoding="utf-8") as f, open(merges_path, "w", encoding="utf-8") as out:
            out.write("#version: 0.2\n")
            for line in f:
                parts = line.rstrip("\n").split(" ")
                # merges whose pieces the dictionary lacks cannot be used (fairseq maps them to <unk>)
                if len(parts) == 2 and not line.startswith("#") and all(x in vocab for x in (*parts, "".join(parts))):
                    out.write(line if line.endswith("\n") else line + "\n")
        tok = RobertaTokenizerFast(vocab=vocab_path, merges=merges_path)
    else:
        from transformers import BertTokenizerFast

        tokens = _row_tokens(tokenizer, dictionary, ("[CLS]", "[PAD]", "[SEP]", "[UNK]", "[MASK]"))
        vocab_path = os.path.join(work_dir, "vocab.txt")
        with open(vocab_path, "w", encoding="utf-8") as f:
            f.writelines(t + "\n" for t in tokens)
        tok = BertTokenizerFast(vocab=vocab_path, do_lower_case=tokenizer.lowercase)
    tok.model_max_length = max_positions
    return tok


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
    """Dense modules for CLSR's e (``representation``) and the projection head g (``projection``)."""
    modules = []
    if head == "pooled":
        return modules
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
           sts_table=None):
    """Write a sentence-transformers model for ``hub`` into ``out_dir``; returns the ``SentenceTransformer``.

    The export is written into a temporary sibling of ``out_dir``, verified
    against the hub on ``check_sentences`` (when given) and only then moved into
    place; see :func:`fairseq_clear.export.output_dir.staged_output` for what an
    existing ``out_dir`` may hold. ``pooling`` and ``normalize`` default to the model's own
    (``--sentence-pooling``, ``--sentence-normalize``): an imported sentence-transformers model
    keeps its Pooling and Normalize modules.
    """
    if normalize is None:
        normalize = bool(getattr(hub.model.args, "sentence_normalize", False))
    with staged_output(out_dir, overwrite=overwrite) as staging:
        st = _write_export(hub, staging, pooling, head, normalize, with_lm_head, sts_table)
        if check_sentences is not None:
            diff = verify(hub, staging, check_sentences, pooling, head, normalize, tolerance)
            logger.info("verified: the export matches the hub within %.1e on %d sentences", diff, len(check_sentences))
    return st


def _write_export(hub, out_dir, pooling, head, normalize, with_lm_head, sts_table=None):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    model = hub.model
    pooling = pooling or model.args.sentence_pooling
    kind = hub.tokenizer.tokenizer.kind
    if kind == "sentencepiece":
        check_vocabulary_layout(hub.tokenizer, hub.task.source_dictionary)
    max_positions = model.max_positions()
    with tempfile.TemporaryDirectory() as tmp:
        hf = convert_model(model, LAYOUTS[kind])
        if not with_lm_head:
            hf = getattr(hf, hf.base_model_prefix)  # the encoder alone (built without the unused pooler)
        hf.save_pretrained(tmp)
        vocab_dir = tempfile.mkdtemp(dir=tmp)
        if kind == "sentencepiece":
            tokenizer = build_tokenizer(hub.tokenizer.path, max_positions)
        else:
            tokenizer = build_row_tokenizer(hub.tokenizer.tokenizer, hub.task.source_dictionary, max_positions,
                                            vocab_dir)
        source = hub.tokenizer.tokenizer
        literal_specials = None  # Hugging Face's reading (an imported model's own tokenizer.json)
        if getattr(source, "fast", None) is None and kind in ("sentencepiece", "gpt2"):
            not_text = keep_special_text(tokenizer)
            literal_specials = {"text": True, "except": not_text}
            if not_text:
                logger.warning("literal %s in input text will be read as special tokens by the exported tokenizer "
                               "(its sentencepiece model has no piece for some of their characters); our hub "
                               "reads them as text", ", ".join(not_text))
        tokenizer.save_pretrained(tmp)
        # no pooler: sentence vectors come from the Pooling module, as in the paper
        transformer = Transformer(tmp, max_seq_length=max_positions, model_kwargs={"add_pooling_layer": False})
        modules = [transformer, Pooling(model.args.encoder_embed_dim, pooling_mode=pooling)]
        modules += head_modules(model, head)
        if normalize:
            modules.append(Normalize())
        st = SentenceTransformer(modules=modules, device="cpu")
        st.save(out_dir)
        # vocab.json + merges.txt / vocab.txt too: the files fairseq's bpe and clear-import-hf read
        for name in os.listdir(vocab_dir):
            shutil.copyfile(os.path.join(vocab_dir, name), os.path.join(out_dir, name))
    if not with_lm_head:
        # sentence-transformers does not save model_kwargs: without this, every load would
        # build (and warn about) RoBERTa's randomly initialised pooler
        config_path = os.path.join(out_dir, "sentence_bert_config.json")
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
        config["model_args"] = {"add_pooling_layer": False}
        with open(config_path, "w", encoding="utf-8") as f:
            json.dump(config, f, indent=2)
    if kind == "sentencepiece":
        # the sentencepiece model itself, for fairseq-side use and reproducibility
        shutil.copyfile(hub.tokenizer.path, os.path.join(out_dir, "sentencepiece.bpe.model"))
    from .model_card import render

    with open(os.path.join(out_dir, "README.md"), "w", encoding="utf-8") as f:  # replaces the generic card
        f.write(render(hub, pooling, head, normalize, len(modules), sts_table))
    with open(os.path.join(out_dir, "fairseq_clear_export.json"), "w", encoding="utf-8") as f:
        json.dump({"pooling": pooling, "head": head, "normalize": normalize,
                   "max_positions": max_positions, "arch": getattr(model.args, "arch", None),
                   "literal_special_tokens": literal_specials}, f, indent=2)
    return st


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

    st = SentenceTransformer(out_dir, device="cpu")
    sentences = list(sentences) + literal_special_probes(st.tokenizer, out_dir)
    ours = hub.embed(sentences, pooling=pooling, head=head, normalize=normalize)
    theirs = st.encode(sentences, convert_to_numpy=True, batch_size=8)
    tokenize = getattr(st, "preprocess", None) or st.tokenize  # tokenize(): sentence-transformers < 6
    features = tokenize(sentences)
    for i, s in enumerate(sentences):
        got = features["input_ids"][i][features["attention_mask"][i].bool()].tolist()  # without the padding
        want = hub.tokenizer.encode([s], max_positions=hub.model.max_positions())[0].tolist()
        if got != want:
            raise ExportError(f"exported tokenizer disagrees on {s!r}: {got[:12]} vs {want[:12]}")
    diff = float(np.abs(ours - theirs).max()) if len(sentences) else 0.0
    if not diff <= tolerance:  # written so that NaN fails too
        raise ExportError(f"exported model differs from the hub by {diff:.2e} > {tolerance:g}")
    return diff
