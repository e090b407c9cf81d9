"""A fixed toy relatedness problem, the input of scripts/senteval_reference.py and of
tests/e2e/test_senteval_protocol.py: SentEval's code and ours see the same sentences and vectors."""

import numpy as np

DIM = 12
SIZES = {"train": 320, "dev": 90, "test": 110}


def toy_relatedness(kind: str, seed: int = 0):
    """{split: (sentences A, sentences B, scores)} and {sentence: vector}; ``kind`` 'stsb'
    (scores 0..5, with exact 0 and 5) or 'sick' (1..5)."""
    rng = np.random.RandomState(seed)
    low = 0.0 if kind == "stsb" else 1.0
    data, vectors, n = {}, {}, 0
    for split, size in SIZES.items():
        s1, s2, scores = [], [], []
        for _ in range(size):
            y = float(np.round(rng.uniform(low, 5.0) * 5) / 5)  # 0.2 steps
            if rng.rand() < 0.05:
                y = float(rng.choice([low, 5.0]))
            a = rng.normal(size=DIM)
            b = a + rng.normal(size=DIM) * (5.2 - y) / 2.0
            # distinct sentences of 1..6 words, so that SentEval's length sort matters
            words_a, words_b = 1 + rng.randint(6), 1 + rng.randint(6)
            sa = " ".join([f"a{n}"] + ["x"] * (words_a - 1))
            sb = " ".join([f"b{n}"] + ["y"] * (words_b - 1))
            n += 1
            vectors[sa], vectors[sb] = a.astype(np.float32), b.astype(np.float32)
            s1.append(sa)
            s2.append(sb)
            scores.append(y)
        data[split] = (s1, s2, scores)
    return data, vectors


# ---- the classifier tasks: a toy SentEval data tree ---------------------------------------------

CLASSIFIER_DIM = 8

#: (task, SentEval's task name, configuration, classifier changes) of each reference case:
#: SentEval's two standard configurations, and its MLP option on a probing task
CLASSIFIER_CASES = [
    ("MR", "MR", "prototyping", {}),
    ("SST5", "SST5", "paper", {}),
    ("TREC", "TREC", "paper", {}),
    ("MRPC", "MRPC", "paper", {}),
    ("SICK-E", "SICKEntailment", "paper", {}),
    ("SNLI", "SNLI", "prototyping", {}),
    ("Tense", "Tense", "paper", {}),
    ("Tense-MLP", "Tense", "prototyping", {"nhid": 20, "dropout": 0.1}),
]

#: SentEval's params['classifier'] and kfold for the two configurations (its README)
SENTEVAL_CONFIGS = {
    "paper": ({"nhid": 0, "optim": "adam", "batch_size": 64, "tenacity": 5, "epoch_size": 4}, 10),
    "prototyping": ({"nhid": 0, "optim": "rmsprop", "batch_size": 128, "tenacity": 3, "epoch_size": 2}, 5),
}


class _Toy:
    def __init__(self, seed):
        self.rng = np.random.RandomState(seed)
        self.vectors, self.n = {}, 0

    def sentence(self, vector, prefix="s"):
        """A new sentence of 1..6 tokens (lengths repeat, so SentEval's sort keys tie) for ``vector``."""
        words = 1 + self.rng.randint(6)
        s = " ".join([f"{prefix}{self.n}"] + ["w"] * (words - 1))
        self.n += 1
        self.vectors[s] = np.asarray(vector, dtype=np.float32)
        return s

    def single(self, label, nclasses, noise=1.6):
        centre = np.zeros(CLASSIFIER_DIM)
        centre[label % CLASSIFIER_DIM] = 1.5
        return self.sentence(centre + self.rng.normal(size=CLASSIFIER_DIM) * noise)

    def pair(self, label, kind):
        a = self.rng.normal(size=CLASSIFIER_DIM)
        if kind == "mrpc":  # 1: a paraphrase (close), 0: not
            b = a + self.rng.normal(size=CLASSIFIER_DIM) * (0.6 if label else 1.4)
        else:  # 3 classes: contradiction, neutral, entailment (SICK-E) / entailment, neutral, contradiction (SNLI)
            scale = {0: 1.6, 1: 1.0, 2: 0.4}[label]
            b = a + self.rng.normal(size=CLASSIFIER_DIM) * scale
        return self.sentence(a, "a"), self.sentence(b, "b")


