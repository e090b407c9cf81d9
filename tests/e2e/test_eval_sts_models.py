"""clear-eval-sts puts any encoder in one table: a fairseq checkpoint, a sentence-transformers
directory, a Hugging Face directory, or a Python callable (library)."""

import json

import numpy as np
import pytest

from embedding_helpers import write_senteval_tree
from helpers import bin_path, run_cli, synthetic_sentences

pytest.importorskip("sentence_transformers")


@pytest.fixture(scope="module")
def st_dir(tmp_path_factory):
    """A tiny random BERT sentence-transformers model with a WordPiece vocabulary, built offline."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    root = tmp_path_factory.mktemp("st")
    words = sorted({w.strip(".,!").lower() for s in synthetic_sentences(300, seed=7) for w in s.split()})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "!", ","] + words
    hf = root / "hf"
    hf.mkdir()
    (hf / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=128)).save_pretrained(hf)
    BertTokenizerFast(vocab_file=str(hf / "vocab.txt")).save_pretrained(hf)
    transformer = Transformer(str(hf), max_seq_length=128)
    st = SentenceTransformer(modules=[transformer, Pooling(32, pooling_mode="mean")], device="cpu")
    st.save(str(root / "st"))
    return root


def test_checkpoint_and_sentence_transformers_model_in_one_table(ckpt, st_dir, tmp_path):
    from sentence_transformers import SentenceTransformer

    from fairseq_clear.evaluation.sts.scoring import as_encoder, load_sts, score

    tree = write_senteval_tree(tmp_path / "sts")
    checkpoint, data = ckpt
    out = tmp_path / "o.json"
    proc = run_cli([bin_path("clear-eval-sts"), "--checkpoint", checkpoint, "--data", data, "--cpu",
                    "--sts-dir", tree, "--model", st_dir / "st", "--model", st_dir / "hf", "--output", out])
    report = json.loads(out.read_text())
    assert set(report["models"]) == {checkpoint.stem, "st", "hf"}
    for row in (f"{checkpoint.stem}-[CLS]", f"{checkpoint.stem}-mean", "st-st", "hf-mean"):
        assert row in proc.stdout, proc.stdout[-2000:]

    # the sentence-transformers row equals its own encode() scored the same way
    st = SentenceTransformer(str(st_dir / "st"), device="cpu")
    pair_sets, _ = load_sts(str(tree))
    mine = score(as_encoder(lambda s: st.encode(s, convert_to_numpy=True)), pair_sets)["callable"]["table"]
    theirs = report["models"]["st"]["st"]["table"]
    for task, value in mine.items():
        assert theirs[task] == pytest.approx(value, abs=1e-6), task
    # a plain HF directory with mean pooling is the same model without the ST wrapper (its
    # vectors; Spearman over the near-equal cosines of a random model swings with 1e-7 changes)
    some = ["the cat sees the ball .", "a dog reads a story today", ""]
    np.testing.assert_allclose(as_encoder(str(st_dir / "hf"))(some)["mean"], st.encode(some), atol=1e-5)


def test_library_takes_a_callable(tmp_path):
    from fairseq_clear.evaluation.sts.scoring import evaluate_sts

    tree = write_senteval_tree(tmp_path / "sts")
    rng = np.random.default_rng(0)
    cache = {}

    def random_vectors(sentences):
        return np.stack([cache.setdefault(s, rng.normal(size=8)) for s in sentences])

    res = evaluate_sts({"random": random_vectors}, str(tree), tasks=["STS-B", "SICK-R"], align_split="none")
    table = res["random"]["callable"]["table"]
    assert set(table) == {"STS-B", "SICK-R", "Avg"} and abs(table["STS-B"]) < 60


def test_model_only_needs_output(st_dir, tmp_path):
    tree = write_senteval_tree(tmp_path / "sts")
    proc = run_cli([bin_path("clear-eval-sts"), "--sts-dir", tree, "--model", st_dir / "st"], check=False)
    assert proc.returncode == 2 and "--output is required without --checkpoint" in proc.stdout
    proc = run_cli([bin_path("clear-eval-sts"), "--sts-dir", tree, "--model", tmp_path / "nope",
                    "--output", tmp_path / "o.json"], check=False)
    assert proc.returncode == 2 and "is not a directory" in proc.stdout


def test_protocol_senteval_through_the_cli(st_dir, tmp_path):
    tree = write_senteval_tree(tmp_path / "sts")
    out = tmp_path / "r.json"
    proc = run_cli([bin_path("clear-eval-sts"), "--model", st_dir / "hf", "--sts-dir", tree, "--protocol", "senteval",
                    "--senteval-average", "mean", "--align-uniform-split", "none", "--output", out])
    assert "protocol senteval" in proc.stdout and "mean of the subsets" in proc.stdout
    report = json.loads(out.read_text())
    assert report["protocol"] == "senteval" and report["aggregation"] == "mean"
    res = report["models"]["hf"]["mean"]
    assert res["table"]["STS12"] == pytest.approx(res["tasks"]["STS12"]["mean"])
    assert res["table"]["STS-B"] == pytest.approx(res["tasks"]["STS-B"]["senteval"]["spearman"])
    assert set(res["tables"]) == {"simcse", "senteval"}
    bad = run_cli([bin_path("clear-eval-sts"), "--model", st_dir / "hf", "--sts-dir", tree, "--protocol", "senteval",
                   "--split", "dev", "--output", out], check=False)
    assert bad.returncode == 2 and "--split dev is for --protocol simcse" in bad.stdout


def test_modules_json_may_only_name_sentence_transformers_classes(st_dir, tmp_path):
    """modules.json names classes to import: a foreign one is refused before any import
    (sentence-transformers before version 6 imported it from a local directory)."""
    import shutil

    from fairseq_clear.evaluation.sts.scoring import as_encoder

    model = tmp_path / "st"
    shutil.copytree(st_dir / "st", model)
    modules = json.loads((model / "modules.json").read_text())
    modules[0]["type"] = "os.system"
    (model / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(ValueError, match=r"modules.json names the module type 'os.system'"):
        as_encoder(str(model))
    tree = write_senteval_tree(tmp_path / "sts")
    proc = run_cli([bin_path("clear-eval-sts"), "--sts-dir", tree, "--model", model,
                    "--output", tmp_path / "o.json"], check=False)
    assert proc.returncode != 0 and "only sentence_transformers.* modules" in proc.stdout
    assert not (tmp_path / "o.json").exists()
