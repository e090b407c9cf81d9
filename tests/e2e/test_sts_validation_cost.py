"""--sts-validation costs one embedding pass of the dev set's distinct sentences per validation:
tokenised and cut into batches once, each distinct sentence embedded once, the score unchanged."""

import pytest

from embedding_helpers import write_stsb


def dev_with_repeats(path):
    """write_stsb's pairs plus pairs that reuse their sentences with new partners (STS-B dev repeats
    90 of its 3,000 sides); no pair repeats, so no two similarities tie by construction."""
    write_stsb(path, n=45)
    rows = path.read_text(encoding="utf-8").splitlines()
    sides = [r.split("\t")[5:7] for r in rows]
    extra = [f"main-captions\tMSRvid\t2012test\t9{i:03d}\t{(i % 5) + 0.5:.3f}\t{sides[i][0]}\t{sides[i + 7][1]}"
             for i in range(0, 30, 3)]
    path.write_text("\n".join(rows + extra) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def validator(hub, ckpt, tmp_path):
    from fairseq_clear.tasks.sts_validation import StsValidator

    def make(pooling=None, batch_size=16):
        dev = dev_with_repeats(tmp_path / "sts-dev.csv")
        return StsValidator(dev, str(ckpt[1] / "sentencepiece.model"), hub.task.source_dictionary, pooling=pooling, batch_size=batch_size)

    return make


def plain_score(v, model, pooling):
    """The plain computation: every side of every pair tokenised and embedded, in the file's order."""
    from fairseq_clear.preprocessing.sts_readers import spearman
    from fairseq_clear.models.inference import cosine_rows, embed_tokens

    n = len(v.pairs)
    tokens = v.tokenizer.encode(v.pairs.sent1 + v.pairs.sent2, max_positions=model.max_positions())
    vectors = embed_tokens(model, tokens, (pooling,), batch_size=v.batch_size)[pooling]
    return spearman(cosine_rows(vectors[:n], vectors[n:]), v.pairs.scores)


def test_dev_set_is_tokenised_and_batched_once_across_validations(hub, validator, monkeypatch):
    from fairseq_clear.models import inference

    v = validator()
    distinct = len(set(v.pairs.sent1 + v.pairs.sent2))
    assert distinct < 2 * len(v.pairs)
    encoded, cut = [], []
    encode, length_batches = v.tokenizer.encode_counted, inference.length_batches
    # the one tokenisation of the validation, embed() and the CLIs: a list of sentences at a time
    monkeypatch.setattr(v.tokenizer, "encode_counted", lambda s, **kw: encoded.append(len(s)) or encode(s, **kw))
    monkeypatch.setattr(inference, "length_batches", lambda *a: cut.append(1) or length_batches(*a))
    scores = [v.score(hub.model) for _ in range(3)]
    assert encoded == [distinct], "the distinct sentences are tokenised once, at the first validation"
    assert cut == [1], "and cut into length batches once"
    assert scores[0] == scores[1] == scores[2]


def test_repeated_sentences_are_embedded_once(hub, validator, monkeypatch):
    v = validator(batch_size=7)
    rows = []
    features = type(hub.model).sentence_features
    monkeypatch.setattr(type(hub.model), "sentence_features",
                        lambda self, src, **kw: rows.append(src.size(0)) or features(self, src, **kw))
    v.score(hub.model)
    assert sum(rows) == len(set(v.pairs.sent1 + v.pairs.sent2)) < 2 * len(v.pairs)
    assert max(rows) <= 7


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_score_equals_the_plain_computation(hub, validator, pooling):
    v = validator(pooling=pooling)
    expected = plain_score(v, hub.model, pooling)
    hub.model.train()
    assert v.score(hub.model) == expected and v.score(hub.model) == expected
    assert hub.model.training, "the model's mode is restored"
    hub.model.eval()