def write_toy_senteval_tree(root, seed: int = 0):
    """SentEval's data layout (``root``/downstream/..., ``root``/probing/...) for the tasks of
    :data:`CLASSIFIER_CASES`, in its exact file formats; returns {sentence: vector}, the
    sentence as a SentEval batcher sees it (its tokens joined by one space)."""
    import os

    toy = _Toy(seed)
    rng = toy.rng
    down = os.path.join(str(root), "downstream")

    def write(path, lines, encoding="utf-8"):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding=encoding, newline="") as f:
            f.write("".join(line + "\n" for line in lines))

    # MR: latin-1, one sentence a line; one sentence with a latin-1 letter
    pos = [toy.single(1, 2) for _ in range(110)]
    neg = [toy.single(0, 2) for _ in range(100)]
    vec = toy.vectors.pop(pos[0])
    pos[0] = pos[0] + " caf\u00e9"
    toy.vectors[pos[0]] = vec
    write(os.path.join(down, "MR", "rt-polarity.pos"), pos, "latin-1")
    write(os.path.join(down, "MR", "rt-polarity.neg"), neg, "latin-1")

    # SST fine: "label sentence", labels 0..4
    for split, n in (("train", 250), ("dev", 80), ("test", 90)):
        labels = rng.randint(5, size=n)
        labels[:5] = np.arange(5)
        write(os.path.join(down, "SST", "fine", f"sentiment-{split}"), [f"{y} {toy.single(y, 5)}" for y in labels])

    # TREC: latin-1, "COARSE:fine question"
    coarse = ["ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"]
    for name, n in (("train_5500.label", 300), ("TREC_10.label", 100)):
        labels = np.concatenate([np.arange(6).repeat(12), rng.randint(6, size=n - 72)]) if n > 100 else \
            rng.randint(6, size=n)
        write(os.path.join(down, "TREC", name), [f"{coarse[y]}:fine{y} {toy.single(y, 6)}" for y in labels],
              "latin-1")

    # MRPC: a header, then Quality, #1 ID, #2 ID, #1 String, #2 String
    for name, n in (("msr_paraphrase_train.txt", 280), ("msr_paraphrase_test.txt", 120)):
        lines = ["\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
        for k in range(n):
            y = int(rng.rand() < 0.6)
            a, b = toy.pair(y, "mrpc")
            lines.append(f"{y}\t{k}\t{k + 1000}\t{a}\t{b}")
        write(os.path.join(down, "MRPC", name), lines)

    # SICK: a header, then pair_ID, sentence_A, sentence_B, relatedness_score, entailment_judgment
    names = ["CONTRADICTION", "NEUTRAL", "ENTAILMENT"]
    for name, n in (("SICK_train.txt", 300), ("SICK_trial.txt", 90), ("SICK_test_annotated.txt", 120)):
        lines = ["pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment"]
        for k in range(n):
            y = rng.randint(3)
            a, b = toy.pair(y, "sick")
            lines.append(f"{k}\t{a}\t{b}\t{1 + 2 * y}.0\t{names[y]}")
        write(os.path.join(down, "SICK", name), lines)

    # SNLI: s1.*, s2.* (latin-1) and labels.*
    snli = ["entailment", "neutral", "contradiction"]
    for split, n in (("train", 300), ("dev", 90), ("test", 90)):
        s1, s2, labels = [], [], []
        for _ in range(n):
            y = rng.randint(3)
            a, b = toy.pair(2 - y, "snli")
            s1.append(a)
            s2.append(b)
            labels.append(snli[y])
        write(os.path.join(down, "SNLI", f"s1.{split}"), s1, "latin-1")
        write(os.path.join(down, "SNLI", f"s2.{split}"), s2, "latin-1")
        write(os.path.join(down, "SNLI", f"labels.{split}"), labels)

    # probing (Tense): "tr|va|te<TAB>label<TAB>sentence"
    lines = []
    for tag, n in (("tr", 300), ("va", 90), ("te", 100)):
        for _ in range(n):
            y = rng.randint(2)
            lines.append(f"{tag}\t{['PAST', 'PRES'][y]}\t{toy.single(y, 2, noise=2.0)}")
    write(os.path.join(str(root), "probing", "past_present.txt"), lines)
    return toy.vectors
