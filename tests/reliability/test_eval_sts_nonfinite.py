"""clear-eval-sts never prints or writes a non-finite score as a result.

A --model whose vectors are NaN (one NaN weight) used to print a table of ``n/a`` and
``alignment nan   uniformity nan`` and exit 0; now it is one ``error:`` line and no JSON. A model
whose vectors are all equal has an undefined Spearman: ``n/a`` in the table with a note saying why,
``null`` in the JSON, and never ``nan``.
"""

import json
import shutil

import pytest

from embedding_helpers import write_senteval_tree
from hf_standins import make_bert
from helpers import bin_path, run_captured

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return make_bert(tmp_path_factory.mktemp("nonfinite") / "bert")


def _edited(bert, model, name, fill):
    from safetensors.torch import load_file, save_file

    shutil.copytree(bert, model)
    sd = load_file(str(model / "model.safetensors"))
    sd[name] = sd[name].clone().fill_(fill)
    save_file(sd, str(model / "model.safetensors"), metadata={"format": "pt"})
    return model


def _eval(model, tmp_path):
    tree = write_senteval_tree(tmp_path / "sts")
    return run_captured([bin_path("clear-eval-sts"), "--model", model, "--cpu", "--sts-dir", tree,
                         "--tasks", "STS-B,SICK-R", "--output", tmp_path / "o.json"])


def test_nan_vectors_are_an_error_not_a_table(bert, tmp_path):
    model = _edited(bert, tmp_path / "model", "bert.embeddings.LayerNorm.weight", float("nan"))
    proc = _eval(model, tmp_path)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2 and len(errors) == 1, (proc.returncode, proc.stdout, proc.stderr[-3000:])
    assert str(model) in errors[0] and "not finite" in errors[0]
    assert "nan" not in proc.stdout.lower() and not (tmp_path / "o.json").exists()


def test_constant_vectors_are_reported_invalid_never_nan(bert, tmp_path):
    # the last layer norm's weight 0: every token's output is its bias, every vector the same
    model = _edited(bert, tmp_path / "model", "bert.encoder.layer.1.output.LayerNorm.weight", 0.0)
    proc = _eval(model, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "nan" not in proc.stdout.lower(), proc.stdout
    row = next(line for line in proc.stdout.splitlines() if line.startswith("model-mean"))
    assert row.split()[1:] == ["n/a"] * 3, row  # STS-B, SICK-R, Avg
    assert "n/a: no valid score" in proc.stdout
    text = (tmp_path / "o.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    table = json.loads(text)["models"]["model"]["mean"]["table"]
    assert table == {"STS-B": None, "SICK-R": None, "Avg": None}, table
