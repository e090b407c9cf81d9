"""clear-prepare for many machines (preprocessing/shards.py): the vocabulary once from a sample, then
shards prepared separately into fairseq's DATA/shardK layout, which the plugin's task reads one per
epoch; a finished shard is skipped on a rerun, a damaged one made again; the summary covers all."""

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

from fairseq_clear.preprocessing.common import PrepareError  # noqa: E402
from fairseq_clear.preprocessing.pipeline import prepare  # noqa: E402

pytestmark = pytest.mark.xdist_group("test_prepare_shards")

FAST = dict(input_format="lines", documents="lines", progress=False, workers=1)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    from helpers import synthetic_sentences

    d = tmp_path_factory.mktemp("shards-raw")
    sents = synthetic_sentences(900, seed=11)
    files = []
    for k, n in enumerate((300, 200, 250, 150)):  # four files of different sizes
        path = d / f"part{k}.txt"
        path.write_text("\n".join(sents[:n]) + "\n", encoding="utf-8")
        sents = sents[n:]
        files.append(str(path))
    vocab = prepare(files, str(d / "vocab"), only_vocab=True, sample_mb=0.02, vocab_size=120,
                    spm_sample_size=2000, **FAST)
    return d, files, vocab


@pytest.fixture(scope="module")
def sharded(corpus):
    """Shard 1, then shard 0, as two machines would prepare them."""
    d, files, vocab = corpus
    data = d / "data"
    options = dict(tokenizer_from=vocab["data_bin"], shards=2, valid_size=10, test_size=0, **FAST)
    first = prepare(files, str(data), shard_ids="1", **options)
    second = prepare(files, str(data), shard_ids="0", **options)
    return data, options, first, second


def test_only_vocab_writes_the_tokenizer_and_dict_from_a_sample(corpus):
    d, files, vocab = corpus
    data_bin = Path(vocab["data_bin"])
    names = sorted(p.name for p in data_bin.iterdir())
    assert "dict.txt" in names and "sentencepiece.model" in names and not [n for n in names if n.endswith(".bin")]
    assert not any("valid" in w for w in vocab["warnings"]), vocab["warnings"]  # none wanted there
    sampled = vocab["inputs"]["train"]["bytes"]
    assert 0 < sampled <= 0.02e6 + 4 * 2000 < sum(Path(f).stat().st_size for f in files), sampled


def test_shards_prepared_separately_make_fairseqs_layout(corpus, sharded):
    d, files, vocab = corpus
    data, _, first, second = sharded
    assert first["finished"] == [1] and first["missing"] == [0]
    assert second["finished"] == [0, 1] and second["missing"] == []
    s0, s1 = data / "data-bin" / "shard0", data / "data-bin" / "shard1"
    assert second["data"] == f"{s0}:{s1}"
    assert (s0 / "valid.bin").is_file() and not (s1 / "valid.bin").exists()
    for shard in (s0, s1):
        assert (shard / "train.bin").is_file()
        assert (shard / "dict.txt").read_bytes() == (Path(vocab["data_bin"]) / "dict.txt").read_bytes()
    # every file in exactly one shard
    assert sorted(second["inputs"][0] + second["inputs"][1]) == sorted(files)
    on_disk = json.loads((data / "summary.json").read_text())
    assert on_disk["finished"] == [0, 1]
    per_shard = [json.loads(Path(second["summaries"][k]).read_text()) for k in (0, 1)]
    assert second["train"]["sentences"] == sum(s["splits"]["train"]["sentences"] for s in per_shard)
    assert all(s["rate"]["mb_per_s_per_worker"] > 0 for s in per_shard)
    assert not any("valid" in w for s in per_shard for w in s["warnings"])  # shard1 has none by design


