"""clear-eval-sts refuses empty STS files (it used to exit 0 with null scores) and reads
SentEval's real download layout, where SICK sits beside STS/."""

import json
import shutil

import pytest

from embedding_helpers import write_senteval_tree
from helpers import bin_path, run_cli

from fairseq_clear.preprocessing import sts_readers as sts


@pytest.mark.parametrize("which", ["STS14", "STS-B", "SICK-R"])
def test_empty_sts_files_are_an_error_naming_the_file(ckpt, tmp_path, which):
    tree = write_senteval_tree(tmp_path / "sts")
    target = {
        "STS14": tree / "STS14-en-test" / "STS.input.images.txt",
        "STS-B": tree / "STSBenchmark" / "sts-test.csv",
        "SICK-R": tree / "SICK" / "SICK_test_annotated.txt",
    }[which]
    target.write_text("" if which != "SICK-R" else "header only\n", encoding="utf-8")
    if which == "STS14":
        (target.parent / "STS.gs.images.txt").write_text("", encoding="utf-8")
    checkpoint, data = ckpt
    out = tmp_path / "o.json"
    proc = run_cli([bin_path("clear-eval-sts"), "--checkpoint", checkpoint, "--data", data, "--cpu",
                    "--sts-dir", tree, "--tasks", which, "--output", out], check=False)
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert "holds no scored sentence pair" in proc.stdout and str(target) in proc.stdout, proc.stdout[-2000:]
    assert not out.exists()


def test_senteval_download_layout_finds_sick_beside_sts(ckpt, tmp_path):
    tree = write_senteval_tree(tmp_path / "tree")
    downstream = tmp_path / "SentEval" / "data" / "downstream"
    (downstream / "STS").mkdir(parents=True)
    for child in tree.iterdir():
        if child.name == "SICK":
            shutil.move(str(child), downstream / "SICK")
        else:
            shutil.move(str(child), downstream / "STS" / child.name)
    dirs = sts.resolve_sts_dirs(str(downstream / "STS"))
    assert dirs["SICK-R"] == str(downstream / "SICK")
    checkpoint, data = ckpt
    out = tmp_path / "o.json"
    run_cli([bin_path("clear-eval-sts"), "--checkpoint", checkpoint, "--data", data, "--cpu",
             "--sts-dir", downstream / "STS", "--output", out])
    result = json.loads(out.read_text())
    assert "SICK-R" in json.dumps(result) and "STS12" in json.dumps(result)
