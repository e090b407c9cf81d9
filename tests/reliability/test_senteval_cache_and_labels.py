"""clear-eval-senteval's vector cache cannot lie (a pooling it lacks, a damaged entry, no bound), and its
readers refuse labels and scores outside each task's documented set; a data error is one ``error:`` line."""

import json
import logging
import os
import sys
import time

import numpy as np
import pytest

from helpers import run_cli
from senteval_reference_data import write_toy_senteval_tree

from fairseq_clear.evaluation.senteval import classifier as sc
from fairseq_clear.evaluation.senteval import data as sd
from fairseq_clear.preprocessing import sts_readers as sts
from fairseq_clear.evaluation.senteval.transfer import VectorCache, evaluate_transfer

COMMAND = [sys.executable, "-m", "fairseq_clear.cli.eval_senteval"]


def _write(path, text, encoding="utf-8"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode(encoding))
    return path


def _tense(root, n=20, labels=("PAST", "PRES")):
    """A small probing/past_present.txt: n sentences per partition, labels in turn."""
    lines = [f"{tag}\t{labels[k % len(labels)]}\t{tag} sentence {k} of {labels[k % len(labels)].lower()}\n"
             for tag in ("tr", "va", "te") for k in range(n)]
    return _write(root / "probing" / "past_present.txt", "".join(lines))


# ---- the vector cache -------------------------------------------------------------------------

def _pooled_encoder(poolings, calls):
    """A stand-in for hub_encoder: one vector per sentence and pooling, counted per call."""
    def encode(sentences):
        calls.append(tuple(poolings))
        base = np.array([[len(s), s.count("past"), k % 3, 1.0] for k, s in enumerate(sentences)], dtype=np.float32)
        return {p: base + i for i, p in enumerate(poolings)}
    return encode


def _run(cache, tasks, poolings, calls, fingerprint="model-v1"):
    return evaluate_transfer({"m": _pooled_encoder(poolings, calls)}, tasks, sc.make_config("prototyping"),
                             cache=cache, fingerprints={"m": fingerprint}, labels={"m": list(poolings)},
                             progress=lambda m: None)["m"]


def _entries(directory):
    return sorted(p for p in directory.rglob("*.npz"))


@pytest.fixture
def tense(tmp_path):
    return {"Tense": sd.read_probing(str(_tense(tmp_path / "data")), "Tense")}


def test_a_request_for_mean_and_cls_is_never_served_from_an_entry_holding_mean(tmp_path, tense):
    cache, calls = VectorCache(str(tmp_path / "cache")), []
    assert set(_run(cache, tense, ["mean"], calls)) == {"mean"}
    both = _run(cache, tense, ["mean", "cls"], calls)
    assert set(both) == {"mean", "cls"} and calls == [("mean",), ("mean", "cls")]  # computed, not the mean entry
    assert not any(t["cached"] for r in both.values() for t in r["times"].values())
    again = _run(cache, tense, ["mean", "cls"], calls)
    assert set(again) == {"mean", "cls"} and len(calls) == 2  # now cached: both poolings
    assert all(t["cached"] for r in again.values() for t in r["times"].values())
    assert _run(cache, tense, ["mean"], calls) and len(calls) == 2  # the mean entry is its own


