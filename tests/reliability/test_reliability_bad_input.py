"""The bad-input suite: a nasty corpus (harness.nasty_corpus) through the
real ``clear-prepare``, ``fairseq-train`` (CLEAR with several augmentations, DeCLUTR) and
the hub's ``embed()``: zero crashes, every dropped/altered line counted in the summary,
no special token inside a sentence, and no empty view ever fed to the model.

CI uses a 2 MB "big line"; ``scripts/reliability/bad_input.sh`` runs the 10 MB one.
"""

import json
import os
import re

import numpy as np
import pytest
import torch

from harness.runs import build_task, logged
from harness.nasty_corpus import synonym_table, write_nasty_corpus
from helpers import bin_path, run_cli, train_args

BIG_LINE_BYTES = int(float(os.environ.get("NASTY_BIG_LINE_MB", "2")) * 1024 * 1024)
TOKENS_PER_SAMPLE = 64

TRAIN_CONFIGS = {
    "del-word": ["--augmentations", "del-word"],
    "subs,del-span": ["--augmentations", "subs,del-span", "--synonym-table", "{table}"],
    "mix-reorder": ["--augmentation-mix", "reorder:0.5;del-word,reorder:0.3;none:0.2"],
    "declutr": ["--task", "declutr", "--num-anchors", "1", "--num-positives", "2",
                "--min-span-length", "2", "--max-span-length", "16",
                "--sentence-pooling", "mean", "--projection-layers", "0"],
}


@pytest.fixture(scope="module")
def nasty(tmp_path_factory):
    root = tmp_path_factory.mktemp("nasty")
    manifest = write_nasty_corpus(str(root / "raw"), big_line_bytes=BIG_LINE_BYTES)
    out = root / "prepared"
    proc = run_cli(
        [bin_path("clear-prepare"), *manifest["train_files"], out,
         "--valid", manifest["files"]["valid.txt"], "--test-size", "0", "--vocab-size", "200",
         "--tokens-per-sample", str(TOKENS_PER_SAMPLE), "--workers", "1", "--no-progress",
         "--punkt-sample-chars", "50000", "--spm-sample-size", "5000"],
        timeout=900,
    )
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    table = synonym_table(str(root / "synonyms.json"))
    return {"manifest": manifest, "summary": summary, "data": out / "data-bin", "root": root,
            "table": table, "prepare_output": proc.stdout}


def test_prepare_counts_every_dropped_and_altered_line(nasty):
    cases, summary = nasty["manifest"]["cases"], nasty["summary"]
    lines = summary["splits"]["train"]["lines"]
    dropped, altered, normalized = lines["dropped"], lines["altered"], lines["normalized"]
    inputs = summary["inputs"]["train"]
    files = nasty["manifest"]["files"]
    assert inputs["empty_files"] == [files["empty.txt"]]
    assert inputs["blank_only_files"] == [files["blank.txt"]]
    assert "is empty" in nasty["prepare_output"] and "holds only blank lines" in nasty["prepare_output"]
    # every raw line is read and counted
    raw_lines = sum(open(files[n], "rb").read().count(b"\n")
                    for n in ("train.txt", "crlf.txt", "blank.txt"))
    assert inputs["lines"] == raw_lines
    # blank lines: separators, the whitespace-only line and blank.txt's 4
    assert inputs["blank_lines"] == cases["blank-line"] + cases["whitespace-only"] + 4
    assert altered.get("invalid_utf8_replaced") == cases["invalid-utf8"]
    assert altered.get("nul_bytes_removed") == cases["nul-bytes"]
    assert dropped.get("empty_after_cleaning") == 1  # the line of NUL bytes only
    # control characters: the control-chars line, the lone CR and U+0085
    assert altered.get("control_characters_to_space", 0) >= cases["control-chars"] + cases["lone-cr"]
    assert normalized.get("crlf_line_ending") == cases["crlf"]
    # the big line and the long word are cut, the cut counted
    assert altered.get("long_paragraph_cut_before_sentence_splitting", 0) >= 1
    assert altered.get("long_sentence_split", 0) >= 1
    assert summary["splits"]["train"]["long_sentences_truncated"] == 0  # split, not truncated
    # nothing else vanished: all reasons are known ones
    assert set(dropped) <= {"empty_after_cleaning"}, dropped


def _special_ids(dictionary):
    return [dictionary.bos(), dictionary.pad(), dictionary.eos(), dictionary.index("<mask>"),
            dictionary.index("[DEL]")]


def test_binarized_sentences_hold_no_special_token(nasty):
    from fairseq.data import Dictionary, data_utils

    dictionary = Dictionary.load(str(nasty["data"] / "dict.txt"))
    specials = _special_ids(dictionary)
    assert dictionary.index("[DEL]") != dictionary.unk()  # [DEL] is in dict.txt, exactly once
    symbols = [line.split()[0] for line in (nasty["data"] / "dict.txt").read_text(encoding="utf-8").splitlines()]
    assert len(symbols) == len(set(symbols)), "duplicate dictionary symbol"
    lines = data_utils.load_indexed_dataset(str(nasty["data"] / "train"), dictionary)
    longest = 0
    for i in range(len(lines)):
        body = lines[i][:-1].numpy()
        assert not np.isin(body, specials).any(), dictionary.string(lines[i])
        longest = max(longest, len(body))
    assert longest <= TOKENS_PER_SAMPLE - 2


def _real_tokens(rows, specials):
    """Per row: tokens that are neither padding, <s>, </s>, <mask> nor [DEL]."""
    return (~torch.isin(rows, torch.tensor(specials))).sum(dim=1)


