"""Shared test utilities: paths, CLI runners, tiny binarized corpora."""

import os
import random
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO.parent / "shared" / "data"
USER_DIR = str(REPO / "fairseq_clear")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
#: tests that need both cores or real timing (torchrun pairs, the heartbeat, kill campaigns): under
#: pytest-xdist (make test) they all run on one worker, one at a time, never beside each other
EXCLUSIVE = pytest.mark.xdist_group("exclusive")


def shared(*parts) -> Path:
    """A path under ../shared/data; skips the test when absent (fails in CI, where it must exist)."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        message = f"needs {path} (the shared data folder beside the repository)"
        if IN_CI:
            pytest.fail(message + ", which CI must provide")
        pytest.skip(message)
    return path


def bin_path(name: str) -> str:
    """A console script of the running interpreter's environment (fairseq-train, clear-embed, ...)."""
    return str(Path(sys.executable).parent / name)


def run_cli(args, cwd=None, env=None, check=True, timeout=900, real=False):
    """Run a command as a user's shell would; on failure the assertion shows its output.

    This environment's console scripts (fairseq-*, clear-*) and ``python -m``/``python script.py``
    run in a child forked from an interpreter that has imported them already
    (harness/forked.py: same argv, environment, cwd, output and exit status as the real command,
    a fraction of the start-up); a shell recipe's commands do too, through PATH shims. ``real=True``
    starts a real process: for tests about processes (signals, kills, fresh-interpreter imports).
    """
    from harness import forked

    args = [str(a) for a in args]
    full_env = dict(os.environ)
    full_env.setdefault("OMP_NUM_THREADS", "1")
    full_env["PYTHONUNBUFFERED"] = "1"
    # scripts call `python`/`fairseq-preprocess` by name: resolve them in the running environment
    full_env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), full_env.get("PATH", "")])
    if env:
        full_env.update(env)
    if real or not forked.enabled(full_env):
        proc = subprocess.run(args, cwd=cwd, env=full_env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=timeout)
    else:
        if Path(args[0]).name in ("bash", "sh") or args[0].endswith(".sh"):
            full_env["PATH"] = os.pathsep.join([forked.shim_dir(full_env), full_env["PATH"]])
        proc = forked.run(args, cwd=cwd, env=full_env, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"command failed ({proc.returncode}): {' '.join(map(str, args))}\n{proc.stdout[-6000:]}"
        )
    return proc


def run_captured(args, env=None, cwd=None, timeout=600, memory_cap=None):
    """``subprocess.run(args, capture_output=True, text=True)`` with one torch thread, through the
    forked runner as run_cli: stdout and stderr apart. ``memory_cap``: the run's address-space
    limit in bytes (RLIMIT_AS, as a ``preexec_fn`` would set it)."""
    from harness import forked

    full_env = dict(os.environ, OMP_NUM_THREADS="1", **(env or {}))
    limits = {"RLIMIT_AS": (memory_cap, memory_cap)} if memory_cap else None
    return forked.run([str(a) for a in args], cwd=cwd, env=full_env, timeout=timeout,
                      stderr=subprocess.PIPE, limits=limits)


_SUBJECTS = "the cat|a dog|my friend|the old man|the teacher|a small child|the river|our team|the movie|this book".split("|")
_VERBS = "sees|likes|follows|finds|watches|builds|reads|makes|loves|moves".split("|")
_OBJECTS = "the ball|a red house|the quiet garden|an idea|the big city|a good film|the long road|a story|the morning|the market".split("|")
_TAILS = ["", " today", " again", " every day", " with care", " in the evening", " near the sea", " very quickly"]


def synthetic_sentences(n: int, seed: int = 0):
    """Deterministic English-like sentences for tests that must not depend on ../shared."""
    rng = random.Random(seed)
    return [
        f"{rng.choice(_SUBJECTS).capitalize()} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)}{rng.choice(_TAILS)}."
        for _ in range(n)
    ]


def write_dict_from_spm(model_file: str, dict_path: str):
    """dict.txt = the sentencepiece pieces in id order, then <mask> and [DEL] (see preprocess/)."""
    import sentencepiece as spm

    from fairseq_clear.vocabulary import APPENDED_SYMBOLS

    sp = spm.SentencePieceProcessor(model_file=model_file)
    with open(dict_path, "w", encoding="utf-8") as f:
        for i in range(sp.get_piece_size()):
            if sp.is_control(i) or sp.is_unknown(i):
                continue
            f.write(f"{sp.id_to_piece(i)} 1\n")
        f.writelines(f"{symbol} 1\n" for symbol in APPENDED_SYMBOLS)


def make_binarized(workdir, train, valid, vocab_size=200, test=None):
    """Train a small sentencepiece model and binarize ``train``/``valid`` with fairseq-preprocess.

    Returns the data directory (dict.txt, sentencepiece.model, {train,valid}.{bin,idx}).
    """
    import sentencepiece as spm

    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    raw = {"train": train, "valid": valid}
    if test is not None:
        raw["test"] = test
    for split, lines in raw.items():
        (workdir / f"{split}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(workdir / "train.txt"),
        model_prefix=str(workdir / "sentencepiece"),
        vocab_size=vocab_size,
        model_type="unigram",
        hard_vocab_limit=False,
        minloglevel=2,
    )
    sp = spm.SentencePieceProcessor(model_file=str(workdir / "sentencepiece.model"))
    for split, lines in raw.items():
        with open(workdir / f"{split}.spm", "w", encoding="utf-8") as f:
            for line in lines:
                f.write(" ".join(sp.encode(line, out_type=str)) + "\n")
    write_dict_from_spm(str(workdir / "sentencepiece.model"), str(workdir / "dict.txt"))
    dest = workdir / "bin"
    args = [
        bin_path("fairseq-preprocess"), "--only-source", "--srcdict", workdir / "dict.txt",
        "--trainpref", workdir / "train.spm", "--validpref", workdir / "valid.spm",
        "--destdir", dest, "--workers", "1",
    ]
    if test is not None:
        args += ["--testpref", workdir / "test.spm"]
    run_cli(args)
    (dest / "sentencepiece.model").write_bytes((workdir / "sentencepiece.model").read_bytes())
    return dest