def test_the_task_reads_one_shard_per_epoch(sharded):
    from harness.runs import build_task

    from fairseq_clear.preprocessing.binarize import count_lines

    data, _, _, second = sharded
    s0, s1 = data / "data-bin" / "shard0", data / "data-bin" / "shard1"
    task, _ = build_task(f"{s0}:{s1}", "--tokens-per-sample", "64")
    sizes = {}
    for epoch in (1, 2, 3):
        task.load_dataset("train", combine=False, epoch=epoch)
        sizes[epoch] = len(task.dataset("train"))
    # the task's samples are the sentences (the lone </s> between documents left out)
    sentences = [json.loads(Path(second["summaries"][k]).read_text())["splits"]["train"]["sentences"] for k in (0, 1)]
    assert sizes == {1: sentences[0], 2: sentences[1], 3: sentences[0]} and sentences[0] != sentences[1]
    task.load_dataset("valid", combine=False, epoch=1)  # as fairseq-train loads it: from the first path
    assert len(task.dataset("valid")) == (count_lines(str(s0 / "valid")) + 1) // 2 > 0


def test_finished_shard_skipped_damaged_one_made_again(corpus, sharded):
    d, files, _ = corpus
    data, options, _, _ = sharded
    train_bin = data / "data-bin" / "shard1" / "train.bin"
    whole = train_bin.read_bytes()
    train_bin.write_bytes(whole[:50])  # a torn copy
    again = prepare(files, str(data), shard_ids="0-1", **options)
    # shard 1 from its encode step (the direct binarizer's data-bin file is that step's file, linked)
    assert again["steps_run_now"] == {0: [], 1: ["encode-train", "binarize"]}
    assert train_bin.read_bytes() == whole


@pytest.mark.parametrize("options, message", [
    (dict(shards=2), "--shards: give --tokenizer-from"),
    (dict(shards=2, shard_ids="2", tokenizer_from="VOCAB"), "--shard-ids: 2 is not a shard of --shards 2"),
    (dict(shards=2, shard_ids="x", tokenizer_from="VOCAB"), "--shard-ids: 'x' is not a list"),
    (dict(shards=5, tokenizer_from="VOCAB"), "--shards 5: the training inputs are 4 file(s)"),
    (dict(shards=2, shard_ids="1-0", tokenizer_from="VOCAB"), "--shard-ids: '1-0' is a range from high to low"),
    (dict(only_vocab=True, sample_mb=float("nan")), "--sample-mb must be > 0 and finite, got nan"),
    (dict(only_vocab=True, sample_mb=float("inf")), "--sample-mb must be > 0 and finite, got inf"),
    (dict(valid_size=float("nan")), "--valid-size must be a fraction in [0, 1) or a whole number"),
    (dict(test_size=float("inf")), "--test-size must be a fraction in [0, 1) or a whole number"),
    (dict(shard_ids="0"), "--shard-ids names shards of --shards N"),
    (dict(sample_mb=1.0), "--sample-mb is the sample of --only-vocab"),
    (dict(only_vocab=True, shards=2), "--only-vocab makes the vocabulary"),
])
def test_shard_options_refused_before_any_work(corpus, tmp_path, options, message):
    d, files, vocab = corpus
    options = {k: (vocab["data_bin"] if v == "VOCAB" else v) for k, v in options.items()}
    with pytest.raises(PrepareError) as e:
        prepare(files, str(tmp_path / "out"), **options, **FAST)
    assert message in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "out" / "data-bin").exists()


def test_cli_refusal_is_one_error_line(corpus, tmp_path):
    from helpers import bin_path, run_cli

    d, files, _ = corpus
    proc = run_cli([bin_path("clear-prepare"), *files, tmp_path / "out", "--shards", "2"], check=False)
    assert proc.returncode == 2
    errors = [line for line in proc.stdout.splitlines() if line.startswith("error:")]
    assert errors == ["error: --shards: give --tokenizer-from VOCAB/data-bin (made once by clear-prepare RAW... "
                      "VOCAB --only-vocab) so that every shard has the same dict.txt"], proc.stdout
    assert not (tmp_path / "out").exists()


