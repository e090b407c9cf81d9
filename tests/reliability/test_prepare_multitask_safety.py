"""clear-prepare-multitask deletes nothing it did not write (it writes --out through the export's
output directory: export/output_dir.py) and refuses, in one ``error:`` line naming file, line and
value, what would have given a wrong class count or a traceback; the task refuses a
multitask.json it cannot trust."""

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from helpers import bin_path, run_captured, run_cli, synthetic_sentences, write_dict_from_spm
from multitask_helpers import write_glue

#: the module fixture is built once: every test of this file on one pytest-xdist worker
pytestmark = pytest.mark.xdist_group("test_prepare_multitask_safety")

CS224N = Path(__file__).resolve().parents[1] / "support" / "data" / "cs224n"


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    """A sentencepiece model and its dict.txt (what --tokenizer-from reads)."""
    import sentencepiece as spm

    d = tmp_path_factory.mktemp("tokenizer")
    (d / "text.txt").write_text("\n".join(synthetic_sentences(300, 0)) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(d / "text.txt"), model_prefix=str(d / "sentencepiece"), vocab_size=120,
                                   model_type="unigram", hard_vocab_limit=False, minloglevel=2)
    write_dict_from_spm(str(d / "sentencepiece.model"), str(d / "dict.txt"))
    (d / "text.txt").unlink()
    return d


@pytest.fixture
def cs224n(tmp_path):
    return Path(shutil.copytree(CS224N, tmp_path / "cs224n"))


def _args(tokenizer, *args):
    return [bin_path("clear-prepare-multitask"), "--tokenizer-from", tokenizer, *args]


def _prepare(tokenizer, *args):
    return run_cli(_args(tokenizer, *args))


def _one_error(proc) -> str:
    """The one ``error:`` line of a run refused with status 2 and no traceback."""
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, proc.stderr[-2000:]
    return errors[0]


def _tree(root) -> dict:
    """{relative path: bytes} of every file under ``root``."""
    return {os.path.relpath(os.path.join(d, f), root): Path(d, f).read_bytes()
            for d, _, names in os.walk(root) for f in names}


def _staging_left(parent) -> list:
    return [p for p in os.listdir(parent) if ".tmp-" in p]


# ---- --out: only our own files, replaced through the manifest -----------------------------------

def test_a_rerun_replaces_our_files_and_keeps_the_users(tokenizer, tmp_path):
    glue = write_glue(tmp_path, sizes=(("train", 8), ("dev", 4)))
    out = tmp_path / "mt"
    prepare = ["--glue-dir", glue, "--paraphrase", "MRPC", "--out", out]
    _prepare(tokenizer, *prepare)
    (out / "notes.txt").write_text("mine")
    (out / "checkpoints").mkdir()
    (out / "checkpoints" / "checkpoint_last.pt").write_bytes(b"weights")
    (tmp_path / "mt.partial").mkdir()  # the user's own, beside OUT
    (tmp_path / "mt.partial" / "keep.txt").write_text("mine too")

    _prepare(tokenizer, *prepare, "--limit-train", "4")
    summary = json.loads((out / "multitask.json").read_text())
    assert summary["tasks"]["sentiment"]["splits"]["train"]["rows_written"] == 4  # the new output
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "checkpoints" / "checkpoint_last.pt").read_bytes() == b"weights"
    assert (tmp_path / "mt.partial" / "keep.txt").read_text() == "mine too"
    assert not _staging_left(tmp_path)

    # a directory that is not our output is refused, and left as it was
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "dict.txt").write_text("the user's")
    message = _one_error(run_captured(_args(tokenizer, "--glue-dir", glue, "--paraphrase", "MRPC", "--out", theirs)))
    assert "theirs" in message and "not empty" in message
    assert _tree(theirs) == {"dict.txt": b"the user's"}


def test_an_output_without_our_manifest_is_refused_not_deleted(tokenizer, tmp_path, cs224n):
    """An earlier version's output (multitask.json, no manifest) cannot be told from the user's files."""
    out = tmp_path / "mt"
    (out / "sentiment").mkdir(parents=True)
    (out / "multitask.json").write_text("{}")
    (out / "sentiment" / "notes.txt").write_text("mine")
    message = _one_error(run_captured(_args(tokenizer, "--cs224n-dir", cs224n, "--out", out)))
    assert "export_manifest.json" in message and out.name in message
    assert _tree(out) == {"multitask.json": b"{}", "sentiment/notes.txt": b"mine"}


