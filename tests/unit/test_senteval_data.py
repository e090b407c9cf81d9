"""Readers of SentEval's transfer and probing data, on small fixtures in its exact file formats."""

import numpy as np
import pytest

from fairseq_clear.errors import FairseqClearError
from fairseq_clear.evaluation.senteval import data as sd


def _write(path, text, encoding="utf-8"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode(encoding))
    return path


def test_binary_tasks_are_latin1_with_senteval_s_labels(tmp_path):
    root = tmp_path / "data"
    _write(root / "downstream/MR/rt-polarity.pos", "a  caf\u00e9 film\nsimply   good .\n", "latin-1")
    _write(root / "downstream/MR/rt-polarity.neg", "dull\r\n", "latin-1")
    data = sd.read_senteval_task(str(root), "MR")
    assert data.splits["all"][0] == ["a caf\u00e9 film", "simply good .", "dull"]
    assert data.splits["all"][1].tolist() == [1, 1, 0] and data.protocol == "innerkfold"
    # SUBJ: the objective sentences are SentEval's label 1
    _write(root / "downstream/SUBJ/subj.objective", "it is a film .\n", "latin-1")
    _write(root / "downstream/SUBJ/subj.subjective", "i love it .\nawful\n", "latin-1")
    subj = sd.read_senteval_task(str(root), "SUBJ")
    assert subj.splits["all"][1].tolist() == [1, 0, 0]


def test_sst_binary_and_fine_grained_formats(tmp_path):
    root = tmp_path / "data"
    for split in ("train", "dev", "test"):
        _write(root / f"downstream/SST/binary/sentiment-{split}", "a good film\t1\na bad one\t0\n")
        _write(root / f"downstream/SST/fine/sentiment-{split}", "4 a great film\n0 awful\n2 so so  .\n")
    binary = sd.read_senteval_task(str(root), "SST2")
    assert binary.splits["train"][0] == ["a good film", "a bad one"] and binary.splits["dev"][1].tolist() == [1, 0]
    fine = sd.read_senteval_task(str(root), "SST5")
    assert fine.nclasses == 5 and fine.splits["test"][1].tolist() == [4, 0, 2]
    assert fine.splits["test"][0] == ["a great film", "awful", "so so ."]
    # the binary folder read as fine-grained: no line is "label sentence" with a label 0..4
    with pytest.raises(sd.SentEvalDataError, match=r"sentiment-train:1: expected label \(0..4\) sentence"):
        sd.read_sst(str(root / "downstream/SST/binary"), 5)


def test_trec_uses_the_six_coarse_labels(tmp_path):
    folder = tmp_path / "TREC"
    _write(folder / "train_5500.label", "DESC:manner How did serfdom develop ?\nHUM:ind Who killed Gandhi ?\n"
           "NUM:date When was caf\u00e9 founded ?\n", "latin-1")
    _write(folder / "TREC_10.label", "LOC:city Where is Rome ?\nABBR:exp What is NASA ?\nENTY:animal What ?\n",
           "latin-1")
    data = sd.read_trec(str(folder))
    assert data.splits["train"][0] == ["How did serfdom develop ?", "Who killed Gandhi ?", "When was caf\u00e9 founded ?"]
    assert data.splits["train"][1].tolist() == [1, 3, 5] and data.splits["test"][1].tolist() == [4, 0, 2]
    _write(folder / "TREC_10.label", "CITY:x Where ?\n", "latin-1")
    with pytest.raises(sd.SentEvalDataError, match=r"TREC_10.label:1: .*ABBR, DESC"):
        sd.read_trec(str(folder))


def test_mrpc_and_sick_entailment_skip_the_header(tmp_path):
    mrpc = tmp_path / "MRPC"
    header = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    _write(mrpc / "msr_paraphrase_train.txt", header + "1\t1\t2\tA b .\tA  c .\n0\t3\t4\tx\ty\n")
    _write(mrpc / "msr_paraphrase_test.txt", header + "0\t5\t6\tp\tq\n")
    data = sd.read_mrpc(str(mrpc))
    assert data.splits["train"] == [["A b .", "x"], ["A c .", "y"], data.splits["train"][2]]
    assert data.splits["train"][2].tolist() == [1, 0] and data.f1 and data.protocol == "kfold"
    sick = tmp_path / "SICK"
    head = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
    for name in sd.SICK_FILES.values():
        _write(sick / name, head + "1\ta\tb\t4.5\tENTAILMENT\n2\tc\td\t1.0\tCONTRADICTION\n3\te\tf\t3\tNEUTRAL\n")
    e = sd.read_sick_entailment(str(sick))
    assert e.splits["dev"][2].tolist() == [2, 0, 1] and e.nclasses == 3
    r = sd.read_relatedness(str(sick), "SICK-R")
    assert r.splits["test"][2].tolist() == [4.5, 1.0, 3.0]
    _write(sick / "SICK_trial.txt", head + "1\ta\tb\t4.5\tMAYBE\n")
    with pytest.raises(sd.SentEvalDataError, match=r"SICK_trial.txt:2: .*CONTRADICTION"):
        sd.read_sick_entailment(str(sick))


