"""SICK is read by one reader (preprocessing/sts_readers.py ``sick_rows``): SICK-R (clear-eval-sts,
SentEval's regressor), SICK-E (clear-eval-senteval) and clear-prepare-pairs find its columns by the
header's names and report a malformed line alike."""

import argparse

import pytest

from fairseq_clear.evaluation.senteval import data as senteval_data
from fairseq_clear.preprocessing import pairs, sts_readers

ROWS = [("1", "A man plays.", "A man is playing.", "4.5", "ENTAILMENT"),
        ("2", "A dog runs.", "A cat sleeps.", "1.5", "CONTRADICTION"),
        ("3", "A boy eats.", "A child is eating.", "3.6", "NEUTRAL")]


def _sick(folder, order, lines=None):
    """SICK_{train,trial,test_annotated}.txt with the columns in ``order`` (names of SICK_COLUMNS)."""
    folder.mkdir(parents=True, exist_ok=True)
    position = {c: k for k, c in enumerate(sts_readers.SICK_COLUMNS)}
    body = lines or ["\t".join(row[position[c]] for c in order) for row in ROWS]
    for name in sts_readers.SICK_FILES.values():
        (folder / name).write_text("\n".join(["\t".join(order)] + body) + "\n", encoding="utf-8")
    return folder / sts_readers.SICK_FILES["train"]


def _pairs(path):
    args = argparse.Namespace(sts_threshold=4.0, sick_score_threshold=None)
    return pairs.read_split([str(path)], "sick", args, None)


def test_every_sick_entry_reads_the_columns_the_header_names(tmp_path):
    """The header puts the judgment before the score: SICK-E read position 5 as the label before."""
    order = ("pair_ID", "sentence_A", "sentence_B", "entailment_judgment", "relatedness_score")
    train = _sick(tmp_path / "SICK", order)
    relatedness = sts_readers.read_sick(str(train))
    assert relatedness.scores.tolist() == [4.5, 1.5, 3.6]
    entailment = senteval_data.read_sick_entailment(str(tmp_path / "SICK"))
    a, b, labels = entailment.splits["train"]
    assert a == relatedness.sent1 and b == relatedness.sent2
    assert labels.tolist() == [senteval_data.SICK_E_LABELS[row[4]] for row in ROWS]
    assert [(s1, s2) for s1, s2, _ in _pairs(train).labelled] == list(zip(relatedness.sent1, relatedness.sent2))


def test_a_malformed_sick_line_is_reported_alike_by_every_entry(tmp_path):
    """An empty line and a line of two columns: SICK-R and SICK-E refuse the file with the same
    file:line reasons in one line; clear-prepare-pairs (blank lines are no rows there) counts the
    short row with the same reason."""
    order = sts_readers.SICK_COLUMNS
    lines = ["\t".join(ROWS[0]), "", "\t".join(ROWS[1][:2]), "\t".join(ROWS[2])]
    train = _sick(tmp_path / "SICK", order, lines)
    empty, short = f"{train}:3: empty line", f"{train}:4: expected at least"
    with pytest.raises(sts_readers.STSFormatError) as relatedness:
        sts_readers.read_sick(str(train))
    with pytest.raises(senteval_data.SentEvalDataError) as entailment:
        senteval_data.read_sick_entailment(str(tmp_path / "SICK"))
    for error in (relatedness, entailment):
        message = str(error.value)
        assert "\n" not in message and "2 malformed line(s)" in message, message
        assert empty in message and short in message and "columns, found 2" in message, message
    rows = _pairs(train)
    assert rows.read == 3 and rows.skipped == {
        "malformed row (expected at least 5 tab-separated columns, found 2)": 1}, rows.skipped