def test_shards_are_dealt_alike_whatever_the_order_and_the_mount(corpus, tmp_path):
    """Every machine deals the same shards: the files sorted by their place below the folder they
    share, not in the order given (two machines listing the folders apart used the same file twice
    and another never), wherever the corpus is mounted; empty files are left out."""
    import shutil

    from fairseq_clear.preprocessing.shards import deal

    d, files, _ = corpus
    other = tmp_path / "mnt" / "corpus"
    other.mkdir(parents=True)
    copies = [str(other / Path(f).name) for f in files]
    for f, c in zip(files, copies):
        shutil.copy(f, c)
    (other / "empty.txt").write_text("")
    base = [[Path(f).name for f in shard] for shard in deal(files, 2)]
    for order in (files[::-1], [files[2], files[0], files[3], files[1]]):
        assert [[Path(f).name for f in shard] for shard in deal(order, 2)] == base
    assert [[Path(f).name for f in shard] for shard in deal(copies[::-1] + [str(other / "empty.txt")], 2)] == base
    assert sorted(n for shard in base for n in shard) == sorted(Path(f).name for f in files)
    with pytest.raises(PrepareError, match="is given twice"):
        deal(files + files[:1], 2)


def test_a_vocabulary_rebuilt_in_place_or_other_options_make_shards_again(corpus, tmp_path):
    """--tokenizer-from's contents count, not its path: a VOCAB rebuilt in place is another tokenizer,
    and a finished run with it is not 'done earlier'; DATA/summary.json does not count a shard made
    with other options (or another dict.txt) as finished."""
    d, files, _ = corpus
    vocab = str(tmp_path / "vocab")
    make_vocab = dict(only_vocab=True, sample_mb=0.02, spm_sample_size=2000, **FAST)
    first = prepare(files, vocab, vocab_size=120, **make_vocab)
    options = dict(tokenizer_from=first["data_bin"], shards=2, valid_size=10, test_size=0, **FAST)
    data = str(tmp_path / "data")
    prepare(files, data, **options)
    prepare(files, vocab, vocab_size=60, **make_vocab)  # rebuilt in place
    new_dict = (Path(first["data_bin"]) / "dict.txt").read_bytes()
    stale = prepare(files, data, shard_ids="1", **options)
    assert stale["finished"] == [1] and stale["missing"] == [0]
    assert "another dict.txt" in stale["made_otherwise"][0]
    assert stale["steps_run_now"][1] and (Path(data) / "data-bin" / "shard1" / "dict.txt").read_bytes() == new_dict
    again = prepare(files, data, shard_ids="0", **dict(options, tokens_per_sample=64))
    assert again["finished"] == [0] and set(again["made_otherwise"]) == {1}
    assert "--tokens-per-sample 512 (this run: 64)" in again["made_otherwise"][1]


def test_a_deleted_tokenizer_file_is_put_back_and_only_our_intermediates_are_removed(corpus, tmp_path):
    d, files, _ = corpus
    out = tmp_path / "out"
    options = dict(vocab_size=120, spm_sample_size=2000, valid_size=10, test_size=0, **FAST)
    prepare(files[:2], str(out), **options)
    model = out / "data-bin" / "sentencepiece.model"
    whole = model.read_bytes()
    model.unlink()
    (out / "work" / "notes.sent").write_text("the user's own file\n")
    again = prepare(files[:2], str(out), remove_intermediate=True, **options)
    assert again["steps"]["binarize"]["status"] == "ran" and model.read_bytes() == whole
    assert (out / "work" / "notes.sent").read_text() == "the user's own file\n"
    assert not (out / "work" / "train.sent").exists()


def test_an_out_dir_of_the_users_is_refused_and_an_input_folder_as_out_dir_reruns(corpus, tmp_path):
    """OUT_DIR's work/ and summary.json are replaced and removed by a run: the user's are refused,
    named, before any work; an input folder that is also OUT_DIR never reads its outputs back."""
    import shutil

    d, files, _ = corpus
    options = dict(vocab_size=120, spm_sample_size=2000, valid_size=10, test_size=0, **FAST)
    for name, make in (("work", lambda p: (p / "work").mkdir() or (p / "work" / "mine.sent").write_text("x")),
                       ("summary.json", lambda p: (p / "summary.json").write_text("{}"))):
        user = tmp_path / f"user-{name}"
        user.mkdir()
        make(user)
        with pytest.raises(PrepareError, match=f"OUT_DIR: '{user / name}'.*not written by clear-prepare"):
            prepare(files[:2], str(user), **options)
        assert not (user / "data-bin").exists()
    same = tmp_path / "same"
    same.mkdir()
    shutil.copy(files[0], same / "part0.txt")
    first = prepare([str(same)], str(same), **options)
    second = prepare([str(same)], str(same), **options)
    assert first["inputs"]["train"]["files"] == second["inputs"]["train"]["files"] == 1
    assert all(st["status"].startswith("skipped") for st in second["steps"].values())


