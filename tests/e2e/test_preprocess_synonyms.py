"""clear-synonyms (WordNet table) and the WordNet demo corpus, through the task's `subs`."""

import json
import os

import numpy as np
import pytest

from helpers import IN_CI, REPO, USER_DIR


def need_wordnet():
    """WordNet for nltk (``make wordnet``); skips locally when absent, fails in CI."""
    path = str(REPO / "nltk_data")
    os.environ.setdefault("NLTK_DATA", path)
    import nltk

    if os.path.isdir(path) and path not in nltk.data.path:
        nltk.data.path.insert(0, path)
    try:
        nltk.data.find("corpora/wordnet")
    except LookupError:
        message = "needs WordNet for nltk (make wordnet)"
        if IN_CI:
            pytest.fail(message + ", which CI must install")
        pytest.skip(message)


def clear_task(data_bin, table, augmentations="subs", tokens_per_sample=512, *extra):
    """``--task clear`` set up exactly as fairseq-train does, with ``--synonym-table``."""
    import fairseq_clear  # noqa: F401  (registers the task)
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [
        str(data_bin), "--user-dir", USER_DIR, "--task", "clear", "--criterion", "clear",
        "--arch", "clear_roberta_tiny", "--augmentations", augmentations,
        "--synonym-table", str(table), "--tokens-per-sample", str(tokens_per_sample), "--cpu",
        *extra,
    ])
    cfg = convert_namespace_to_omegaconf(args)
    return tasks.setup_task(cfg.task)


#: adjectives and adverbs: a fifth of WordNet, so the table builds in seconds; the
#: synthetic test sentences ("a small child ... very quickly") have many of them
TEST_POS = ("a", "r")


@pytest.fixture(scope="module")
def wordnet_table(tmp_path_factory):
    need_wordnet()
    from fairseq_clear.preprocessing.synonym_tables import build_wordnet_table

    out = tmp_path_factory.mktemp("wn") / "wordnet.json"
    stats = build_wordnet_table(str(out), pos=TEST_POS)
    return out, stats, json.loads(out.read_text(encoding="utf-8"))


def test_wordnet_table_has_one_word_synonyms_without_the_word(wordnet_table):
    _, stats, table = wordnet_table
    assert stats["source"] == "WordNet 3.0"
    assert stats["synsets"] == 18156 + 3621  # WordNet 3.0 adjective (with satellites) + adverb synsets
    assert {"little", "modest"} <= set(table["small"]) and "small-scale" in table["small"]
    assert {"rapidly", "speedily"} <= set(table["quickly"])
    assert "pocket-size" in table["small"]  # hyphenated lemmas are one word
    assert stats["multiword_synonyms_dropped"] > 0 and stats["multiword_words_dropped"] > 0
    for word, syns in table.items():
        assert syns and "_" not in word and " " not in word
        assert all("_" not in s and " " not in s and s.lower() != word.lower() for s in syns)
    assert stats["words"] == len(table)
    # lower-case lemmas only by default: WordNet's "AD", "OK" are abbreviations
    assert "AD" not in table and stats["capitalized_lemmas_dropped"] > 0
    assert all(w == w.lower() and all(s == s.lower() for s in v) for w, v in table.items())


def test_wordnet_cli_pos_max_and_capitalized_options(tmp_path, capsys):
    need_wordnet()
    from fairseq_clear.cli.synonyms import main

    out = tmp_path / "verbs.json"
    main(["wordnet", str(out), "--pos", "v", "--max-synonyms", "3"])
    result = json.loads(capsys.readouterr().out)
    verbs = json.loads(out.read_text(encoding="utf-8"))
    assert result["table"]["pos"] == "v" and result["table"]["synsets"] == 13767  # WordNet 3.0
    assert "small" not in verbs and "quickly" not in verbs  # verbs only
    assert max(len(v) for v in verbs.values()) == 3
    # from the most frequent senses first (run.v.01 has no other lemma; run.v.02 = scat, ...)
    assert verbs["run"] == ["scat", "scarper", "lam"]

    main(["wordnet", str(tmp_path / "cased.json"), "--pos", "r", "--keep-capitalized"])
    cased = json.loads((tmp_path / "cased.json").read_text(encoding="utf-8"))
    assert "A.D." in cased["AD"]

    with pytest.raises(SystemExit) as e:
        main(["wordnet", str(out), "--pos", "x"])
    assert e.value.code == 2 and "--pos: 'x'" in capsys.readouterr().err


def test_wordnet_table_loads_in_subs_and_substitutes(wordnet_table, tiny_data):
    """The task builds its synonym index from the table, and `subs` (at --subs-rate 1) changes
    exactly the sentences that have a word with a synonym, into synonyms from the table."""
    from fairseq_clear.keyed_rng import KeyedRNG

    path, _, table = wordnet_table
    task = clear_task(tiny_data, path, "subs", 512, "--subs-rate", "1.0")
    augment = task.build_augmentation()
    index = task.synonym_index
    assert len(index) > 1000
    sentences = task.load_sentences("valid")
    rng = KeyedRNG()
    changed = coverable = 0
    d = task.source_dictionary
    for i in range(len(sentences)):
        body = sentences[i][1:-1].numpy()
        coverable += any(w in index.synonyms for w in index.words(body))
        view = augment(body, rng(1, 1, i, 0))
        if not np.array_equal(view, body):
            changed += 1
            # what changed are whole words, replaced by WordNet synonyms of them
            before = d.string(body, "sentencepiece").split()
            after = d.string(view, "sentencepiece").split()
            assert len(before) == len(after)
            for old, new in zip(before, after):
                if old != new:
                    assert new.lower() in table[old.lower()], (old, new)
    assert changed == coverable > 10


def test_wordnet_demo_corpus_goes_through_clear_prepare(tmp_path):
    need_wordnet()
    from fairseq_clear.preprocessing.pipeline import prepare
    from fairseq_clear.preprocessing.wordnet_corpus import PREPARE_ARGS, build_wordnet_corpus

    corpus = tmp_path / "wordnet_adverbs.txt"
    stats = build_wordnet_corpus(str(corpus), pos=["r"])
    assert stats["documents"] == 3621  # WordNet 3.0 adverb synsets: one document each
    assert stats["sentences"] == stats["glosses"] + stats["examples"]
    docs = corpus.read_text(encoding="utf-8").split("\n\n")
    assert len(docs) == stats["documents"] and all(d.strip() for d in docs)
    assert PREPARE_ARGS[:2] == ["--input-format", "lines"]
    s = prepare([str(corpus)], str(tmp_path / "out"), input_format="lines", vocab_size=500,
                valid_size=100, test_size=0, workers=2, progress=False)
    assert s["splits"]["valid"]["documents"] == 100
    assert s["splits"]["train"]["documents"] + 100 == stats["documents"]
    assert s["splits"]["train"]["sentences"] + s["splits"]["valid"]["sentences"] == stats["sentences"]
    assert s["lines"]["dropped"] == {} and s["lines"]["altered"] == {}