def test_out_with_a_trailing_slash_or_through_a_symlink(tokenizer, tmp_path, cs224n):
    out = tmp_path / "mt"
    for _ in range(2):  # new, then a rerun into it
        _prepare(tokenizer, "--cs224n-dir", cs224n, "--tasks", "sentiment", "--out", f"{out}/")
        assert json.loads((out / "multitask.json").read_text())["tasks"]["sentiment"]["num_classes"] == 5
    link = tmp_path / "link"
    link.symlink_to(out)
    _prepare(tokenizer, "--cs224n-dir", cs224n, "--tasks", "sentiment", "--limit-train", "3", "--out", link)
    assert link.is_symlink() and (out / "sentiment" / "label" / "train.label").read_text().count("\n") == 3
    assert not _staging_left(tmp_path)


#: ``python -c``: clear-prepare-multitask SIGKILLed at its Nth change (unlink, rename, ...) inside
#: OUT; with a huge N it prints how many changes a whole run makes
KILL_AT = f"""
import atexit, os, signal, sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[1] / "support")!r})
from change_watch import watch
from fairseq_clear.cli.prepare_multitask import main

calls = watch(sys.argv[1], int(sys.argv[2]), lambda count: os.kill(os.getpid(), signal.SIGKILL))
atexit.register(lambda: print("changes", calls[0]))
main(sys.argv[3:])
"""