def test_shards_split_sentences_with_the_vocabularys_punkt(tmp_path):
    """Paragraphs (--input-format text): --only-vocab publishes the Punkt it trained beside dict.txt, and
    every shard splits with it (each trained its own on its own files: shards split apart from each other)."""
    from helpers import synthetic_sentences

    sents = synthetic_sentences(400, seed=5)
    files = []
    for k in range(2):
        path = tmp_path / f"part{k}.txt"
        paragraphs = [" ".join(sents[i:i + 4]) for i in range(k * 200, k * 200 + 200, 4)]
        path.write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
        files.append(str(path))
    text = dict(FAST, input_format="text", documents="blank-lines", punkt="train")
    vocab = prepare(files, str(tmp_path / "vocab"), only_vocab=True, vocab_size=120, spm_sample_size=2000, **text)
    published = Path(vocab["data_bin"]) / "punkt.json"
    assert published.read_bytes() == (tmp_path / "vocab" / "work" / "punkt.json").read_bytes()
    options = dict(tokenizer_from=vocab["data_bin"], shards=2, valid_size=2, test_size=0, **dict(text, punkt="auto"))
    data = prepare(files, str(tmp_path / "data"), **options)
    for k in (0, 1):
        summary = json.loads(Path(data["summaries"][k]).read_text())
        assert summary["sentence_splitter"]["model"] == f"the vocabulary's ({published})", summary["sentence_splitter"]
        assert (tmp_path / "data" / "work" / f"shard{k}" / "punkt.json").read_bytes() == published.read_bytes()
    # an empty --valid is refused before any step (it was found after the training corpus's steps)
    empty = tmp_path / "valid.txt"
    empty.write_text("\n  \n")
    with pytest.raises(PrepareError, match=r"^--valid: '.*valid.txt' holds no text \(empty or blank lines only\)$"):
        prepare(files, str(tmp_path / "v"), valid=[str(empty)], **FAST)
    assert not (tmp_path / "v" / "work" / "steps").exists() or not any((tmp_path / "v" / "work" / "steps").iterdir())


def test_a_copied_out_dir_checks_its_own_files(corpus, tmp_path):
    """The step markers record their outputs relative to OUT_DIR: a copy (another disk, a moved
    folder) whose intermediate was removed runs the step again instead of taking the original's
    file for its own; the original is left as it was."""
    import shutil

    d, files, _ = corpus
    options = dict(vocab_size=120, spm_sample_size=2000, valid_size=10, test_size=0, **FAST)
    original = tmp_path / "original"
    prepare(files[:2], str(original), **options)
    marker = json.loads((original / "work" / "steps" / "sentences-train.json").read_text())
    assert all(not os.path.isabs(p) for p in marker["outputs"])  # relative to OUT_DIR
    copy = tmp_path / "copy"
    shutil.copytree(original, copy)
    (copy / "data-bin" / "train.bin").unlink()
    again = prepare(files[:2], str(copy), **options)
    assert again["steps"]["binarize"]["status"] == "ran"
    assert (copy / "data-bin" / "train.bin").read_bytes() == (original / "data-bin" / "train.bin").read_bytes()
    assert all(st["status"].startswith("skipped") for st in prepare(files[:2], str(original), **options)
               ["steps"].values())


