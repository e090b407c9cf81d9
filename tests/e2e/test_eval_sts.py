"""SentEval STS readers, the "all" aggregation, alignment/uniformity, and clear-eval-sts."""

import json
import math

import numpy as np
import pytest
from scipy.stats import spearmanr

from embedding_helpers import write_senteval_tree
from helpers import bin_path, run_cli, shared

from fairseq_clear.preprocessing import sts_readers as sts


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return write_senteval_tree(tmp_path_factory.mktemp("senteval"))


# ---- readers -----------------------------------------------------------------------------

def test_senteval_subset_keeps_scored_pairs_and_normalises_whitespace(tmp_path):
    (tmp_path / "STS.input.x.txt").write_text("A  b\tc d\nunscored\tpair\n e \t f\n", encoding="utf-8")
    (tmp_path / "STS.gs.x.txt").write_text("4.5\n\n 1.0 \n", encoding="utf-8")
    pairs = sts.read_senteval_subset(str(tmp_path), "x")
    assert pairs.sent1 == ["A b", "e"] and pairs.sent2 == ["c d", "f"]
    assert pairs.scores.tolist() == [4.5, 1.0]


def test_malformed_lines_are_reported_with_file_and_line(tmp_path):
    (tmp_path / "STS.input.x.txt").write_text("a\tb\nno tab here\nc\td\ne\tf\n", encoding="utf-8")
    (tmp_path / "STS.gs.x.txt").write_text("1\n2\nthree\n4\n", encoding="utf-8")
    with pytest.raises(sts.STSFormatError) as err:
        sts.read_senteval_subset(str(tmp_path), "x")
    message = str(err.value)
    assert "2 malformed line(s)" in message
    assert f"{tmp_path / 'STS.input.x.txt'}:2:" in message and f"{tmp_path / 'STS.gs.x.txt'}:3:" in message
    pairs = sts.read_senteval_subset(str(tmp_path), "x", skip_malformed=True)
    assert len(pairs) == 2 and len(pairs.skipped) == 2

    (tmp_path / "STS.gs.x.txt").write_text("1\n2\n", encoding="utf-8")
    with pytest.raises(sts.STSFormatError, match="2 lines but .* has 4"):
        sts.read_senteval_subset(str(tmp_path), "x", skip_malformed=True)  # cannot be matched: always fatal

    bench = tmp_path / "sts-test.csv"
    bench.write_text("g\tf\ty\t1\t3.0\ta\tb\textra\tcols\ng\tf\ty\t2\tbad\ta\tb\ng\tf\t3\n", encoding="utf-8")
    with pytest.raises(sts.STSFormatError) as err:
        sts.read_sts_benchmark(str(bench))
    assert f"{bench}:2: score 'bad'" in str(err.value) and f"{bench}:3: expected at least 7" in str(err.value)
    assert len(sts.read_sts_benchmark(str(bench), skip_malformed=True)) == 1

    sick = tmp_path / "SICK_test_annotated.txt"
    sick.write_text("header\r\n1\ta\tb\t4.5\tX\r\n2\ta\tb\r\n", encoding="utf-8")
    with pytest.raises(sts.STSFormatError, match=rf"{sick}:3: expected at least 4"):
        sts.read_sick(str(sick))


def test_all_aggregation_pools_the_subsets(tree):
    pairs = sts.read_sts_year(str(tree / "STS12-en-test"), "STS12")
    assert list(pairs.subsets) == sts.STS_YEARS["STS12"]
    assert len(pairs) == 5 * 11  # one unscored pair per subset is left out
    rng = np.random.default_rng(0)
    # subset-specific offsets: each subset ranks well alone, the pooled ranking is worse
    sims = pairs.scores + rng.normal(0, 0.5, len(pairs))
    for k, (a, b) in enumerate(pairs.subsets.values()):
        sims[a:b] += 3 * k
    result = sts.score_pairs(pairs, sims)
    assert result["spearman"] == pytest.approx(spearmanr(sims, pairs.scores)[0] * 100)
    per = [spearmanr(sims[a:b], pairs.scores[a:b])[0] * 100 for a, b in pairs.subsets.values()]
    assert result["mean"] == pytest.approx(np.mean(per))
    assert result["spearman"] < result["mean"] - 5  # "all" is not the mean of the subsets


