"""A fixed toy relatedness problem, the input of scripts/senteval_reference.py and of
tests/test_senteval_protocol.py: SentEval's code and ours see the same sentences and vectors."""

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
