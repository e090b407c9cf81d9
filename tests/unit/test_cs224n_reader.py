"""clear-prepare-multitask's CS224N reader (preprocessing.multitask.read_cs224n) on fixtures in the
default project's format (tests/support/data/cs224n): tab-separated, an index column with an empty
header name, then ``id``, the sentences and the label (``sentiment`` 0-4, ``is_duplicate`` 0.0/1.0,
``similarity`` 0-5); texts with a double quote quoted as csv writes them; ``-test-student`` files
without a label column."""

import shutil
from pathlib import Path

import pytest

from fairseq_clear.errors import NotUtf8Error
from fairseq_clear.preprocessing.common import PrepareError
from fairseq_clear.preprocessing.multitask import read_cs224n

FIXTURES = Path(__file__).resolve().parents[1] / "support" / "data" / "cs224n"


def read(task, split, directory=FIXTURES):
    skipped = {}
    return read_cs224n(str(directory), task, split, skipped), skipped


def test_sentiment_rows_and_labels():
    rows, skipped = read("sentiment", "train")
    assert skipped == {}
    assert rows[0] == (("A warm , funny , engaging film .",), 4.0)  # the leading space stripped
    assert [label for _, label in rows] == [4.0, 2.0, 0.0, 3.0, 1.0]
    # a quoted field: the csv quotes are undone, the doubled "" become one
    assert rows[3][0] == ("The film 's \" twist \" is lots of fun .",)
    dev, _ = read("sentiment", "dev")
    assert [t for t, _ in dev] == [("A deep and meaningful film .",), ("Half a story .",)]


def test_paraphrase_and_sts_pairs():
    rows, skipped = read("paraphrase", "train")
    assert skipped == {} and len(rows) == 4
    assert rows[0] == (("What makes one angry?", "What is the one thing that makes you most angry?"), 1.0)
    assert rows[1] == (('"What does ""turning the ship slowly"" mean?"', "How do I turn a ship?"), 0.0)
    assert [label for _, label in rows] == [1.0, 0.0, 1.0, 0.0]
    sts, _ = read("sts", "train")
    assert [label for _, label in sts] == [0.2, 4.6, 3.333, 5.0]
    assert sts[2][0] == ('Bonds fell after he said the economy "could grow".', 'He said the economy "could grow".')
    assert len(read("sts", "dev")[0]) == len(read("paraphrase", "dev")[0]) == 2


@pytest.mark.parametrize("task", ["sentiment", "paraphrase", "sts"])
def test_test_student_files_have_no_labels_and_are_left_out(task):
    assert read(task, "test")[0] is None


def test_a_missing_split_is_named(tmp_path):
    with pytest.raises(PrepareError, match="no .*quora-train.csv"):
        read("paraphrase", "train", tmp_path)
    assert read("paraphrase", "test", tmp_path)[0] is None  # the test split is optional


def _copy(tmp_path):
    d = tmp_path / "data"
    shutil.copytree(FIXTURES, d)
    return d


def test_bad_rows_are_counted_not_kept(tmp_path):
    d = _copy(tmp_path)
    with open(d / "sts-train.csv", "a", encoding="utf-8") as f:
        f.write("1\tx1\tA dog runs.\tA dog is running.\t\n")             # no label
        f.write("2\tx2\tA dog runs.\t\t4.0\n")                           # empty sentence2
        f.write("3\tx3\tA dog\truns.\tA dog is running.\t4.0\n")         # a stray tab: one field too many
        f.write("4\tx4\tA dog runs.\t4.0\n")                             # one field short
    rows, skipped = read("sts", "train", d)
    assert len(rows) == 4
    assert skipped == {"no valid label": 1, "empty sentence": 1, "wrong number of fields": 2}
    # a label outside the task's set is an error, not a skipped row: tests/reliability/test_prepare_multitask_safety.py


def _one_line(excinfo):
    message = str(excinfo.value)
    assert "\n" not in message
    return message


def test_comma_separated_file_is_refused_in_one_line(tmp_path):
    d = _copy(tmp_path)
    (d / "ids-sst-train.csv").write_text(",id,sentence,sentiment\n0,ab,A film .,3\n", encoding="utf-8")
    with pytest.raises(PrepareError) as e:
        read("sentiment", "train", d)
    message = _one_line(e)
    assert "ids-sst-train.csv" in message and "no column sentence" in message and "tab-separated" in message


def test_non_utf8_file_is_refused_in_one_line(tmp_path):
    d = _copy(tmp_path)
    (d / "sts-dev.csv").write_bytes(b"\tid\tsentence1\tsentence2\tsimilarity\n0\tab\tcaf\xe9 .\tA caf\xe9 .\t4.0\n")
    with pytest.raises(NotUtf8Error) as e:
        read("sts", "dev", d)
    assert "sts-dev.csv:2:" in _one_line(e) and "not UTF-8" in str(e.value)


def test_an_unclosed_quote_is_refused_in_one_line_naming_its_line(tmp_path):
    d = _copy(tmp_path)
    path = d / "quora-dev.csv"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[1] = lines[1].replace("How can I", '"How can I')  # opens a quote that never closes
    path.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(PrepareError) as e:
        read("paraphrase", "dev", d)
    message = _one_line(e)
    assert "quora-dev.csv:2:" in message and "unclosed double quote" in message


def test_a_csv_error_is_refused_in_one_line(tmp_path):
    d = _copy(tmp_path)
    (d / "sts-dev.csv").write_text("\tid\tsentence1\tsentence2\tsimilarity\n0\tab\t\"" + "x" * 140_000 + "\tB\t1.0\n",
                                   encoding="utf-8")
    with pytest.raises(PrepareError) as e:
        read("sts", "dev", d)
    message = _one_line(e)
    assert "sts-dev.csv:2:" in message and "field larger than field limit" in message