def test_alignment_and_uniformity_known_values():
    x = np.array([[1.0, 0.0], [0.0, 2.0]])
    assert sts.alignment(x, x) == pytest.approx(0.0)
    assert sts.alignment(x, -x) == pytest.approx(4.0)  # unit vectors, opposite: |2|^2
    # two antipodal points: one pair at squared distance 4 -> log exp(-2 * 4) = -8
    assert sts.uniformity(np.array([[1.0, 0.0], [-3.0, 0.0]])) == pytest.approx(-8.0)
    # every vector equal: the worst uniformity, 0
    assert sts.uniformity(np.ones((5, 3))) == pytest.approx(0.0, abs=1e-9)


def test_resolve_copies(tree, tmp_path):
    dirs = sts.resolve_sts_dirs(str(tree), "senteval")  # no tokenized subdirectory: the tree itself
    assert dirs["STS13"] == str(tree / "STS13-en-test") and dirs["SICK-R"] == str(tree / "SICK")
    with pytest.raises(FileNotFoundError, match="--sts-dir"):
        sts.resolve_sts_dirs(str(tmp_path / "missing"))


# ---- clear-eval-sts ---------------------------------------------------------------------

def test_clear_eval_sts_prints_table2_for_both_poolings(ckpt, tree, tmp_path):
    checkpoint, data = ckpt
    out_json = tmp_path / "sts.json"
    out = run_cli([
        bin_path("clear-eval-sts"), "--checkpoint", checkpoint, "--data", data, "--sts-dir", tree,
        "--output", out_json, "--name", "tiny", "--cpu",
    ]).stdout
    header = next(line for line in out.splitlines() if line.startswith("Method"))
    assert header.split() == ["Method", "SICK-R", "STS-B", "STS12", "STS13", "STS14", "STS15", "STS16", "Avg"]
    rows = [line for line in out.splitlines() if line.startswith("tiny-")]
    assert [r.split()[0] for r in rows] == ["tiny-[CLS]", "tiny-mean"]
    assert all(len(r.split()) == 9 for r in rows)
    assert 'SentEval "all" aggregation' in out and "Alignment and uniformity" in out

    report = json.loads(out_json.read_text())
    assert report["aggregation"] == "all" and report["sts_copy"] == "senteval"
    cls = report["results"]["cls"]
    assert set(cls["table"]) == {"SICK-R", "STS-B", "STS12", "STS13", "STS14", "STS15", "STS16", "Avg"}
    values = [v for k, v in cls["table"].items() if k != "Avg"]
    assert cls["table"]["Avg"] == pytest.approx(np.mean(values))
    assert set(cls["tasks"]["STS12"]["subsets"]) == set(sts.STS_YEARS["STS12"])
    assert cls["alignment_uniformity"]["positive_pairs"] > 0

    # the STS-B number is the Spearman of the hub's cosine similarities
    from fairseq_clear.models import ClearRobertaModel

    hub = ClearRobertaModel.from_pretrained(checkpoint.parent, checkpoint.name, data)
    pairs = sts.load_task("STS-B", str(tree / "STSBenchmark"))
    a = hub.embed(pairs.sent1, pooling="mean").astype(np.float64)
    b = hub.embed(pairs.sent2, pooling="mean").astype(np.float64)
    # float64 cosine as the evaluation computes it (identical sentences tie at exactly 1)
    sims = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert report["results"]["mean"]["table"]["STS-B"] == pytest.approx(spearmanr(sims, pairs.scores)[0] * 100, abs=1e-3)


