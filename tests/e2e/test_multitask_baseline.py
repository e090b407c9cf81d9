"""clear-eval-multitask --baseline cosine (seed 004 §4.3): the pair tasks by the cosine of [CLS], on an
imported model (a tiny random BERT stand-in: no sentiment head, so sentiment and Overall n/a), against
numpy / scipy / sklearn on the same vectors; the paraphrase threshold chosen on the train split."""

import json
import sys

import numpy as np
import pytest

from helpers import run_cli
from hf_standins import make_bert
from multitask_helpers import write_glue


def test_cosine_baseline_equals_numpy_and_scipy_on_the_same_vectors(tmp_path):
    from scipy.stats import pearsonr
    from sklearn.metrics import accuracy_score

    from fairseq_clear.preprocessing.glue_data import get_task, read_tsv
    from fairseq_clear.export.from_hf import import_hf
    from fairseq_clear.models.hub_interface import from_pretrained

    model = tmp_path / "model"
    import_hf(str(make_bert(tmp_path / "bert")), str(model))
    glue = write_glue(tmp_path)
    data = tmp_path / "mt"
    run_cli([sys.executable, "-m", "fairseq_clear.cli.prepare_multitask", "--glue-dir", glue, "--paraphrase", "MRPC",
             "--tokenizer-from", model, "--out", data])
    report = tmp_path / "baseline.json"
    table = run_cli([sys.executable, "-m", "fairseq_clear.cli.eval_multitask", model / "model.pt", "--data", data,
                     "--baseline", "cosine", "--json", report]).stdout
    result = json.loads(report.read_text())
    row = result["rows"][0]
    # no sentiment head: sentiment n/a and no Overall (never the mean of the two others)
    assert row["sentiment_acc"] is None and row["overall"] is None and "n/a: none, so no Overall" in table

    # the same vectors, independently: the hub embeds the dev sentences' text ([CLS], the encoder's output)
    hub = from_pretrained(str(model), "model.pt", str(data))

    def cosines(task, name, split="dev"):
        spec = get_task(name)
        rows = list(read_tsv(str(glue / name / f"{split}.tsv"), spec.header, spec.num_fields,
                             max(spec.inputs + (spec.label,)) + 1))
        a, b = ([r[i].strip() for r in rows] for i in spec.inputs)
        u = hub.embed(a, pooling="cls", head="pooled", normalize=False).astype(np.float64)
        v = hub.embed(b, pooling="cls", head="pooled", normalize=False).astype(np.float64)
        cos = (u * v).sum(1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1)
        return cos, np.array([float(r[spec.label]) for r in rows])

    cos, scores = cosines("sts", "STS-B")
    assert np.allclose(result["predictions"]["sts"]["pred"], cos, atol=1e-5)
    sts = pearsonr(cos, scores)[0]
    assert row["sts_pearson"] == pytest.approx(sts, abs=1e-5)

    cos, labels = cosines("paraphrase", "MRPC")
    assert np.allclose(result["predictions"]["paraphrase"]["cosine"], cos, atol=1e-5)
    paraphrase = accuracy_score(labels, (cos > row["threshold"]).astype(int))
    assert row["paraphrase_acc"] == pytest.approx(paraphrase)
    # the threshold is the train split's best (not the scored dev split's): no threshold does better on it
    train_cos, train_labels = cosines("paraphrase", "MRPC", "train")
    best = max(accuracy_score(train_labels, (train_cos > t).astype(int))
               for t in np.concatenate([[-2.0], np.sort(train_cos)]))
    assert accuracy_score(train_labels, (train_cos > row["threshold"]).astype(int)) == pytest.approx(best)
    assert row["threshold_split"] == "train" and row["threshold_rows"] == len(train_labels)
    assert "sentiment" not in result["predictions"]
