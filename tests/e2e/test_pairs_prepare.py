"""clear-prepare-pairs: every input format, skip counts, and the binarized output."""

import argparse
import json

import numpy as np
import pytest

from fairseq_clear.preprocessing import pairs
from fairseq_clear.preprocessing.common import PrepareError
from helpers import bin_path, run_cli, shared


def read(path, fmt="auto", hard=None, sts_threshold=4.0, sick_score_threshold=None):
    args = argparse.Namespace(sts_threshold=sts_threshold, sick_score_threshold=sick_score_threshold)
    rows = pairs.read_split([str(path)], fmt, args, hard)
    return rows


def write(path, text, encoding="utf-8"):
    path.write_text(text, encoding=encoding)
    return path


def test_simcse_csv_with_and_without_hard_negatives(tmp_path):
    csv = write(tmp_path / "nli_for_simcse.csv",
                'sent0,sent1,hard_neg\n"A, b.",B c.,C d.\n,x,y\nE f.,F g.,\nG h.,H i.,I j.\n')
    rows = read(csv)
    assert pairs.detect_format(str(csv)) == "simcse-csv"
    assert rows.read == 4 and rows.has_hard_negative_column
    assert rows.triples == [("A, b.", "B c.", "C d."), ("G h.", "H i.", "I j.")]
    assert rows.skipped == {"empty sentence": 1, "empty hard negative": 1}
    rows = read(csv, hard=False)
    assert [t[2] for t in rows.triples] == [None, None, None]  # the row with an empty hard_neg now counts


def test_nli_jsonl_pairs_entailment_with_a_contradiction_of_the_same_premise(tmp_path):
    records = [
        ("P1", "e1", "entailment"), ("P1", "c1", "contradiction"), ("P1", "n1", "neutral"),
        ("P2", "e2", "entailment"), ("P2", "e2b", "entailment"), ("P2", "c2", "contradiction"),
        ("P3", "e3", "entailment"),  # no contradiction for P3
        ("P4", "c4", "contradiction"), ("P4", "c4b", "contradiction"), ("P4", "e4", "entailment"),
        ("P5", "x", "-"),
    ]
    path = tmp_path / "snli_1.0_train.jsonl"
    path.write_text("".join(json.dumps({"sentence1": p, "sentence2": h, "gold_label": g}) + "\n"
                            for p, h, g in records) + "not json\n")
    rows = read(path)
    triples = pairs.assemble(rows, hard_negatives=True)
    assert triples == [("P1", "e1", "c1"), ("P2", "e2", "c2"), ("P2", "e2b", "c2"), ("P4", "e4", "c4")]
    assert rows.skipped == {
        "malformed row": 1,
        "no gold label ('-')": 1,
        "not a positive pair (label/score)": 1,
        "positive pair without a hard negative for its sentence": 1,
        "negative pair not used as a hard negative": 1,  # P4's second contradiction
    }
    # CLSR-NLI: every entailment pair, no hard negatives
    rows = read(path)
    assert [t[:2] for t in pairs.assemble(rows, hard_negatives=False)] == [
        ("P1", "e1"), ("P2", "e2"), ("P2", "e2b"), ("P3", "e3"), ("P4", "e4")]
    assert rows.skipped["negative pair (used only with --hard-negatives)"] == 4


def test_stsb_glue_and_original_layouts(tmp_path):
    glue = write(tmp_path / "train.tsv",
                 "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
                 "0\tg\tf\ty\t1\tn\tn\tA plane.\tAn air plane.\t5.000\n"
                 "1\tg\tf\ty\t2\tn\tn\tA man.\tA woman.\t4.000\n"
                 "2\tg\tf\ty\t3\tn\tn\tC d.\tE f.\tn/a\n")
    rows = read(glue)
    assert pairs.detect_format(str(glue)) == "stsb"
    assert pairs.assemble(rows, False) == [("A plane.", "An air plane.", None)]
    # score 4.0 is not > 4 (CLSR keeps scores *higher* than 4); 'n/a' is no score
    assert rows.skipped == {"not a positive pair (label/score)": 1, "no STS score": 1}
    original = write(tmp_path / "sts-train.csv",
                     "main-captions\tMSRvid\t2012test\t0001\t4.5\tA b.\tC d.\n"
                     "main-captions\tMSRvid\t2012test\t0004\t3.8\tE f.\tG h.\textra\n")
    rows = read(original)
    assert pairs.assemble(rows, False) == [("A b.", "C d.", None)]
    rows = read(original, sts_threshold=3.0)
    assert len(pairs.assemble(rows, False)) == 2
    no_score = write(tmp_path / "test.tsv", "index\tsentence1\tsentence2\n0\ta\tb\n")
    with pytest.raises(PrepareError, match="score"):
        read(no_score, fmt="stsb")


def test_mrpc_with_bom(tmp_path):
    path = write(tmp_path / "train.tsv",
                 "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                 "1\t1\t2\tHe said \" yes .\tHe agreed .\n0\t3\t4\tX .\tY .\n", encoding="utf-8")
    rows = read(path)
    assert pairs.detect_format(str(path)) == "mrpc"
    assert pairs.assemble(rows, False) == [('He said " yes .', "He agreed .", None)]
    assert rows.skipped == {"negative pair (used only with --hard-negatives)": 1}


