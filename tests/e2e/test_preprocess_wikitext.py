"""The paper's ablation corpus: WikiText (../shared/data/corpus) through the pipeline, then
fairseq-train --task clear with the counter-fitted synonym table (the paper's) in `subs`."""

import json

import numpy as np
import pytest

from helpers import run_cli, shared, train_args

from fairseq_clear.preprocessing.pipeline import prepare


def _not_heading_unk_count(path) -> int:
    """<unk> occurrences outside WikiText title/heading lines (which the pipeline drops)."""
    n, prev_blank = 0, True
    for line in path.read_text(encoding="utf-8").splitlines():
        s = line.strip()
        heading = prev_blank and s.startswith("= ") and s.endswith(" =") and len(s) >= 4
        prev_blank = not s
        if not heading:
            n += line.count("<unk>")
    return n


@pytest.fixture(scope="module")
def wikitext(tmp_path_factory):
    corpus = shared("corpus")
    files = {
        "train": corpus / "wikitext-103" / "wiki.train.tokens.first_articles",
        "valid": corpus / "wikitext-103" / "wiki.valid.tokens",
        "test": corpus / "wikitext-2-raw" / "wiki.test.raw",  # raw text, CRLF, no blank lines
    }
    out = tmp_path_factory.mktemp("wikitext")
    summary = prepare([str(files["train"])], str(out), valid=[str(files["valid"])],
                      test=[str(files["test"])], vocab_size=2000, punkt_sample_chars=500_000,
                      workers=2, progress=False)
    return out, summary, files


def clear_synonyms(capsys, *args):
    """The clear-synonyms CLI, in this process (its output parsed)."""
    from fairseq_clear.cli.synonyms import main

    capsys.readouterr()
    main([str(a) for a in args])
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def counterfitted(tmp_path_factory):
    from fairseq_clear.preprocessing.synonym_tables import convert_counterfitted

    src = shared("synonyms", "counterfitted_neighbors.json")
    out = tmp_path_factory.mktemp("syn") / "counterfitted.json"
    return out, {"table": convert_counterfitted(str(src), str(out))}


def test_wikitext_documents_titles_headings_and_markers(wikitext):
    out, s, files = wikitext
    sp = s["splits"]
    # articles: a " = Title = " line after a blank line. The 150 title-like lines of the
    # train excerpt include 7 table fragments (" = Position ; GP = ") inside paragraphs.
    assert sp["train"]["documents"] == 143
    assert sp["valid"]["documents"] == 60
    # the raw copy has no blank lines, so its 2 formula fragments count as titles too
    assert sp["test"]["documents"] == 62
    assert s["inputs"]["train"]["formats"] == ["wikitext"] == s["inputs"]["test"]["formats"]
    assert s["lines"]["normalized"]["crlf_line_ending"] == 2891  # every line of wiki.test.raw
    assert s["lines"]["dropped"]["wikitext_title_line"] == 143 + 60 + 62
    assert s["lines"]["dropped"]["wikitext_heading_line"] > 0
    text = (out / "work" / "train.inputs.sent").read_text(encoding="utf-8")
    assert "role-playing" in text and " @-@ " not in text and " = = " not in text


def test_wikitext_unk_becomes_the_dictionary_unk(wikitext):
    out, s, files = wikitext
    valid = s["splits"]["valid"]
    assert valid["unk_from_unk_token"] == _not_heading_unk_count(files["valid"])
    assert valid["unk_tokens"] >= valid["unk_from_unk_token"] > 0
    assert s["binarized"]["valid"]["unk"] == valid["unk_tokens"]  # read back from valid.bin
    # "<unk>" never reaches the sentencepiece vocabulary as text
    pieces = (out / "data-bin" / "dict.txt").read_text(encoding="utf-8")
    assert "unk>" not in pieces.replace("<mask>", "")
    assert s["splits"]["test"]["unk_from_unk_token"] == 0  # the raw version has none


def test_counterfitted_table_conversion(counterfitted):
    path, result = counterfitted
    table = json.loads(path.read_text(encoding="utf-8"))
    stats = result["table"]
    # shared/data/synonyms/README.md: 49,975 keys, 25,591 with a neighbour, 109,104 neighbours
    assert stats["words_in"] == 49975 and stats["words"] == len(table) == 25591
    assert stats["words_without_synonyms_dropped"] == 49975 - 25591
    assert stats["synonyms"] == 109104
    assert "film" in table["movie"]
    for word, syns in table.items():
        assert syns and word not in syns and not any(" " in x or "_" in x for x in syns)


def test_coverage_is_what_subs_sees_and_fairseq_train_uses_the_table(wikitext, counterfitted,
                                                                      tmp_path, capsys):
    out, _, _ = wikitext
    table, _ = counterfitted
    data_bin = out / "data-bin"
    cov = clear_synonyms(capsys, "coverage", table, "--data", data_bin)
    assert 0.3 < cov["coverage"] < 0.6, cov  # the paper: about 40% of tokens

    # the same number from the task's own synonym index over the task's valid sentences
    from fairseq_clear.synonyms import synonym_coverage
    from test_preprocess_synonyms import clear_task

    task = clear_task(data_bin, table)
    augment = task.build_augmentation()
    sentences = task.load_sentences("valid")
    covered, words = synonym_coverage(task.synonym_index,
                                      (sentences[i][1:-1].numpy() for i in range(len(sentences))))
    assert (covered, words) == (cov["words_with_synonym"], cov["words"])
    from fairseq_clear.keyed_rng import KeyedRNG

    rng = KeyedRNG()
    changed = 0
    for i in range(200):
        body = sentences[i][1:-1].numpy()
        changed += not np.array_equal(augment(body, rng(1, 1, i, 0)), body)
    assert changed > 150  # 30% of the words of a sentence picked, ~45% of them have a synonym

    # the real CLI trains on the pipeline output with --augmentations subs
    result = run_cli(train_args(data_bin, tmp_path / "ckpt", "--augmentations", "subs",
                                "--synonym-table", table, max_update=4, batch_size=8))
    assert "synonym index:" in result.stdout and '"num_updates": "4"' in result.stdout
