"""Issue 40 items 6 and 7, on the path a newcomer follows.

6: a Hugging Face folder with no pooling config is pooled as sentence-transformers pools it (mean): the
import records it and says so, the hub embeds with it, and the continued-training recipes train with it
on a CPU and on a GPU alike.
7: each error of that path is one line naming the option or file (exit status 2): the README's
from-scratch block on a one-sentence-per-line file, the import into a non-empty OUT_DIR, clear-embed
--checkpoint DIR; the import's output holds no hydra warnings; no message names preprocess/prepare.sh
(a pip install has no such file); the progress bar counts the updates --max-update leaves."""

import re
import shlex
import sys

import numpy as np
import pytest

from helpers import REPO, USER_DIR, bin_path, run_captured

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """(plain BERT folder, its import, the import's process) — no modules.json, no 1_Pooling."""
    from hf_standins import make_bert

    root = tmp_path_factory.mktemp("plain_bert")
    bert = make_bert(root / "bert")
    proc = run_captured([bin_path("clear-import-hf"), bert, root / "imported"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return bert, root / "imported", proc


def _error_lines(proc, stream="stderr"):
    return [line for line in getattr(proc, stream).splitlines() if line.strip()]


def _one_error_line(proc):
    """fairseq-train's one ``error:`` line: status 2, no traceback, nothing logged (fairseq's own hydra
    deprecation warnings, printed before the plugin is reached, may come first)."""
    out = proc.stdout + proc.stderr
    errors = [line for line in out.splitlines() if line.startswith("error: ")]
    assert proc.returncode == 2 and len(errors) == 1 and _error_lines(proc)[-1] == errors[0], out[-3000:]
    assert "Traceback" not in out and " | INFO | " not in out, out[-3000:]
    return errors[0]


# ---- 6. one pooling rule for a folder with no pooling config ------------------------------------

def test_import_of_a_plain_folder_records_mean_and_says_so(imported):
    _, out, proc = imported
    assert "no pooling config: mean, sentence-transformers' default" in proc.stdout, proc.stdout
    assert "--pretrained-pooling mean" in (out / "fairseq_args.txt").read_text()


def test_hub_embeds_a_plain_folder_as_sentence_transformers_does(imported):
    pytest.importorskip("sentence_transformers")
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    from fairseq_clear.models.hub_interface import from_pretrained
    from hf_standins import varied_sentences

    bert, out, _ = imported
    sentences = [s for s in varied_sentences(40, seed=3) if s.strip()][:24]
    hub = from_pretrained(out, "model.pt", ".")
    ours = hub.embed(sentences)  # the default: no pooling named
    encoder = Transformer(str(bert))
    st = SentenceTransformer(modules=[encoder, Pooling(encoder.get_embedding_dimension(), "mean")], device="cpu")
    theirs = st.encode(sentences, convert_to_numpy=True)
    assert hub.default_pooling == "mean"
    assert np.abs(np.asarray(ours) - theirs).max() < 1e-5


@pytest.mark.parametrize("mode", ["simcse-unsup", "clear"])
@pytest.mark.parametrize("cpu", [True, False], ids=["cpu", "gpu"])
def test_recipes_train_a_plain_folder_with_mean_on_cpu_and_gpu(imported, mode, cpu):
    """The recipes put these options after their own (simcse's GPU settings say [CLS], its CPU ones mean)."""
    _, out, _ = imported
    proc = run_captured([sys.executable, "-m", "fairseq_clear.continued", mode, out / "model.pt",
                         *(["--cpu"] if cpu else []), "--"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    words = proc.stdout.splitlines()
    assert "--sentence-pooling" in words and words[words.index("--sentence-pooling") + 1] == "mean", words
    assert "sentence-transformers' default" in proc.stderr, proc.stderr


# ---- 7. one line for each error of the path ---------------------------------------------------------

def _readme_scratch_commands():
    """The commands of the README's from-scratch block (continuation lines joined)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## I want to pre-train from scratch"):]
    block = section[section.index("```bash\n") + len("```bash\n"):]
    block = block[:block.index("```")].replace("\\\n", " ")
    return [line for line in block.splitlines() if line.strip()]


def test_readme_scratch_block_on_a_lines_file_fails_in_one_line_each(tmp_path):
    lines = [f"the cat number {i} sees a dog in the park" for i in range(200)]
    (tmp_path / "corpus.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    prepare, train = _readme_scratch_commands()[:2]
    assert prepare.startswith("clear-prepare ") and train.startswith("fairseq-train ")
    proc = run_captured([bin_path("clear-prepare"), *shlex.split(prepare)[1:]], cwd=tmp_path)
    assert proc.returncode == 2 and _error_lines(proc)[-1].startswith("error: "), proc.stderr[-2000:]
    args = shlex.split(train.replace("$(clear-user-dir)", USER_DIR))
    proc = run_captured([bin_path("fairseq-train"), *args[1:]], cwd=tmp_path)
    line = _one_error_line(proc)
    assert "'OUT/data-bin' does not exist" in line and "clear-prepare" in line, line


def test_fairseq_train_on_a_directory_without_dict_txt_is_one_line(tmp_path):
    (tmp_path / "data").mkdir()
    proc = run_captured([bin_path("fairseq-train"), tmp_path / "data", "--user-dir", USER_DIR, "--task", "clear",
                         "--arch", "clear_roberta_tiny", "--cpu", "--save-dir", tmp_path / "save"])
    line = _one_error_line(proc)
    assert f"'{tmp_path / 'data'}' has no dict.txt" in line and "clear-prepare" in line, line


def test_import_into_a_non_empty_dir_names_out_dir_and_the_import(imported, tmp_path):
    bert, _, _ = imported
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine")
    proc = run_captured([bin_path("clear-import-hf"), bert, tmp_path / "taken"])
    lines = _error_lines(proc)
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith("error: OUT_DIR ") and "previous import" in lines[0], lines
    assert "--out " not in lines[0] and "previous export" not in lines[0], lines
    assert (tmp_path / "taken" / "notes.txt").read_text() == "mine"


def test_embed_checkpoint_directory_says_it_is_one_and_names_its_checkpoints(tmp_path):
    (tmp_path / "ckpts").mkdir()
    for name in ("checkpoint_best.pt", "checkpoint_last.pt"):
        (tmp_path / "ckpts" / name).write_bytes(b"")
    (tmp_path / "in.txt").write_text("a sentence\n")
    proc = run_captured([bin_path("clear-embed"), "--checkpoint", tmp_path / "ckpts", "--input", tmp_path / "in.txt",
                         "--output", tmp_path / "v.npy", "--cpu"])
    lines = _error_lines(proc)
    assert proc.returncode == 2 and lines[-1].startswith("error: --checkpoint "), proc.stderr[-3000:]
    assert "is a directory" in lines[-1] and "does not exist" not in lines[-1], lines
    assert "checkpoint_best.pt" in lines[-1] and "checkpoint_last.pt" in lines[-1], lines
    assert not (tmp_path / "v.npy").exists()


def test_import_output_holds_no_hydra_warnings(imported):
    _, _, proc = imported
    assert "Warning" not in proc.stderr and "hydra" not in proc.stderr, proc.stderr[-3000:]
    assert len(proc.stdout.splitlines()) == 3, proc.stdout


def test_no_message_sends_a_user_to_preprocess_prepare_sh(tmp_path):
    from fairseq_clear.tasks.contrastive import TaskConfigError, load_dictionary

    with pytest.raises(TaskConfigError) as info:
        load_dictionary(str(tmp_path))
    assert "clear-prepare" in str(info.value) and "prepare.sh" not in str(info.value)
    offenders = [str(p.relative_to(REPO)) for p in (REPO / "fairseq_clear").rglob("*.py")
                 if "preprocess/prepare.sh" in p.read_text(encoding="utf-8")
                 and re.search(r"(Error|raise|f\").*preprocess/prepare\.sh", p.read_text(encoding="utf-8"))]
    assert offenders == []


def test_progress_bar_counts_the_updates_max_update_leaves(monkeypatch):
    """fairseq's tqdm bar counts the epoch's updates; a run that --max-update ends earlier counts to it."""
    from fairseq.data import iterators
    from fairseq.logging import metrics, progress_bar
    from omegaconf import OmegaConf

    from fairseq_clear.fairseq_fixes import scope

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    cfg = OmegaConf.create({"optimization": {"max_update": 5}})

    def bar(**kw):
        itr = iterators.GroupedIterator(iterators.CountingIterator(list(range(40))), 2)  # 20 updates
        return progress_bar.progress_bar(itr, log_format="tqdm", epoch=1, **kw)

    metrics.reset()
    assert bar().tqdm.total == 20  # outside a fairseq-clear run: fairseq's
    with scope.entered(cfg):
        assert bar().tqdm.total == 5
        metrics.log_scalar("num_updates", 3, weight=0)  # as the trainer logs it (a resumed run)
        assert bar().tqdm.total == 2
        assert bar(prefix="valid on 'valid' subset").tqdm.total == 20  # validation: fairseq's
    metrics.reset()