def test_a_kill_while_replacing_leaves_whole_files_and_a_rerun_finishes(tokenizer, tmp_path, cs224n):
    out, previous, new = tmp_path / "mt", tmp_path / "previous", tmp_path / "new"
    args = ["--cs224n-dir", cs224n, "--tasks", "sentiment", "paraphrase"]
    _prepare(tokenizer, *args, "--limit-train", "2", "--out", previous)
    (previous / "notes.txt").write_text("mine")
    _prepare(tokenizer, *args, "--out", new)
    before, after = _tree(previous), _tree(new)
    ours = set(after) - {"export_manifest.json"}
    assert ours <= set(before) and any(before[rel] != after[rel] for rel in ours)  # the rerun changes files

    def killed_at(n):
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(previous, out)
        return run_cli([sys.executable, "-c", KILL_AT, out, n, *_args(tokenizer, *args, "--out", out)[1:]],
                       check=False)

    changes = int(killed_at(10**9).stdout.split("changes")[-1])
    assert _tree(out) == {**after, "notes.txt": b"mine"}

    from fairseq_clear.export.output_dir import interrupted
    from fairseq_clear.tasks.contrastive import TaskConfigError
    from fairseq_clear.tasks.multitask import read_meta

    mixed = []
    for n in sorted({0, 1, changes // 2, changes - 1}):
        proc = killed_at(n)
        assert proc.returncode != 0 and "changes" not in proc.stdout, (n, proc.stdout[-2000:])
        now = _tree(out)
        assert now["notes.txt"] == b"mine"
        for rel in ours:  # each file whole: the previous run's or the new one's, none gone
            assert now.get(rel) in (before[rel], after[rel]), (n, rel)
        if not (all(now[rel] == before[rel] for rel in ours) or all(now[rel] == after[rel] for rel in ours)):
            mixed.append(n)  # neither the previous output nor the new one: the task refuses it
            assert interrupted(out)
            with pytest.raises(TaskConfigError, match="run it again"):
                read_meta(str(out))
        _prepare(tokenizer, *args, "--out", out)  # the rerun finishes
        assert _tree(out) == {**after, "notes.txt": b"mine"}, n
        assert not interrupted(out) and not _staging_left(tmp_path)
    assert mixed  # the kill half-way through the replacement


def test_an_interrupted_overwrite_is_finished_by_the_next_export(tmp_path, monkeypatch):
    """The export's own --overwrite (no writer): a failure between two replacements left files whose
    content no manifest recorded, and every later --overwrite refused them."""
    from fairseq_clear.export import output_dir

    out = tmp_path / "out"
    for version in ("v1", "v2"):
        if version == "v2":
            real, calls = os.replace, []

            def replace(src, dst, *a, **k):
                calls.append(dst)
                if len(calls) == 3:  # the journal, one file, then stopped
                    raise KeyboardInterrupt
                return real(src, dst, *a, **k)

            monkeypatch.setattr(output_dir.os, "replace", replace)
            with pytest.raises(KeyboardInterrupt):
                with output_dir.staged_output(out, overwrite=True) as staging:
                    for name in ("a.txt", "b.txt"):
                        Path(staging, name).write_text(version)
            monkeypatch.setattr(output_dir.os, "replace", real)
            assert sorted(Path(out, n).read_text() for n in ("a.txt", "b.txt")) == ["v1", "v2"]
            assert output_dir.interrupted(out)
        with output_dir.staged_output(out, overwrite=True) as staging:
            for name in ("a.txt", "b.txt"):
                Path(staging, name).write_text(version)
    assert [Path(out, n).read_text() for n in ("a.txt", "b.txt")] == ["v2", "v2"] and not output_dir.interrupted(out)


# ---- labels: the task's documented set, or one error line ----------------------------------------

LABEL_CASES = [  # (source, file, task, a row with a bad label, the label)
    ("cs224n", "ids-sst-dev.csv", "sentiment", "9\tzz\tA film .\t1e9", "1e9"),  # M3: 1,000,000,001 classes
    ("cs224n", "ids-sst-dev.csv", "sentiment", "9\tzz\tA film .\t7", "7"),      # an 8-class head
    ("cs224n", "ids-sst-dev.csv", "sentiment", "9\tzz\tA film .\tnan", "nan"),
    ("cs224n", "ids-sst-dev.csv", "sentiment", "9\tzz\tA film .\tinf", "inf"),
    ("cs224n", "ids-sst-dev.csv", "sentiment", "9\tzz\tA film .\t\u00b2", "\u00b2"),  # str.isdigit says yes
    ("cs224n", "ids-sst-dev.csv", "sentiment", "9\tzz\tA film .\t\u0663", "\u0663"),  # float() reads 3
    ("cs224n", "ids-sst-dev.csv", "sentiment", "9\tzz\tA film .\t-1", "-1"),
    ("cs224n", "ids-sst-dev.csv", "sentiment", "9\tzz\tA film .\t2.5", "2.5"),
    ("cs224n", "quora-dev.csv", "paraphrase", "9\tzz\tIs it?\tIs it so?\t0.5", "0.5"),
    ("cs224n", "sts-dev.csv", "sts", "9\tzz\tA dog runs.\tA dog ran.\t7.5", "7.5"),
    ("cs224n", "sts-dev.csv", "sts", "9\tzz\tA dog runs.\tA dog ran.\tnan", "nan"),
    ("glue", "SST-2/dev.tsv", "sentiment", "A film .\t5", "5"),  # six classes
    ("glue", "MRPC/dev.tsv", "paraphrase", "2\t1\t2\tA film .\tA movie .", "2"),
    ("glue", "STS-B/dev.tsv", "sts", "9\tg\tf\ty\to\ts\ts\tA dog runs.\tA dog ran.\tinf", "inf"),
]


@pytest.mark.parametrize("source,name,task,row,value", LABEL_CASES,
                         ids=[f"{c[0]}-{c[2]}-{c[4].encode('unicode_escape').decode()}" for c in LABEL_CASES])
def test_a_label_outside_the_tasks_set_is_one_error_line(tokenizer, tmp_path, cs224n, source, name, task, row,
                                                         value):
    root = cs224n if source == "cs224n" else write_glue(tmp_path, sizes=(("train", 8), ("dev", 4)))
    path = root / name
    with open(path, "a", encoding="utf-8") as f:
        f.write(row + "\n")
    line = len(path.read_text(encoding="utf-8-sig").splitlines())
    out = tmp_path / "mt"
    option = ["--cs224n-dir", root] if source == "cs224n" else ["--glue-dir", root, "--paraphrase", "MRPC"]
    message = _one_error(run_captured(_args(tokenizer, *option, "--out", out)))
    assert f"{name}:{line}: {task} label {value!r} is not" in message, message
    assert not out.exists() and not _staging_left(tmp_path)


def test_the_class_count_is_the_sources_not_the_largest_label(tokenizer, tmp_path, cs224n):
    for name in ("ids-sst-train.csv", "ids-sst-dev.csv"):  # only classes 0-2 occur
        path = cs224n / name
        lines = path.read_text(encoding="utf-8").splitlines()
        path.write_text("\n".join([lines[0]] + [line[:-1] + str(int(line[-1]) % 3) for line in lines[1:]]) + "\n",
                        encoding="utf-8")
    _prepare(tokenizer, "--cs224n-dir", cs224n, "--tasks", "sentiment", "--out", tmp_path / "mt")
    assert json.loads((tmp_path / "mt" / "multitask.json").read_text())["tasks"]["sentiment"]["num_classes"] == 5


@pytest.mark.parametrize("damage", ["not-utf8", "huge-field"])
def test_an_unreadable_input_is_one_error_line_naming_its_line(tokenizer, tmp_path, cs224n, damage):
    path = cs224n / "sts-train.csv"
    lines = path.read_bytes().splitlines(keepends=True)
    if damage == "not-utf8":
        lines[2] = lines[2].replace(b"dogs", b"d\xf6gs")
        expected = "sts-train.csv:3: not UTF-8"
    else:  # over python csv's field_size_limit (131,072 characters)
        lines[1] = lines[1].replace(b"A man", b"A " + b"m" * 140_000)
        expected = "sts-train.csv:2: unreadable as tab-separated CSV (field larger than field limit"
    path.write_bytes(b"".join(lines))
    out = tmp_path / "mt"
    message = _one_error(run_captured(_args(tokenizer, "--cs224n-dir", cs224n, "--out", out)))
    assert expected in message, message
    assert not out.exists() and not _staging_left(tmp_path)


# ---- the task: multitask.json it cannot trust ----------------------------------------------------

@pytest.mark.parametrize("content,expected", [
    (b"{not json", "not clear-prepare-multitask's JSON record"),
    (b'{"tasks": {"sentiment": {"num_classes": 2}}}\xff', "not clear-prepare-multitask's JSON record"),
    (b'[1, 2]', "its 'tasks' is not an object"),
    (b'{"tasks": [1]}', "its 'tasks' is not an object"),
    (b'{"tasks": {"sentiment": 5}}', "its 'tasks' is not an object"),
    (b'{"tasks": {"sentiment": {"num_classes": 1000000001}}}', "class count 1000000001 is not an integer in 2..5"),
    (b'{"tasks": {"sentiment": {"num_classes": 6}}}', "class count 6 is not an integer in 2..5"),
    (b'{"tasks": {"sentiment": {"num_classes": 1}}}', "class count 1 is not an integer in 2..5"),
    (b'{"tasks": {"sentiment": {"num_classes": true}}}', "class count True is not"),
    (b'{"tasks": {"sentiment": {"num_classes": 2.0}}}', "class count 2.0 is not"),
    (b'{"tasks": {"sentiment": {"num_classes": NaN}}}', "class count nan is not"),
    (b'{"tasks": {"sentiment": {"num_classes": "5"}}}', "class count '5' is not"),
])
def test_read_meta_refuses_a_record_it_cannot_trust_in_one_line(tmp_path, content, expected):
    from fairseq_clear.tasks.contrastive import TaskConfigError
    from fairseq_clear.tasks.multitask import read_meta

    (tmp_path / "multitask.json").write_bytes(content)
    with pytest.raises(TaskConfigError) as e:
        read_meta(str(tmp_path))
    message = str(e.value)
    assert "\n" not in message and str(tmp_path / "multitask.json") in message and expected in message, message


def test_read_meta_reads_what_the_preparation_writes(tmp_path):
    from fairseq_clear.tasks.multitask import read_meta

    assert read_meta(str(tmp_path)) == {}
    for n in (2, 5):
        (tmp_path / "multitask.json").write_text(json.dumps({"tasks": {"sentiment": {"num_classes": n}, "sts": {}}}))
        assert read_meta(str(tmp_path))["tasks"]["sentiment"]["num_classes"] == n
