"""The ``transformers`` tokenizers of an export, one builder per Hugging Face layout.

The tokenizer classes of :mod:`fairseq_clear.vocabulary` pick theirs (``hf_check``,
``hf_tokenizer``): XLM-R's from a sentencepiece model, RoBERTa's vocab.json + merges.txt
and BERT's vocab.txt re-numbered as fairseq's dict.txt rows (as transformers' own fairseq
RoBERTa conversion does). This module imports nothing else of the package but its errors.
"""

import json
import os

from .errors import ExportError


def check_sentencepiece_layout(sp, path: str, dictionary):
    """dict.txt must be XLM-R's layout: fairseq id = sentencepiece id + 1, <mask> right after
    (``sp``: the ``SentencePieceProcessor`` of the model at ``path``)."""
    if (sp.unk_id(), sp.bos_id(), sp.eos_id()) != (0, 1, 2):
        raise ExportError(
            f"sentencepiece model '{path}' has <unk>, <s>, </s> at ids "
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
            "sentencepiece model (clear-prepare does)"
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


def roberta_row_tokenizer(tokens, vocab_bpe: str, max_positions: int, work_dir: str):
    """A RoBERTa tokenizer whose ids are the rows of ``tokens`` (the dictionary's, as GPT-2
    byte-level tokens), with the merges of ``vocab_bpe`` that its tokens can use; writes
    vocab.json and merges.txt into ``work_dir``."""
    from transformers import RobertaTokenizerFast

    vocab = {}
    for i, t in enumerate(tokens):
        vocab.setdefault(t, i)
    vocab_path, merges_path = os.path.join(work_dir, "vocab.json"), os.path.join(work_dir, "merges.txt")
    with open(vocab_path, "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(vocab_bpe, encoding="utf-8") as f, open(merges_path, "w", encoding="utf-8") as out:
        out.write("#version: 0.2\n")
        for line in f:
            parts = line.rstrip("\n").split(" ")
            # merges whose pieces the dictionary lacks cannot be used (fairseq maps them to <unk>)
            if len(parts) == 2 and not line.startswith("#") and all(x in vocab for x in (*parts, "".join(parts))):
                out.write(line if line.endswith("\n") else line + "\n")
    tok = RobertaTokenizerFast(vocab=vocab_path, merges=merges_path)
    tok.model_max_length = max_positions
    return tok


def bert_row_tokenizer(tokens, lowercase: bool, max_positions: int, work_dir: str):
    """A BERT tokenizer whose ids are the rows of ``tokens`` (WordPiece tokens); writes vocab.txt
    into ``work_dir``."""
    from transformers import BertTokenizerFast

    vocab_path = os.path.join(work_dir, "vocab.txt")
    with open(vocab_path, "w", encoding="utf-8") as f:
        f.writelines(t + "\n" for t in tokens)
    tok = BertTokenizerFast(vocab=vocab_path, do_lower_case=lowercase)
    tok.model_max_length = max_positions
    return tok