CONFIG_DIR = REPO / "fairseq_clear" / "config"
#: the hydra section whose _name is each fairseq-train option
_NAMED = {"task": "--task", "criterion": "--criterion", "model": "--arch", "optimizer": "--optimizer",
          "lr_scheduler": "--lr-scheduler"}


def hydra_args(config, data, save_dir, *overrides):
    """A fairseq-hydra-train command line of one of the plugin's YAML recipes (config/pretraining)."""
    return [bin_path("fairseq-hydra-train"), "--config-dir", CONFIG_DIR / "pretraining", "--config-name", config,
            f"common.user_dir={USER_DIR}", f"task.data={data}", f"checkpoint.save_dir={save_dir}", *overrides]


def recipe_options(config) -> list:
    """The fairseq-train options that say what the YAML recipe ``config`` says: each value as its
    ``--option`` (``_name`` as --task, --arch, ...; lists comma-joined; true as a flag), leaving out
    the hydra section and the values the user supplies (``???``: data, user dir)."""
    from omegaconf import OmegaConf

    out = []
    for section, values in OmegaConf.to_container(OmegaConf.load(CONFIG_DIR / "pretraining" / f"{config}.yaml")).items():
        if section == "hydra":
            continue
        for key, value in values.items():
            if value == "???":
                continue
            if key == "_name":
                out += [_NAMED[section], str(value)]
            elif isinstance(value, bool):
                out += [f"--{key.replace('_', '-')}"] if value else []
            else:
                value = ",".join(map(str, value)) if isinstance(value, list) else str(value)
                out += [f"--{key.replace('_', '-')}", value]
    return out


def train_args(data, save_dir, *extra, max_update=20, batch_size=16, arch="clear_roberta_tiny",
               validate=False):
    """A fairseq-train command line for a tiny CPU run of the plugin (JSON logs, one per update)."""
    return [
        bin_path("fairseq-train"), data, "--user-dir", USER_DIR,
        "--task", "clear", "--criterion", "clear", "--arch", arch,
        "--tokens-per-sample", "64", "--batch-size", str(batch_size),
        "--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--lr", "1e-3",
        "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "5",
        "--max-update", str(max_update), "--log-format", "json", "--log-interval", "1",
        "--save-dir", save_dir, "--cpu", "--num-workers", "0", "--seed", "1",
        "--no-epoch-checkpoints",
        *([] if validate else ["--disable-validation"]),
        *extra,
    ]


def write_glue(root, rows_per_split=40, seed=0):
    """Tiny GLUE-format files (tests/e2e/test_glue.py, tests/reliability/test_recipe_refusals.py) for MRPC (BOM, header), CoLA (no header), STS-B (scores) and QQP (a bad line)."""
    rng = random.Random(seed)
    s = synthetic_sentences(200, seed=seed)
    for task in ("MRPC", "CoLA", "STS-B", "QQP"):
        (root / task).mkdir(parents=True)
    for split in ("train", "dev", "test"):
        n = rows_per_split
        mrpc = ["\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String"] + [
            f"{i % 2}\t{i}\t{i + 1}\t{s[i]}\t{s[i + 1]}" for i in range(n)]
        (root / "MRPC" / f"{split}.tsv").write_text("\n".join(mrpc) + "\n", encoding="utf-8")
        if split == "test":
            cola = ["index\tsentence"] + [f"{i}\t{s[i]}" for i in range(n)]
        else:
            cola = [f"src\t{i % 2}\t\t{s[i]}" for i in range(n)]
        (root / "CoLA" / f"{split}.tsv").write_text("\n".join(cola) + "\n", encoding="utf-8")
        sts = ["index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"]
        for i in range(n):
            same = i % 2 == 0
            b = s[i].replace(".", "!") if same else rng.choice(s)
            score = 4.0 + rng.random() if same else rng.random() * 2
            sts.append(f"{i}\tg\tf\t2012\t{i}\tnone\tnone\t{s[i]}\t{b}" + ("" if split == "test" else f"\t{score:.3f}"))
        (root / "STS-B" / f"{split}.tsv").write_text("\n".join(sts) + "\n", encoding="utf-8")
        qqp = ["id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate"] + [
            f"{i}\t1\t2\t{s[i]}\t{s[i + 1]}\t{i % 2}" for i in range(n)] + ["broken\tline"]
        if split == "test":
            qqp = ["id\tquestion1\tquestion2"] + [f"{i}\t{s[i]}\t{s[i + 1]}" for i in range(n)]
        (root / "QQP" / f"{split}.tsv").write_text("\n".join(qqp) + "\n", encoding="utf-8")
    return root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(args, nproc=2):
    """torchrun with ``nproc`` CPU workers on a free port (distributed tests of both tiers)."""
    return [bin_path("torchrun"), "--nproc_per_node", str(nproc), "--master_port", str(free_port()), *args]