@pytest.mark.parametrize("damage", ["truncated", "bit flip in the vectors", "bit flip in the zip directory"])
def test_a_damaged_entry_is_named_in_one_warning_and_rebuilt(tmp_path, tense, caplog, damage):
    cache, calls = VectorCache(str(tmp_path / "cache")), []
    first = _run(cache, tense, ["mean"], calls)
    [entry] = _entries(tmp_path / "cache")
    raw = bytearray(entry.read_bytes())
    if damage == "truncated":
        raw = raw[: len(raw) // 2]
    else:  # in the array data, or in the zip's central directory (where numpy's reader can miss a flip)
        raw[len(raw) // 2 if damage == "bit flip in the vectors" else len(raw) - 60] ^= 0x10
    entry.write_bytes(bytes(raw))
    with caplog.at_level(logging.WARNING):
        again = _run(cache, tense, ["mean"], calls)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(calls) == 2 and not again["mean"]["times"]["Tense"]["cached"]  # embedded again
    assert len(warnings) == 1 and str(entry) in warnings[0] and "\n" not in warnings[0], warnings
    assert again["mean"]["tasks"]["Tense"]["acc"] == first["mean"]["tasks"]["Tense"]["acc"]
    caplog.clear()
    assert _run(cache, tense, ["mean"], calls)["mean"]["times"]["Tense"]["cached"] and len(calls) == 2  # rebuilt
    assert not caplog.records


def test_the_bound_removes_the_least_recently_used_entries_and_nothing_else(tmp_path):
    root = tmp_path / "cache"
    mine = {f"m{k}": [f"sentence {k} {j}" for j in range(50)] for k in range(4)}
    cache = VectorCache(str(root))
    for k, (model, sentences) in enumerate(mine.items()):
        cache.put(model, "Tense", "fp", VectorCache.digest(sentences), {"mean": np.ones((50, 64), np.float32)},
                  ["mean"])
        for path in root.rglob("*"):
            if path.is_file() and path.parent.name.startswith(model + "-"):
                os.utime(path, (time.time() - 1000 + 100 * k,) * 2)  # m0 oldest ... m3 newest
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    # not ours: a user's file at the top, one in an entry's folder, and one named like an old-style entry
    theirs = [_write(root / "notes.txt", "x" * 100000), _write(next(root.glob("m0-*")) / "mine.npz", "y" * 100000),
              _write(root / "Tense.npz", "z" * 100000)]
    # a hit makes m0 the most recently used: m1 and m2 go first
    assert cache.get("m0", "Tense", "fp", VectorCache.digest(mine["m0"]), ["mean"]) is not None
    removed = VectorCache(str(root), max_bytes=size // 2).prune()
    assert len(removed) == 2 and all("/m1-" in p or "/m2-" in p for p in removed), removed
    for model in ("m0", "m3"):
        assert cache.get(model, "Tense", "fp", VectorCache.digest(mine[model]), ["mean"]) is not None
    assert all(p.exists() for p in theirs)
    VectorCache(str(root), max_bytes=0).prune()  # --cache-max-gb 0: every entry, nothing else
    assert [p for p in _entries(root) if p not in theirs] == []
    assert all(p.exists() for p in theirs) and not [p for p in root.rglob("*.sha256")]


def test_the_command_keys_its_cache_by_pooling_and_prunes_to_zero(ckpt, tmp_path):
    checkpoint, data = ckpt
    _tense(tmp_path / "data", n=15)
    cache = tmp_path / "vectors"
    base = COMMAND + ["--checkpoint", checkpoint, "--data", data, "--cpu", "--senteval-data", tmp_path / "data",
                      "--tasks", "Tense", "--config", "prototyping", "--cache-dir", cache]
    run_cli(base + ["--poolings", "mean", "--output", tmp_path / "a.json"])
    proc = run_cli(base + ["--poolings", "mean,cls", "--output", tmp_path / "b.json"])
    row = json.loads((tmp_path / "b.json").read_text())["models"][checkpoint.stem]
    assert set(row) == {"mean", "cls"} and not any(r["times"]["Tense"]["cached"] for r in row.values())
    assert "from the vector cache" not in proc.stdout
    run_cli(base + ["--poolings", "mean,cls", "--output", tmp_path / "c.json"])
    row = json.loads((tmp_path / "c.json").read_text())["models"][checkpoint.stem]
    assert all(r["times"]["Tense"]["cached"] for r in row.values())
    assert _entries(cache)
    run_cli(base + ["--poolings", "mean", "--cache-max-gb", "0", "--output", tmp_path / "d.json"])
    assert not _entries(cache)


# ---- labels and scores outside each task's set ---------------------------------------------------

def _sick(folder, score="4.5"):
    head = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
    for name in sd.SICK_FILES.values():
        _write(folder / name, head + "1\ta\tb\t4.5\tENTAILMENT\n2\tc\td\t1.0\tCONTRADICTION\n3\te\tf\t3\tNEUTRAL\n")
    text = (folder / "SICK_train.txt").read_text().replace("\t3\tNEUTRAL", f"\t{score}\tNEUTRAL")
    return _write(folder / "SICK_train.txt", text)


def _stsb(folder, score="2.5", long_field=0):
    for split in ("train", "dev", "test"):
        rows = [f"g\tf\ty\t{k}\t{s}\tone {k}\ttwo {k}\n" for k, s in enumerate(("0.0", "5.0", "3.2"))]
        _write(folder / f"sts-{split}.csv", "".join(rows))
    first = "x" * long_field if long_field else "one 9"
    rows = (folder / "sts-train.csv").read_text() + f"g\tf\ty\t9\t{score}\t{first}\ttwo 9\n"
    return _write(folder / "sts-train.csv", rows)


@pytest.mark.parametrize("score", ["99", "-7", "0.5", "nan", "inf"])
def test_sick_relatedness_outside_1_to_5_is_refused_with_file_line_and_value(tmp_path, score):
    path = _sick(tmp_path / "SICK", score)
    with pytest.raises(sd.SentEvalDataError) as err:
        sd.read_relatedness(str(tmp_path / "SICK"), "SICK-R")
    message = str(err.value)
    assert f"{path}:4:" in message and score in message and "\n" not in message, message
    assert sd.read_sick_entailment(str(tmp_path / "SICK")).nclasses == 3  # SICK-E does not read the score
    _sick(tmp_path / "SICK", "1")  # the range's ends are in it
    assert sd.read_relatedness(str(tmp_path / "SICK"), "SICK-R").splits["train"][2].tolist() == [4.5, 1.0, 1.0]


@pytest.mark.parametrize("score", ["42", "-0.1", "5.01", "NaN", "-inf"])
def test_sts_b_gold_outside_0_to_5_is_refused_with_file_line_and_value(tmp_path, score):
    path = _stsb(tmp_path / "STSBenchmark", score)
    with pytest.raises(sd.SentEvalDataError) as err:
        sd.read_relatedness(str(tmp_path / "STSBenchmark"), "STS-B")
    assert f"{path}:4:" in str(err.value) and score in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(sts.STSFormatError, match=rf"{path}:4: .*{score}"):  # clear-eval-sts's reader alike
        sts.read_sts_benchmark(str(path))
    _stsb(tmp_path / "STSBenchmark", "0", long_field=200_000)  # a field over the csv module's 131,072 limit
    data = sd.read_relatedness(str(tmp_path / "STSBenchmark"), "STS-B")
    assert data.splits["train"][2].tolist() == [0.0, 5.0, 3.2, 0.0] and len(data.splits["train"][0][3]) == 200_000


@pytest.mark.parametrize("score", ["42", "-0.1", "NaN", "-inf"])
def test_clear_prepare_pairs_and_the_miner_refuse_an_sts_score_outside_0_to_5(tmp_path, score):
    """They read STS-B and SICK through clear-prepare-pairs' readers: a score outside the format's
    range is one line naming file:line and the value (an empty score is still counted and skipped)."""
    from fairseq_clear.preprocessing.common import PrepareError
    from fairseq_clear.preprocessing.pairs import Rows, read_sick, read_stsb

    path = _stsb(tmp_path / "STSBenchmark", score)
    with pytest.raises(PrepareError) as err:
        read_stsb(str(path), Rows(), 4.0)
    assert f"{path}:4:" in str(err.value) and score in str(err.value) and "\n" not in str(err.value)
    empty = _stsb(tmp_path / "empty", "")
    rows = Rows()
    read_stsb(str(empty), rows, 4.0)
    assert rows.skipped["no STS score"] == 1 and len(rows.labelled) == 3
    sick = _write(tmp_path / "SICK.txt", "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
                  f"1\ta\tb\t4.5\tNEUTRAL\n2\tc\td\t{score}\tENTAILMENT\n")
    with pytest.raises(PrepareError, match=rf"{sick}:3: "):
        read_sick(str(sick), Rows(), 3.5)


@pytest.mark.parametrize("gold", ["5.5", "-1", "nan", "inf"])
def test_sts12_16_gold_outside_0_to_5_is_refused_with_file_line_and_value(tmp_path, gold):
    _write(tmp_path / "STS.input.x.txt", "a\tb\nc\td\ne\tf\n")
    path = _write(tmp_path / "STS.gs.x.txt", f"1.0\n\n{gold}\n")
    with pytest.raises(sts.STSFormatError) as err:
        sts.read_senteval_subset(str(tmp_path), "x")
    assert f"{path}:3:" in str(err.value) and gold in str(err.value) and "\n" not in str(err.value)
    sick = _write(tmp_path / "SICK_test_annotated.txt", "pair_ID\tsentence_A\tsentence_B\trelatedness_score\n"
                  "1\ta\tb\t0.9\n")
    with pytest.raises(sts.STSFormatError, match=rf"{sick}:2: .*0\.9.*\[1, 5\]"):
        sts.read_sick(str(sick))


def test_a_classification_task_with_one_class_in_its_train_split_is_refused(tmp_path):
    path = _tense(tmp_path, labels=("PAST",))
    with pytest.raises(sd.SentEvalDataError, match=rf"{path}: .*one class \(PAST\)"):
        sd.read_probing(str(path), "Tense")
    for split in ("train", "dev", "test"):
        _write(tmp_path / f"downstream/SST/binary/sentiment-{split}",
               "good\t1\nfine\t1\n" if split == "train" else "good\t1\nbad\t0\n")
    with pytest.raises(sd.SentEvalDataError, match=r"sentiment-train'?: .*one class \(1\)"):
        sd.read_senteval_task(str(tmp_path), "SST2")
    _write(tmp_path / "downstream/MR/rt-polarity.pos", "good\n")
    _write(tmp_path / "downstream/MR/rt-polarity.neg", "")
    with pytest.raises(sd.SentEvalDataError, match="rt-polarity.neg"):
        sd.read_senteval_task(str(tmp_path), "MR")


@pytest.mark.parametrize("task, label", [("Tense", "FUTURE"), ("SentLen", "7"), ("BShift", "X"), ("SOMO", "I"),
                                         ("SubjNum", "NNP"), ("TreeDepth", "13"), ("TopConst", "NP_NP_.")])
def test_a_probing_label_outside_its_documented_set_is_refused_with_file_line_and_value(tmp_path, task, label):
    good = {"Tense": ("PAST", "PRES"), "SentLen": ("0", "5"), "BShift": ("O", "I"), "SOMO": ("O", "C"),
            "SubjNum": ("NN", "NNS"), "TreeDepth": ("5", "12"), "TopConst": ("NP_VP_.", "OTHER")}[task]
    path = _write(tmp_path / "probing" / sd.PROBING_FILES[task],
                  "".join(f"{t}\t{good[k % 2]}\tsentence {t} {k}\n" for t in ("tr", "va", "te") for k in range(4))
                  + f"va\t{label}\tan odd one\n")
    with pytest.raises(sd.SentEvalDataError) as err:
        sd.read_probing(str(path), task)
    assert f"{path}:13:" in str(err.value) and f"'{label}'" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("case", ["mrpc", "trec", "sick-e", "sst5"])
def test_classification_label_errors_name_the_value(tmp_path, case):
    folder = tmp_path / case
    if case == "mrpc":
        head = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
        _write(folder / "msr_paraphrase_train.txt", head + "1\t1\t2\ta\tb\n0\t3\t4\tc\td\n")
        _write(folder / "msr_paraphrase_test.txt", head + "2\t1\t2\ta\tb\n")
        path, value, read = folder / "msr_paraphrase_test.txt", "'2'", sd.read_mrpc
    elif case == "trec":
        _write(folder / "train_5500.label", "DESC:m How ?\nHUM:i Who ?\n")
        _write(folder / "TREC_10.label", "CITY:x Where ?\n")
        path, value, read = folder / "TREC_10.label", "'CITY'", sd.read_trec
    elif case == "sick-e":
        _sick(folder)
        _write(folder / "SICK_trial.txt", "h\n1\ta\tb\t4.5\tMAYBE\n")
        path, value, read = folder / "SICK_trial.txt", "'MAYBE'", sd.read_sick_entailment
    else:
        for split in ("train", "dev", "test"):
            _write(folder / f"sentiment-{split}", "4 great\n0 awful\n" + ("\u00b2 odd\n" if split == "dev" else ""))
        path, value, read = folder / "sentiment-dev", "'\u00b2'", lambda f: sd.read_sst(f, 5)
    with pytest.raises(sd.SentEvalDataError) as err:
        read(str(folder))
    assert f"{path}:" in str(err.value) and value in str(err.value) and "\n" not in str(err.value)


# ---- the command: one error line ------------------------------------------------------------------

def _cli_case(root, case):
    """Spoil the toy SentEval tree for ``case``; (task, what the error line must hold)."""
    tense = root / "probing" / "past_present.txt"
    if case == "not utf-8":
        tense.write_bytes(tense.read_bytes() + b"tr\tPAST\tcaf\xe9\n")
        return "Tense", [f"{tense}:491:", "not UTF-8"]
    if case == "malformed":
        tense.write_text(tense.read_text() + "bogus line\n")
        return "Tense", [f"{tense}:491:", "expected tr|va|te"]
    if case == "one class":
        tense.write_text("".join(line.replace("\tPRES\t", "\tPAST\t") + "\n" for line in tense.read_text().splitlines()))
        return "Tense", [str(tense), "one class"]
    if case == "SICK-R 99":
        sick = root / "downstream" / "SICK" / "SICK_train.txt"
        lines = sick.read_text().splitlines()
        fields = lines[2].split("\t")
        lines[2] = "\t".join(fields[:3] + ["99"] + fields[4:])
        sick.write_text("\n".join(lines) + "\n")
        return "SICK-R", [f"{sick}:3:", "99"]
    if case == "SST5 label":
        sst = root / "downstream" / "SST" / "fine" / "sentiment-train"
        sst.write_text(sst.read_text() + "\u00b2 a superscript two\n")
        return "SST5", [f"{sst}:251:", "\u00b2"]
    model = root / "no-such-model"
    return "Tense", ["--model", str(model)]


def test_every_data_error_is_one_error_line_at_the_command(tmp_path):
    for case in ("not utf-8", "malformed", "one class", "SICK-R 99", "SST5 label", "model dir"):
        root = tmp_path / case.replace(" ", "_") / "data"
        write_toy_senteval_tree(root)
        task, expected = _cli_case(root, case)
        model = root / "no-such-model" if case == "model dir" else tmp_path
        output = root.parent / "o.json"
        proc = run_cli(COMMAND + ["--model", model, "--senteval-data", root, "--tasks", task, "--output", output],
                       check=False)
        errors = [line for line in proc.stdout.splitlines() if line.startswith("error:")]
        assert proc.returncode == 2 and "Traceback" not in proc.stdout, (case, proc.stdout[-3000:])
        assert len(errors) == 1 and all(x in errors[0] for x in expected), (case, proc.stdout[-3000:])
        assert not output.exists()


def test_the_cache_bound_option_is_checked_before_anything_runs(tmp_path):
    for value in ("-1", "nan", "inf", "x"):
        proc = run_cli(COMMAND + ["--model", tmp_path, "--senteval-data", tmp_path, "--output", tmp_path / "o.json",
                                  "--cache-max-gb", value], check=False)
        assert proc.returncode == 2 and "--cache-max-gb" in proc.stdout and "Traceback" not in proc.stdout
        assert "unrecognized" not in proc.stdout, proc.stdout


def test_a_model_is_known_by_its_content_not_its_path_size_and_time(tmp_path):
    from fairseq_clear.cli.eval_senteval import fingerprint

    path = _write(tmp_path / "model" / "weights.bin", "a" * 1000)
    stat = path.stat()
    before = fingerprint(str(path)), fingerprint(str(path.parent))
    _write(path, "b" * 1000)  # the same size, and the same time below: another model
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    after = fingerprint(str(path)), fingerprint(str(path.parent))
    assert before[0] != after[0] and before[1] != after[1]