def test_another_layout_of_shards_in_the_same_data_is_refused(corpus, tmp_path):
    """A DATA dealt into 2 shards, then asked for 3 (or given one more file), made shards that held the
    same files, and the summary counted the old shard0 as finished: a training on all of them read
    some files twice. Now such a run is refused, named, before any work; so is a plain output into a
    DATA of shards and shards into a plain output."""
    import shutil

    d, files, vocab = corpus
    options = dict(tokenizer_from=vocab["data_bin"], valid_size=10, test_size=0, **FAST)
    data = tmp_path / "data"
    prepare(files, str(data), shards=2, shard_ids="0", **options)
    with pytest.raises(PrepareError, match=r"was dealt into 2 shards, this run asks for --shards 3"):
        prepare(files, str(data), shards=3, shard_ids="1-2", **options)
    extra = tmp_path / "extra.txt"
    shutil.copy(files[0], extra)
    with pytest.raises(PrepareError, match="was dealt from other input files"):
        prepare(files + [str(extra)], str(data), shards=2, shard_ids="1", **options)
    assert sorted(p.name for p in (data / "data-bin").iterdir()) == ["shard0"]
    with pytest.raises(PrepareError, match="holds the shards of a clear-prepare --shards run"):
        prepare(files, str(data), vocab_size=120, spm_sample_size=2000, valid_size=10, test_size=0, **FAST)
    plain = tmp_path / "plain"
    prepare(files[:2], str(plain), vocab_size=120, spm_sample_size=2000, valid_size=10, test_size=0, **FAST)
    with pytest.raises(PrepareError, match="holds the output of a clear-prepare run without --shards"):
        prepare(files, str(plain), shards=2, **options)
    assert not (plain / "data-bin" / "shard0").exists()


def test_a_shard_made_from_other_files_is_not_counted_as_finished(corpus, tmp_path):
    """A DATA without the layout file (an earlier version's): its shard0 of --shards 2 holds other files
    than shard0 of --shards 3; the summary of a --shards 3 run listed it as finished."""
    d, files, vocab = corpus
    options = dict(tokenizer_from=vocab["data_bin"], valid_size=10, test_size=0, **FAST)
    data = tmp_path / "data"
    prepare(files, str(data), shards=2, shard_ids="0", **options)
    (data / "work" / "shards.json").unlink()
    s = prepare(files, str(data), shards=3, shard_ids="1-2", **options)
    assert s["finished"] == [1, 2] and s["missing"] == [0]
    assert "other input files" in s["made_otherwise"][0]


def test_the_shards_summary_adds_up_every_shards_lines_and_names_what_it_left_out(corpus, tmp_path):
    """The summary of a shards run gave the train totals only: the lines each shard dropped or changed,
    its warnings, the valid split and the empty files left out were in no summary of DATA."""
    import shutil

    from fairseq_clear.preprocessing.pipeline import format_summary
    from fairseq_clear.preprocessing.shards import user_dir

    d, files, vocab = corpus
    raw = tmp_path / "raw"
    raw.mkdir()
    for f in files:
        shutil.copy(f, raw / Path(f).name)
    with open(raw / "part3.txt", "ab") as f:
        f.write(b"a line with \xff in it\n")
    (raw / "part9.txt").write_bytes(b"")
    s = prepare([str(raw)], str(tmp_path / "data"), shards=2, tokenizer_from=vocab["data_bin"],
                valid_size=10, test_size=0, **FAST)
    assert s["lines"]["altered"] == {"invalid_utf8_replaced": 1}
    assert s["empty_inputs_left_out"] == [str(raw / "part9.txt")]
    assert s["splits"]["valid"]["documents"] == 10
    text = format_summary(s)
    assert "lines altered (finished shards): invalid_utf8_replaced 1" in text
    assert "valid (shard0): 10 documents" in text and "empty input files left out: 1" in text
    assert f"--user-dir {user_dir()} " in s["train_with"] and (Path(user_dir()) / "__init__.py").is_file()


def test_the_vocabulary_sample_of_one_long_line_reads_about_what_was_asked(tmp_path):
    """A piece of the sample ended with the rest of its line, read whole: a file of one long line (or of
    '\\r' line ends) put all of itself into the sample (17 times --sample-mb in the outside review) and,
    at many GB, into memory. Now the rest is at most 64 KB or the piece's size more, cut at a character."""
    from fairseq_clear.preprocessing.shards import SAMPLE_LINE_BYTES, sample_inputs

    files = []
    for k in range(2):
        path = tmp_path / f"one-line-{k}.txt"
        path.write_bytes(("word é€ " * 60_000).encode("utf-8").replace(b"\n", b"\r") + b"\n")
        files.append(str(path))
    sample = sample_inputs(files, str(tmp_path / "sample"), 0.05)
    sizes = [os.path.getsize(p) for p in sample]
    assert sum(sizes) <= 0.05e6 + 2 * (SAMPLE_LINE_BYTES + 1) < sum(os.path.getsize(f) for f in files) / 4, sizes
    for p in sample:
        Path(p).read_bytes().decode("utf-8")  # no character cut
    short = tmp_path / "short.txt"
    short.write_text("".join(f"line {i} of short text\n" for i in range(5000)))
    whole = sample_inputs([str(short)], str(tmp_path / "sample-short"), 0.01)
    text = Path(whole[0]).read_text()
    assert all(line.startswith("line ") and line.endswith("of short text") for line in text.split("\n") if line)


