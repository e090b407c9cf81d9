"""A crafted Hugging Face / sentence-transformers directory ends in one ``error:`` line naming the file.

Each case damages one file of a tiny BERT stand-in (tests/support/hf_standins.py) the way a hostile or
broken download could: JSON nested too deeply for Python's reader (RecursionError), files that
are not UTF-8, JSON of the wrong type (AttributeError / TypeError inside transformers), a config
field transformers' strict validation refuses, an ``--out`` under a file (FileExistsError). The
real console script runs; it must exit 2 with exactly one ``error:`` line on stderr that names
the file, and no traceback.
"""

import json
import shutil

import pytest

from hf_standins import make_bert
from embedding_helpers import write_senteval_tree
from helpers import bin_path, run_captured

pytest.importorskip("transformers")

NESTED = "[" * 100000 + "]" * 100000


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return make_bert(tmp_path_factory.mktemp("crafted") / "bert")


#: case -> (the file the error must name, its new bytes or text; None: the file is removed)
CASES = {
    "config-nested-too-deeply": ("config.json", '{"x": ' + NESTED + "}"),
    "config-not-utf8": ("config.json", b"\xff\xfe{}"),
    "config-field-of-wrong-type": ("config.json", {"pad_token_id": "0"}),  # transformers' strict check
    "vocab-not-utf8": ("vocab.txt", b"[PAD]\n\xff\xfe\n"),
    "tokenizer-json-a-list": ("tokenizer.json", "[1]"),
    "tokenizer-json-model-not-an-object": ("tokenizer.json", '{"model": 5}'),
    "tokenizer-config-not-utf8": ("tokenizer_config.json", b"\xff"),
    "tokenizer-config-a-list": ("tokenizer_config.json", "[1, 2]"),
    "special-tokens-map-a-list": ("special_tokens_map.json", "[1]"),
    "modules-json-nested-too-deeply": ("modules.json", NESTED),
    "pytorch-model-bin-garbage": ("pytorch_model.bin", b"garbage" * 10),
    "safetensors-garbage": ("model.safetensors", b"garbage" * 10),
}


def _damage(model, case) -> str:
    """Apply ``case`` to the copy ``model``; the path of the damaged file."""
    name, content = CASES[case]
    path = model / name
    if isinstance(content, dict):
        cfg = json.loads(path.read_text())
        cfg.update(content)
        content = json.dumps(cfg)
    if name == "tokenizer.json":
        (model / "vocab.txt").unlink()  # so that the vocabulary is read from tokenizer.json
    if name == "pytorch_model.bin":
        (model / "model.safetensors").unlink()
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return str(path)


def _run(args):
    return run_captured(args)


def _one_error_line(proc, named):
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    assert len(errors) == 1 and named in errors[0], proc.stderr[-3000:]


@pytest.mark.parametrize("case", list(CASES))
def test_import_hf_names_the_damaged_file(bert, tmp_path, case):
    model = tmp_path / "model"
    shutil.copytree(bert, model)
    named = _damage(model, case)
    out = tmp_path / "out"
    _one_error_line(_run([bin_path("clear-import-hf"), model, out]), named)
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == ["model"]  # no staging left


def test_import_hf_out_under_a_file(bert, tmp_path):
    (tmp_path / "file").write_text("mine")
    _one_error_line(_run([bin_path("clear-import-hf"), bert, tmp_path / "file" / "out"]), str(tmp_path / "file"))
    assert (tmp_path / "file").read_text() == "mine"


@pytest.mark.parametrize("case", ["config-nested-too-deeply", "config-not-utf8", "config-field-of-wrong-type",
                                  "tokenizer-config-a-list", "special-tokens-map-a-list",
                                  "modules-json-nested-too-deeply", "pytorch-model-bin-garbage",
                                  "safetensors-garbage"])
def test_eval_sts_model_names_the_damaged_file(bert, tmp_path, case):
    tree = write_senteval_tree(tmp_path / "sts")
    model = tmp_path / "model"
    shutil.copytree(bert, model)
    named = _damage(model, case)
    _one_error_line(_run([bin_path("clear-eval-sts"), "--model", model, "--cpu", "--sts-dir", tree,
                          "--tasks", "STS-B", "--output", tmp_path / "o.json"]), named)
    assert not (tmp_path / "o.json").exists()


@pytest.mark.parametrize("content", [b'{"model": "\xff\xfe"}', '{"version": "1.0", "model": {"type": "Nope"}}'],
                         ids=["not-utf8", "not-a-tokenizer"])
def test_import_hf_names_the_users_tokenizer_json_not_its_staged_copy(bert, tmp_path, content):
    """With vocab.txt present, tokenizer.json is read only after it is copied to the staging directory:
    the error named that copy (a hidden .out.tmp-* path the user never wrote)."""
    model = tmp_path / "model"
    shutil.copytree(bert, model)
    path = model / "tokenizer.json"
    path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    proc = _run([bin_path("clear-import-hf"), model, tmp_path / "out"])
    _one_error_line(proc, str(path))
    assert ".out.tmp-" not in proc.stderr, proc.stderr[-3000:]
    assert not (tmp_path / "out").exists() and [p.name for p in tmp_path.iterdir()] == ["model"]