def test_sick_entailment_and_relatedness_modes(tmp_path):
    path = write(tmp_path / "SICK_train.txt",
                 "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\r\n"
                 "1\tA\tB\t4.5\tENTAILMENT\r\n2\tA\tC\t4.6\tCONTRADICTION\r\n"
                 "3\tD\tE\t4.8\tNEUTRAL\r\n4\tF\tG\t2.0\tENTAILMENT\r\n")
    rows = read(path)
    assert pairs.detect_format(str(path)) == "sick"
    assert pairs.assemble(rows, False) == [("A", "B", None), ("F", "G", None)]
    rows = read(path)
    assert pairs.assemble(rows, True) == [("A", "B", "C")]
    # SICK-R: relatedness > 4 decides, whatever the entailment judgment
    rows = read(path, sick_score_threshold=4.0)
    assert pairs.assemble(rows, False) == [("A", "B", None), ("A", "C", None), ("D", "E", None)]


def test_quora_duplicates_with_quoted_newlines(tmp_path):
    path = write(tmp_path / "quora_duplicate_questions.tsv",
                 'id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n'
                 '0\t1\t2\tHow do I learn?\tWhat is the way to learn?\t1\n'
                 '1\t3\t4\t"A question\nover two lines?"\tAnother?\t0\n'
                 '2\t5\t6\tHow do I learn?\tWhy is the sky blue?\t0\n')
    rows = read(path)
    assert pairs.detect_format(str(path)) == "quora"
    assert rows.read == 3
    assert pairs.assemble(rows, False) == [("How do I learn?", "What is the way to learn?", None)]
    rows = read(path)
    assert pairs.assemble(rows, True) == [
        ("How do I learn?", "What is the way to learn?", "Why is the sky blue?")]


def test_unknown_format_is_refused(tmp_path):
    path = write(tmp_path / "mystery.txt", "a\tb\n")
    with pytest.raises(PrepareError, match="--format"):
        pairs.detect_format(str(path))


def test_cli_binarizes_sick_with_the_data_dictionary(tiny_data, tmp_path):
    sick = shared("sts", "SICK", "SICK_train.txt")
    with open(sick, encoding="utf-8") as f:
        judgments = [line.rstrip("\r\n").split("\t")[4] for line in list(f)[1:] if line.strip()]
    expected = judgments.count("ENTAILMENT")
    out = tmp_path / "sick"
    proc = run_cli([bin_path("clear-prepare-pairs"), "--train", sick, "--data", tiny_data, "--out", out])
    assert f"train: {len(judgments)} rows read, {expected} rows written" in proc.stdout
    assert f"skipped {judgments.count('CONTRADICTION')}: negative pair" in proc.stdout
    summary = json.loads((out / "pairs.json").read_text())
    assert summary["columns"] == ["sent0", "sent1"] and not summary["hard_negatives"]
    assert summary["splits"]["train"]["pairs_written"] == expected
    assert sum(summary["splits"]["train"]["skipped"].values()) == len(judgments) - expected

    from fairseq.data import Dictionary, data_utils

    dictionary = Dictionary.load(str(out / "dict.txt"))
    assert (out / "dict.txt").read_bytes() == (tiny_data / "dict.txt").read_bytes()
    assert (out / "sentencepiece.model").read_bytes() == (tiny_data / "sentencepiece.model").read_bytes()
    first = (out / "raw" / "train.sent0").read_text(encoding="utf-8").splitlines()[0]
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(tiny_data / "sentencepiece.model"))
    for column in ("sent0", "sent1"):
        assert (out / column / "dict.txt").read_bytes() == (tiny_data / "dict.txt").read_bytes()
        data = data_utils.load_indexed_dataset(str(out / column / "train"), dictionary)
        assert len(data) == expected
    data = data_utils.load_indexed_dataset(str(out / "sent0" / "train"), dictionary)
    # fairseq id = sentencepiece id + 1 for ordinary pieces (docs/design.md)
    ids = [dictionary.index(p) for p in sp.encode(first, out_type=str)]
    assert data[0].tolist() == ids + [dictionary.eos()]
    assert np.all(np.asarray(data.sizes) > 1)  # no empty line that would misalign the columns


def test_cli_reports_errors_naming_the_option(tiny_data, tmp_path):
    bad = write(tmp_path / "x.csv", "sent0,sent1\n")
    proc = run_cli([bin_path("clear-prepare-pairs"), "--train", bad, "--data", tiny_data,
                    "--out", tmp_path / "o"], check=False)
    assert proc.returncode == 2 and "no training pairs" in proc.stdout
    proc = run_cli([bin_path("clear-prepare-pairs"), "--train", bad, "--data", tmp_path,
                    "--out", tmp_path / "o"], check=False)
    assert proc.returncode == 2 and "--dict" in proc.stdout and "dict.txt" in proc.stdout
    # dict.txt but no tokenizer beside it: --data named, with what was looked for
    (tmp_path / "dict.txt").write_text("a 1\n")
    proc = run_cli([bin_path("clear-prepare-pairs"), "--train", bad, "--data", tmp_path,
                    "--out", tmp_path / "o"], check=False)
    assert proc.returncode == 2 and "--data" in proc.stdout and "holds no tokenizer" in proc.stdout
    proc = run_cli([bin_path("clear-prepare-pairs"), "--train", bad, "--data", tmp_path,
                    "--sentencepiece-model", tmp_path / "none.model", "--out", tmp_path / "o"], check=False)
    assert proc.returncode == 2 and "--sentencepiece-model" in proc.stdout