def test_clear_eval_sts_reports_malformed_lines(ckpt, tree, tmp_path):
    import shutil

    checkpoint, data = ckpt
    bad = tmp_path / "bad"
    shutil.copytree(tree, bad)
    path = bad / "STS14-en-test" / "STS.input.images.txt"
    lines = path.read_text().splitlines()
    lines[3] = lines[3].replace("\t", " ")
    path.write_text("\n".join(lines) + "\n")
    args = [bin_path("clear-eval-sts"), "--checkpoint", checkpoint, "--data", data, "--sts-dir", bad,
            "--tasks", "STS14", "--output", tmp_path / "o.json", "--cpu"]
    failed = run_cli(args, check=False)
    assert failed.returncode != 0 and f"{path}:4:" in failed.stdout
    skipped = run_cli(args + ["--skip-malformed"]).stdout
    assert f"{path}:4" in skipped
    assert json.loads((tmp_path / "o.json").read_text())["malformed_lines_skipped"] == 1


# ---- the real data (../shared) ----------------------------------------------------------

def test_real_senteval_files_have_the_documented_counts():
    root = shared("sts")
    counts = {"STS12": 3108, "STS13": 1500, "STS14": 3750, "STS15": 3000, "STS16": 1186, "STS-B": 1379, "SICK-R": 4927}
    for copy in ("raw", "senteval"):
        dirs = sts.resolve_sts_dirs(str(root), copy)
        for task, n in counts.items():
            pairs = sts.load_task(task, dirs[task])
            assert len(pairs) == n, (copy, task)
            assert not pairs.skipped and all(s for s in pairs.sent1[:50])
    tokenized = sts.load_task("STS-B", sts.resolve_sts_dirs(str(root), "senteval")["STS-B"])
    assert all(s == s.lower() for s in tokenized.sent1)


def test_clear_eval_sts_on_the_real_data(ckpt, tmp_path):
    root = shared("sts")
    checkpoint, data = ckpt
    out_json = tmp_path / "real.json"
    out = run_cli([
        bin_path("clear-eval-sts"), "--checkpoint", checkpoint, "--data", data, "--sts-dir", root,
        "--output", out_json, "--cpu", "--batch-size", "128",
    ]).stdout
    report = json.loads(out_json.read_text())
    for pooling in ("cls", "mean"):
        table = report["results"][pooling]["table"]
        assert len(table) == 8
        assert all(v is None or (-100 <= v <= 100 and not math.isnan(v)) for v in table.values())
    assert report["results"]["cls"]["tasks"]["STS16"]["pairs"] == 1186
    assert "senteval_tokenized_lowercased" in report["task_dirs"]["STS12"]
    assert "checkpoint_last-[CLS]" in out


def test_export_card_carries_the_sts_table(ckpt, tree, tmp_path):
    """clear-eval-sts --output, then clear-export-hf --sts-results: the card shows that table."""
    checkpoint, data = ckpt
    out_json = tmp_path / "sts.json"
    run_cli([bin_path("clear-eval-sts"), "--checkpoint", checkpoint, "--data", data, "--sts-dir", tree,
             "--output", out_json, "--poolings", "mean", "--cpu"])
    table = json.loads(out_json.read_text())["results"]["mean"]["table"]
    run_cli([bin_path("clear-export-hf"), "--checkpoint", checkpoint, "--data", data, "--out", tmp_path / "st",
             "--pooling", "mean", "--sts-results", out_json])
    card = (tmp_path / "st" / "README.md").read_text(encoding="utf-8")
    assert "| " + " | ".join(table) + " |" in card
    assert "| " + " | ".join(f"{v:.1f}" for v in table.values()) + " |" in card
    # results for another pooling than the export's: refused before any work, naming the option
    proc = run_cli([bin_path("clear-export-hf"), "--checkpoint", checkpoint, "--data", data,
                    "--out", tmp_path / "st2", "--pooling", "cls", "--sts-results", out_json], check=False)
    assert proc.returncode == 2 and "--sts-results" in proc.stdout and "pooling 'cls'" in proc.stdout
    assert not (tmp_path / "st2").exists()