def test_probing_reads_the_partition_column_and_numbers_labels_by_sort_order(tmp_path):
    path = _write(tmp_path / "probing" / "past_present.txt",
                  "tr\tPRES\tShe  walks .\ntr\tPAST\tHe walked .\nva\tPAST\tIt rained .\nte\tPRES\tI go .\n")
    data = sd.read_senteval_task(str(tmp_path), "Tense")
    assert data.splits["train"][0] == ["She walks .", "He walked ."]
    assert data.splits["train"][1].tolist() == [1, 0]  # PAST 0, PRES 1: sorted
    assert data.sizes() == {"train": 2, "dev": 1, "test": 1} and data.protocol == "split"
    # several columns: the label is the second, the sentence the last (SentEval's probing.py)
    _write(path, "tr\t5\textra\ta b\ntr\t4\tx\tc\nva\t5\tx\td\nte\t4\tx\te\n")
    assert sd.read_probing(str(path), "SentLen").splits["train"][0] == ["a b", "c"]
    _write(path, "tr\tPRES\ta\nva\tPAST\tb\nte\tPRES\tc\n")
    with pytest.raises(sd.SentEvalDataError, match="PAST occur in va/te but not in tr"):
        sd.read_probing(str(path), "Tense")
    _write(path, "train\tPRES\ta\n")
    with pytest.raises(sd.SentEvalDataError, match=r"past_present.txt:1: expected tr\|va\|te"):
        sd.read_probing(str(path), "Tense")
    wc = _write(tmp_path / "probing" / "word_content.txt",
                "tr\tcat\ta cat\ntr\tdog\ta dog\nva\tcat\tb cat\nte\tcat\tc cat\n")
    assert sd.read_probing(str(wc), "WC").classifier == {"nhid": 0}  # SentEval: WC by logistic regression


def test_snli_keeps_label_text_for_senteval_s_sort(tmp_path):
    folder = tmp_path / "SNLI"
    for split in ("train", "dev", "test"):
        _write(folder / f"s1.{split}", "A man .\nA dog runs .\n", "latin-1")
        _write(folder / f"s2.{split}", "Someone .\nAn animal .\n", "latin-1")
        _write(folder / f"labels.{split}", "entailment\ncontradiction\n")
    data = sd.read_snli(str(folder))
    assert data.splits["dev"][2] == ["entailment", "contradiction"] and data.features == "snli" and data.noreg
    assert data.classifier == {"max_epoch": 15, "epoch_size": 1}
    _write(folder / "labels.test", "entailment\n")
    with pytest.raises(sd.SentEvalDataError, match="have 2, 2 and 1 lines"):
        sd.read_snli(str(folder))


def test_a_missing_folder_is_one_error_naming_it_and_how_to_get_it(tmp_path):
    with pytest.raises(sd.SentEvalMissingError) as err:
        sd.load_task("CR", senteval_data=str(tmp_path))
    message = str(err.value)
    assert str(tmp_path / "downstream" / "CR") in message and "get_transfer_data.bash" in message
    assert isinstance(err.value, FairseqClearError)
    with pytest.raises(sd.SentEvalMissingError, match=r"word_content.txt' is missing; the probing files ship"):
        sd.load_task("WC", senteval_data=str(tmp_path))
    with pytest.raises(sd.SentEvalMissingError, match="--glue-data"):
        sd.load_task("SST2")
    (tmp_path / "downstream" / "CR").mkdir(parents=True)
    with pytest.raises(sd.SentEvalMissingError, match="lacks custrev.pos, custrev.neg"):
        sd.load_task("CR", senteval_data=str(tmp_path))


def test_task_names_and_groups():
    assert sd.resolve_tasks("downstream") == list(sd.DOWNSTREAM)
    assert sd.resolve_tasks("mr,SICKEntailment,Length,probing")[:4] == ["MR", "SICK-E", "SentLen", "WC"]
    assert len(sd.resolve_tasks("all")) == 27  # DeCLUTR's 18 downstream tasks less ImageCaptionRetrieval, 10 probing
    assert "SNLI" in sd.resolve_tasks("all") and sd.resolve_tasks("snli") == ["SNLI"]
    assert sd.resolve_tasks("downstream")[:5] == ["STS12", "STS13", "STS14", "STS15", "STS16"]
    with pytest.raises(sd.SentEvalDataError, match="unknown task 'COCO'"):
        sd.resolve_tasks("MR,COCO")