@pytest.mark.parametrize("config", list(TRAIN_CONFIGS))
def test_no_empty_view_is_ever_built(nasty, config):
    """Every view of every sample, over two epochs, has a real token between <s> and </s>."""
    extra = [a.format(table=nasty["table"]) for a in TRAIN_CONFIGS[config]]
    task, _ = build_task(nasty["data"], "--tokens-per-sample", str(TOKENS_PER_SAMPLE), *extra)
    dataset = task.dataset("train")
    specials = _special_ids(task.source_dictionary)
    itr = task.get_batch_iterator(dataset, max_sentences=64, seed=1, epoch=1,
                                  max_positions=TOKENS_PER_SAMPLE, disable_iterator_cache=True)
    seen, rows_checked = set(), 0
    for _epoch in range(2):
        for batch in itr.next_epoch_itr(shuffle=True):
            views = batch["contrastive"]["src_tokens"]
            assert views.size(1) <= TOKENS_PER_SAMPLE
            if config == "declutr":
                # anchors are contrasted as the MLM sees them (DeCLUTR's code): masking may
                # replace any position, <s> included, so count every non-padding token but
                # the two ends
                real = views.ne(task.source_dictionary.pad()).sum(dim=1) - 2
            else:
                assert (views[:, 0] == task.source_dictionary.bos()).all()
                real = _real_tokens(views, specials)
            assert (real >= 1).all(), views[real < 1]
            rows_checked += views.size(0)
            seen.update(batch["id"].tolist())
    assert seen == set(range(len(dataset)))  # no sample lost to batching
    assert rows_checked >= 2 * len(dataset)


@pytest.fixture(scope="module")
def trained(nasty):
    """A few real fairseq-train updates per configuration; the del-word checkpoint is kept."""
    outputs = {}
    for config, extra in TRAIN_CONFIGS.items():
        extra = [a.format(table=nasty["table"]) for a in extra]
        save = nasty["root"] / f"ckpt-{re.sub('[^a-z]', '', config)}"
        proc = run_cli(train_args(nasty["data"], save, *extra, max_update=4, batch_size=32),
                       timeout=600)
        outputs[config] = (proc.stdout, save)
    return outputs


@pytest.mark.parametrize("config", list(TRAIN_CONFIGS))
def test_training_runs_on_the_nasty_corpus(trained, config):
    out, save = trained[config]
    records = logged(out)
    assert [int(r["num_updates"]) for r in records] == [1, 2, 3, 4]
    for r in records:
        for key in ("loss", "cl_loss"):
            assert np.isfinite(float(r[key])), r
    assert (save / "checkpoint_last.pt").is_file()
    if config == "declutr":
        # documents too short for two spans are skipped and counted
        assert re.search(r"skipped \d+ documents shorter than", out), out[-3000:]
    else:
        assert re.search(r"\d+ sentences \(\d+ empty lines of the binarized split", out)


def test_hub_embeds_nasty_strings(nasty, trained):
    from fairseq_clear.models import ClearRobertaModel

    _out, save = trained["del-word"]
    hub = ClearRobertaModel.from_pretrained(str(save), "checkpoint_last.pt", str(nasty["data"]))
    raw = (nasty["root"] / "raw" / "train.txt").read_bytes().split(b"\n")
    strings = [
        "", " ", "\t\n", "\x00", "[DEL]", "[DEL] [DEL] <mask> <s> </s> <pad> <unk>",
        "Hi", ".", "\u2028\u2029\u0085", "\ufeff", "zero\u200bwidth", "😀🎉", "e" + "\u0301" * 50,
        "w" * 100_000,
        b"caf\xe9 \xff\xfe".decode("utf-8", errors="replace"),
        b"caf\xe9 \xff\xfe".decode("utf-8", errors="surrogateescape"),  # lone surrogates
        max(raw, key=len).decode("utf-8"),  # the big line
    ]
    vectors = hub.embed(strings, batch_size=4)
    assert vectors.shape == (len(strings), hub.dim)
    assert np.isfinite(vectors).all()
    assert hub.num_truncated >= 2  # the long word and the big line
    # the empty string is embedded as <s></s>, and differs from a real sentence
    assert not np.allclose(vectors[0], vectors[6])


def test_clear_embed_cli_on_nasty_files(nasty, trained, tmp_path):
    """clear-embed: one row per line of a nasty (valid UTF-8) file; invalid UTF-8 is refused
    with a one-line error naming --input, not a traceback."""
    _out, save = trained["del-word"]
    raw = (nasty["root"] / "raw" / "train.txt").read_bytes()
    text = raw.decode("utf-8", errors="replace")
    good = tmp_path / "nasty_utf8.txt"
    good.write_text(text, encoding="utf-8")
    rows = text.count("\n")
    base = [bin_path("clear-embed"), "--checkpoint", save / "checkpoint_last.pt",
            "--data", nasty["data"], "--cpu"]
    run_cli(base + ["--input", good, "--output", tmp_path / "v.npy"], timeout=600)
    vectors = np.load(tmp_path / "v.npy")
    assert vectors.shape[0] == rows and np.isfinite(vectors).all()

    bad = tmp_path / "invalid.txt"
    bad.write_bytes(b"fine line\ncaf\xe9 \xff\n")
    proc = run_cli(base + ["--input", bad, "--output", tmp_path / "w.npy"], check=False)
    assert proc.returncode != 0
    assert "error: --input" in proc.stdout and "Traceback" not in proc.stdout, proc.stdout[-2000:]
    assert not (tmp_path / "w.npy").exists()
