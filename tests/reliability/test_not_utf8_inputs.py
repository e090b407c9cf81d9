"""A text input that is not UTF-8 fails with one ``error:`` line naming the file and the line.

Python's UnicodeDecodeError names neither (only a byte position inside a read buffer); some of
these commands ended in a traceback, others in a line without the file.
"""

import pytest

from embedding_helpers import write_senteval_tree
from helpers import bin_path, run_cli

BAD = b"\xff\xfe"


def _spoil(path, line):
    """Put bytes that are not UTF-8 at the end of 1-based ``line`` of ``path``."""
    lines = path.read_bytes().split(b"\n")
    lines[line - 1] += BAD
    path.write_bytes(b"\n".join(lines))


def _eval_sts(tmp_path, checkpoint, data):
    tree = write_senteval_tree(tmp_path / "sts")
    target = tree / "STSBenchmark" / "sts-test.csv"
    _spoil(target, 4)
    return ([bin_path("clear-eval-sts"), "--checkpoint", checkpoint, "--data", data, "--cpu",
             "--sts-dir", tree, "--tasks", "STS-B", "--output", tmp_path / "o.json"], f"{target}:4:")


def _embed(tmp_path, checkpoint, data):
    text = tmp_path / "in.txt"
    text.write_bytes(b"one sentence\n" * 20000 + b"two " + BAD + b"\nthree\n")  # past the first read buffer
    return ([bin_path("clear-embed"), "--checkpoint", checkpoint, "--data", data, "--cpu",
             "--input", text, "--output", tmp_path / "e.npy"], f"{text}:20001:")


def _prepare_pairs(tmp_path, checkpoint, data):
    csv = tmp_path / "pairs.csv"
    csv.write_bytes(b"sent0,sent1\nhello there,hi there\nbad " + BAD + b",x\n")
    return ([bin_path("clear-prepare-pairs"), "--train", csv, "--data", data, "--out", tmp_path / "pairs"],
            f"{csv}:3:")


def _glue_split(tmp_path, checkpoint, data):
    tsv = tmp_path / "glue" / "CoLA" / "train.tsv"
    tsv.parent.mkdir(parents=True)
    tsv.write_bytes(b"src\t1\t\tgood one\nsrc\t0\t\tbad " + BAD + b"\n")
    return ([bin_path("clear-glue"), "split", tmp_path / "glue", "CoLA", data / "sentencepiece.model",
             tmp_path / "out"], f"{tsv}:2:")


@pytest.mark.parametrize("case", [_eval_sts, _embed, _prepare_pairs, _glue_split], ids=lambda c: c.__name__[1:])
def test_text_that_is_not_utf8_is_named_by_file_and_line(ckpt, tmp_path, case):
    checkpoint, data = ckpt
    args, expected = case(tmp_path, checkpoint, data)
    proc = run_cli(args, check=False)
    errors = [line for line in proc.stdout.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2 and "Traceback" not in proc.stdout, proc.stdout[-3000:]
    assert len(errors) == 1 and expected in errors[0] and "not UTF-8" in errors[0], proc.stdout[-3000:]