def test_glue_sst2_holds_out_dev_from_train_and_tests_on_glue_dev(tmp_path):
    folder = tmp_path / "SST-2"
    rows = "".join(f"phrase {k} \t{k % 2}\n" for k in range(40))
    _write(folder / "train.tsv", "sentence\tlabel\n" + rows)
    _write(folder / "dev.tsv", "sentence\tlabel\nit 's fine . \t1\nbad . \t0\n")
    data = sd.read_glue_task(str(tmp_path), "SST2")
    sizes = data.sizes()
    assert sizes["test"] == 2 and sizes["train"] + sizes["dev"] == 40 and sizes["dev"] == 4
    assert not set(data.splits["train"][0]) & set(data.splits["dev"][0])
    assert data.splits["test"][0] == ["it 's fine .", "bad ."] and "not SentEval's split" in data.note


def test_subsample_keeps_file_order_and_columns_aligned():
    data = sd.TaskData("X", "split", 2, {"train": [[f"s{k}" for k in range(50)], [f"t{k}" for k in range(50)],
                                                   np.arange(50)]}, "here", pair=True)
    small = sd.subsample(data, 10)
    a, b, y = small.splits["train"]
    assert len(y) == 10 and list(y) == sorted(y) and a == [f"s{k}" for k in y] and b == [f"t{k}" for k in y]
    assert len(data.splits["train"][2]) == 50


def _sts13(root, empty_gold_line=False):
    """SentEval's STS13 folder (three subsets; an empty gold line: an unscored pair, skipped)."""
    folder = root / "downstream" / "STS" / "STS13-en-test"
    rng = np.random.RandomState(0)
    for subset in ("FNWN", "headlines", "OnWN"):
        n = {"FNWN": 6, "headlines": 9, "OnWN": 7}[subset]
        _write(folder / f"STS.input.{subset}.txt", "".join(f"{subset} a{k}  x\t{subset} b{k}\n" for k in range(n)))
        gold = [f"{rng.uniform(0, 5):.2f}" for _ in range(n)]
        if empty_gold_line and subset == "OnWN":
            gold[3] = ""
        _write(folder / f"STS.gs.{subset}.txt", "\n".join(gold) + "\n")
    return folder


def test_sts12_to_16_are_read_by_subset_and_scored_as_senteval_s_stseval(tmp_path):
    from scipy.stats import spearmanr

    from fairseq_clear.evaluation.senteval import classifier as sc
    from fairseq_clear.evaluation.senteval.transfer import score_task

    _sts13(tmp_path, empty_gold_line=True)
    data = sd.load_task("STS13", senteval_data=str(tmp_path))
    assert data.protocol == "cosine" and data.subsets == {"FNWN": (0, 6), "headlines": (6, 15), "OnWN": (15, 21)}
    a, b, gold = data.splits["test"]
    assert len(a) == len(b) == len(gold) == 21 and a[0] == "FNWN a0 x"  # SentEval's whitespace tokens
    sentences = data.sentences()
    vectors = np.random.RandomState(1).randn(len(sentences), 8)
    index = {x: k for k, x in enumerate(sentences)}
    out = score_task(data, vectors, index, sc.make_config("prototyping"))
    u, v = vectors[[index[x] for x in a]], vectors[[index[x] for x in b]]
    cos = np.array([x @ y / np.linalg.norm(x) / np.linalg.norm(y) for x, y in zip(u, v)])
    per = {k: spearmanr(cos[i:j], gold[i:j])[0] * 100 for k, (i, j) in data.subsets.items()}
    assert out["subsets"] == pytest.approx(per)
    assert out["score"] == pytest.approx(np.mean(list(per.values())))  # SentEval's all.spearman.mean
    assert out["spearman_wmean"] == pytest.approx(sum(per[k] * (j - i) for k, (i, j) in data.subsets.items()) / 21)
    small = sd.subsample(data, 10)
    assert sum(j - i for i, j in small.subsets.values()) == 10 and list(small.subsets) == list(data.subsets)
    assert all(x.startswith(k) for k, (i, j) in small.subsets.items() for x in small.splits["test"][0][i:j])


def test_the_table_is_declutr_s_snli_averaged():
    from fairseq_clear.evaluation.senteval.transfer import table_of

    table = table_of({"STS12": 50.0, "MR": 70.0, "SNLI": 90.0, "Tense": 80.0})
    assert table["Downstream"] == 70.0 and table["Probing"] == 80.0 and table["Avg"] == 75.0
    assert table["SNLI"] == 90.0