def test_a_rerun_with_nothing_to_do_keeps_the_speed_and_removes_the_intermediates(corpus, tmp_path):
    """--remove-intermediate on a run that had nothing to do left work/*.sent in place; and a rerun whose
    steps were all done earlier (another path to the same --tokenizer-from) rewrote the shard's MB/s
    with its own few seconds (0.28 became 2.03 MB/s per worker in the outside review)."""
    import shutil

    d, files, vocab = corpus
    copy = tmp_path / "vocab-copy"
    shutil.copytree(vocab["data_bin"], copy)
    options = dict(valid_size=10, test_size=0, shards=1, **FAST)
    data = tmp_path / "data"
    first = prepare(files[:2], str(data), tokenizer_from=vocab["data_bin"], **options)
    again = prepare(files[:2], str(data), tokenizer_from=str(copy), **options)
    assert again["steps_run_now"][0] == [] and again["rate"][0] == first["rate"][0]
    out = tmp_path / "plain"
    plain = dict(vocab_size=120, spm_sample_size=2000, valid_size=10, test_size=0, **FAST)
    prepare(files[:2], str(out), **plain)
    assert (out / "work" / "train.sent").is_file()
    prepare(files[:2], str(out), remove_intermediate=True, **plain)
    assert not (out / "work" / "train.sent").exists() and (out / "data-bin" / "train.bin").is_file()


def test_a_copied_vocabulary_folder_knows_its_own_sample(corpus, tmp_path):
    """--only-vocab reads its sample from OUT/work/sample: a copied or moved VOCAB saw other input paths
    and made every step again."""
    import shutil

    d, files, _ = corpus
    make_vocab = dict(only_vocab=True, sample_mb=0.02, spm_sample_size=2000, vocab_size=120, **FAST)
    prepare(files, str(tmp_path / "vocab"), **make_vocab)
    shutil.copytree(tmp_path / "vocab", tmp_path / "moved", symlinks=True)
    again = prepare(files, str(tmp_path / "moved"), **make_vocab)
    assert all(st["status"].startswith("skipped") for st in again["steps"].values()), again["steps"]


def test_a_full_disk_in_a_step_that_does_not_name_its_file_names_the_step_and_its_folder(corpus, tmp_path,
                                                                                          monkeypatch):
    """The carve step's full disk printed "no space left on device writing an output": no file, no step."""
    import errno

    from fairseq_clear.preprocessing import text as text_mod
    from fairseq_clear.preprocessing.common import DiskFullError

    d, files, _ = corpus

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(text_mod, "carve_splits", full)
    out = tmp_path / "out"
    with pytest.raises(DiskFullError) as e:
        prepare(files[:2], str(out), vocab_size=120, spm_sample_size=2000, valid_size=10, test_size=0, **FAST)
    message = str(e.value)
    assert message.startswith(f"OUT_DIR '{out / 'work'}': no space left on device"), message
    assert "the step carve was writing" in message and "\n" not in message


def test_out_dir_may_follow_the_options_and_the_vocabularys_summary_says_what_comes_next(corpus, tmp_path):
    """`clear-prepare RAW --vocab-size 120 OUT` failed with "unrecognized arguments: OUT"; --only-vocab's
    summary.json suggested fairseq-train on a data-bin that has no .bin."""
    from fairseq_clear.cli.prepare import main

    d, files, _ = corpus
    out = tmp_path / "vocab"
    main([files[0], "--only-vocab", "--vocab-size", "120", "--spm-sample-size", "2000", "--input-format", "lines",
          "--documents", "lines", "--workers", "1", "--no-progress", files[1], str(out)])
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk["train_with"].startswith("clear-prepare RAW... DATA --tokenizer-from "), on_disk["train_with"]
    assert on_disk["inputs"]["train"]["files"] == 2
