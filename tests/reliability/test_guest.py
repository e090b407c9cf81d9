"""The plugin is a guest in fairseq: with it loaded, fairseq's own tasks behave as without it.

The fixes of fairseq_clear/fairseq_fixes act only inside a fairseq-clear run (scope.py);
these tests run stock fairseq tasks through the real CLIs with ``--user-dir``, and check
the scope, the version guards and the fixes that act in it.
"""

import os
import re
import signal
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import fairseq_clear  # noqa: F401
from fairseq_clear.checkpoint_safety import plugin_names, safe_load
from fairseq_clear.fairseq_fixes import _patching, _version, install, modules, scope, uninstall
from helpers import EXCLUSIVE, USER_DIR, bin_path, run_cli, synthetic_sentences

LM = ["--task", "language_modeling", "--arch", "transformer_lm", "--decoder-layers", "1",
      "--decoder-embed-dim", "32", "--decoder-ffn-embed-dim", "64", "--decoder-attention-heads", "2",
      "--tokens-per-sample", "32", "--batch-size", "8", "--optimizer", "adam", "--lr", "1e-3", "--cpu",
      "--num-workers", "0", "--log-format", "simple", "--log-interval", "1", "--disable-validation",
      "--no-epoch-checkpoints", "--seed", "1"]


def _train(*args, check=True):
    return run_cli([bin_path("fairseq-train"), *args], check=check)


def test_plugin_names_come_from_fairseqs_registries():
    names = plugin_names()
    assert {"clear", "declutr", "contrastive_pairs"} <= names["task"]
    assert {"clear", "multitask"} <= names["criterion"]
    assert not names["criterion"] & {"masked_lm", "cross_entropy", "sentence_prediction"}
    assert {"clear_roberta", "clear_roberta_base", "clear_roberta_tiny"} <= names["model"]
    assert not names["task"] & {"translation", "language_modeling", "masked_lm", "sentence_prediction"}
    assert not names["model"] & {"transformer_lm", "roberta_base", "transformer"}


def test_what_the_plugin_replaces_in_fairseq_is_this_list():
    """Each of these starts with ``if not scope.active()``: fairseq's own function otherwise
    (the behaviour is checked by the stock runs below and by fairseq's own tests)."""
    assert not scope.active()
    assert _patching.replaced() == sorted([
        "fairseq.checkpoint_utils.PathManager", "fairseq.checkpoint_utils.load_checkpoint",
        "fairseq.checkpoint_utils.load_checkpoint_to_cpu", "fairseq.checkpoint_utils.torch_persistent_save",
        "fairseq.checkpoint_utils.verify_checkpoint_directory", "fairseq.distributed.utils.broadcast_object",
        "fairseq.distributed.utils.call_main",
        "fairseq.logging.progress_bar.progress_bar",
        "fairseq.models.distributed_fairseq_model.DistributedDataParallel",
        "fairseq.models.distributed_fairseq_model.DistributedTimeoutWrapper",
        "fairseq.nan_detector.NanDetector.add_hooks",
        "fairseq.optim.fp16_optimizer._FP16OptimizerMixin.load_state_dict",
        "fairseq.optim.fp16_optimizer._FP16OptimizerMixin.state_dict", "fairseq.trainer.Trainer.load_checkpoint",
        "fairseq.trainer.Trainer.train_step",
        "fairseq_cli.train.convert_namespace_to_omegaconf",
    ])


def test_language_model_resumes_its_own_checkpoint(tiny_data, tmp_path):
    save = tmp_path / "lm"
    args = [tiny_data, "--user-dir", USER_DIR, *LM, "--save-dir", save]
    _train(*args, "--max-update", "3")
    out = _train(*args, "--max-update", "5").stdout
    assert re.search(r"Loaded checkpoint \S+checkpoint_last\.pt \(epoch \d+ @ 3 updates\)", out), out[-3000:]
    assert "num_updates 5" in out
    state = safe_load(save / "checkpoint_last.pt")
    assert state["optimizer_history"][-1]["num_updates"] == 5
    # nothing of the plugin's in a stock run: no lock file, no extra optimizer state
    assert sorted(os.listdir(save)) == ["checkpoint_last.pt"]
    assert "fp32_master_params" not in state["last_optimizer_state"]


def test_a_plugin_run_is_in_scope_and_a_stock_run_is_not(tiny_data, tmp_path):
    """The scope follows the config: clear's save dir holds the plugin's lock, the LM's does not."""
    from helpers import train_args

    run_cli(train_args(tiny_data, tmp_path / "clear", max_update=1))
    assert ".fairseq_clear.lock" in os.listdir(tmp_path / "clear")
    _train(tiny_data, "--user-dir", USER_DIR, *LM, "--save-dir", tmp_path / "lm", "--max-update", "1")
    assert ".fairseq_clear.lock" not in os.listdir(tmp_path / "lm")


def _translation_data(tmp_path):
    src = synthetic_sentences(120, seed=3)
    raw = tmp_path / "raw"
    raw.mkdir()
    for split, lines in (("train", src[:100]), ("valid", src[100:])):
        (raw / f"{split}.src").write_text("\n".join(lines) + "\n")
        (raw / f"{split}.tgt").write_text("\n".join(" ".join(reversed(s.split())) for s in lines) + "\n")
    data = tmp_path / "bin"
    run_cli([bin_path("fairseq-preprocess"), "--source-lang", "src", "--target-lang", "tgt",
             "--trainpref", raw / "train", "--validpref", raw / "valid", "--destdir", data, "--workers", "1"])
    return data


def _stock_fairseq(module):
    """A fairseq console script's module run with only torch's allow-list of fairseq's plain-data
    classes, the plugin not imported (tests/fairseq_suite/plugin_allowlist.py)."""
    suite = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fairseq_suite")
    return [sys.executable, "-c", f"import runpy, sys; sys.path.insert(0, {suite!r}); import plugin_allowlist; "
            f"sys.argv[0] = {module!r}; runpy.run_module({module!r}, run_name='__main__')"]


def test_generate_loads_a_translation_model_with_the_plugin(tmp_path):
    data = _translation_data(tmp_path)
    save = tmp_path / "mt"
    _train(data, "--user-dir", USER_DIR, "--task", "translation", "--arch", "transformer",
           "--encoder-layers", "1", "--decoder-layers", "1", "--encoder-embed-dim", "32",
           "--decoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64",
           "--encoder-attention-heads", "2", "--decoder-attention-heads", "2", "--optimizer", "adam",
           "--lr", "1e-3", "--batch-size", "16", "--max-update", "3", "--cpu", "--num-workers", "0",
           "--save-dir", save, "--no-epoch-checkpoints", "--disable-validation", "--seed", "1")
    outputs = []
    generate = ["--path", save / "checkpoint_last.pt", "--gen-subset", "valid", "--beam", "2", "--max-len-b", "20",
                "--batch-size", "8", "--cpu"]
    for plugin in ([], ["--user-dir", USER_DIR]):
        # without the plugin: fairseq with only torch's allow-list, which it needs on torch >= 2.6
        command = [bin_path("fairseq-generate")] if plugin else _stock_fairseq("fairseq_cli.generate")
        out = run_cli([*command, data, *plugin, *generate]).stdout
        outputs.append([line for line in out.splitlines() if line.startswith(("H-", "D-"))])
    assert sum(line.startswith("H-") for line in outputs[0]) >= 10  # hypotheses for the valid sentences
    assert outputs[0] == outputs[1]


# --- the NaN report -------------------------------------------------------------------------

def _inf_checkpoint(src, dst):
    state = safe_load(src)
    key = next(k for k in state["model"] if k.endswith("embed_tokens.weight"))
    state["model"][key][5] = float("inf")
    torch.save(state, dst)


def _nan_reports(out):
    return [re.sub(r"^.*\| ", "", line) for line in out.splitlines() if "detected in output of" in line]


def test_nan_report_of_a_stock_language_model_is_fairseqs(tiny_data, tmp_path):
    """A transformer_lm whose weights turn inf: fairseq's report and FloatingPointError, with or
    without the plugin (a fix that moved every model to full backward hooks broke this)."""
    _train(tiny_data, *LM, "--save-dir", tmp_path / "good", "--max-update", "1")
    _inf_checkpoint(tmp_path / "good" / "checkpoint_last.pt", tmp_path / "inf.pt")
    runs = []
    for plugin in ([], ["--user-dir", USER_DIR]):
        proc = _train(tiny_data, *plugin, *LM, "--save-dir", tmp_path / f"run{len(runs)}", "--max-update", "3",
                      "--restore-file", tmp_path / "inf.pt", "--reset-optimizer", check=False)
        runs.append(proc)
    for proc in runs:
        assert proc.returncode != 0
        assert "FloatingPointError: gradients are Nan/Inf" in proc.stdout, proc.stdout[-3000:]
        assert _nan_reports(proc.stdout), proc.stdout[-3000:]
        assert "BackwardHookFunction" not in proc.stdout
    assert _nan_reports(runs[0].stdout) == _nan_reports(runs[1].stdout)


ARCHS = {
    "transformer": ("translation", ["--encoder-layers", "1", "--decoder-layers", "1", "--encoder-embed-dim", "16",
                                    "--decoder-embed-dim", "16", "--encoder-ffn-embed-dim", "32",
                                    "--decoder-ffn-embed-dim", "32", "--encoder-attention-heads", "2",
                                    "--decoder-attention-heads", "2"]),
    "fconv": ("translation", ["--encoder-embed-dim", "16", "--decoder-embed-dim", "16",
                              "--encoder-layers", "[(16, 3)]", "--decoder-layers", "[(16, 3)]",
                              "--decoder-out-embed-dim", "16"]),
    "lstm": ("translation", ["--encoder-embed-dim", "16", "--decoder-embed-dim", "16",
                             "--encoder-hidden-size", "16", "--decoder-hidden-size", "16",
                             "--decoder-out-embed-dim", "16"]),
    "transformer_lm": ("language_modeling", ["--decoder-layers", "1", "--decoder-embed-dim", "16",
                                             "--decoder-ffn-embed-dim", "32", "--decoder-attention-heads", "2"]),
    "roberta_base": ("masked_lm", ["--encoder-layers", "1", "--encoder-embed-dim", "16",
                                   "--encoder-ffn-embed-dim", "32", "--encoder-attention-heads", "2"]),
    "clear_roberta_tiny": ("clear", []),
}


def _model(arch, tiny_data, translation_data):
    from fairseq import options, tasks

    task_name, extra = ARCHS[arch]
    data = translation_data if task_name == "translation" else tiny_data
    parser = options.get_training_parser()
    length = [] if task_name == "translation" else ["--tokens-per-sample", "32"]
    args = options.parse_args_and_arch(parser, [str(data), "--task", task_name, "--arch", arch,
                                                "--user-dir", USER_DIR, *length, *extra])
    task = tasks.setup_task(args)
    model = task.build_model(args)
    tokens = torch.randint(4, 20, (2, 7))
    tokens[:, 1] = 5  # the embedding row the "weights" case makes inf
    if task_name == "translation":
        return model, lambda: model(tokens, torch.tensor([7, 7]), tokens)[0]
    return model, lambda: model(tokens)[0]


@pytest.fixture(scope="module")
def translation_data(tmp_path_factory):
    return _translation_data(tmp_path_factory.mktemp("mt"))


@pytest.mark.parametrize("arch", sorted(ARCHS))
@pytest.mark.parametrize("where", ["weights", "loss"])
def test_nan_detector_in_a_plugin_run_reports_for_every_model(arch, where, tiny_data, translation_data, caplog):
    """In the scope the detector's backward check rides on tensor hooks: a report, never a crash,
    for transformer, fconv, lstm, transformer_lm and RoBERTa; the same report as fairseq's own
    hooks wherever those work (under current torch they die with StopIteration on modules whose
    output holds no tensor at its top level: RoBERTa's encoder, and here transformer and fconv)."""
    from fairseq.nan_detector import NanDetector

    reports = {}
    for in_scope in (False, True):
        torch.manual_seed(0)
        model, forward = _model(arch, tiny_data, translation_data)
        model.train()
        if where == "weights":
            with torch.no_grad():
                next(p for n, p in model.named_parameters() if "embed_tokens" in n)[5].fill_(float("inf"))
        caplog.clear()
        error = None
        with scope.entered() if in_scope else _nothing():
            try:
                with NanDetector(model):
                    out = forward()
                    loss = out.float().sum() * (float("nan") if where == "loss" else 1.0)
                    loss.backward()
            except Exception as e:  # fairseq's own hooks on RoBERTa's encoder
                error = e
        reports[in_scope] = ([r.getMessage() for r in caplog.records if "detected in output of" in r.getMessage()],
                             error)
    ours, error = reports[True]
    assert error is None and ours, (arch, where, reports)
    assert any(("backward" if where == "loss" else "forward") in r for r in ours), ours
    stock, stock_error = reports[False]
    if stock_error is not None:  # fairseq's old-style hooks on outputs without a tensor at the top
        assert isinstance(stock_error, StopIteration), stock_error  # the bug the fix exists for
    else:
        assert stock == ours


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# --- the heartbeat watchdog ---------------------------------------------------------------

_WATCHDOG = textwrap.dedent("""
    import contextlib, ctypes, signal, sys, time, torch
    import fairseq_clear
    from fairseq.models import distributed_fairseq_model as dfm
    from fairseq_clear.fairseq_fixes import heartbeat_timeout, scope
    heartbeat_timeout.HEARTBEAT_KILL_GRACE_S = 1.0
    mode, in_scope = sys.argv[1], sys.argv[2] == "scope"

    class Slow(torch.nn.Module):  # fairseq's test: a forward pass longer than the timeout
        def forward(self, x):
            time.sleep(3)
            return x

    with scope.entered() if in_scope else contextlib.nullcontext():
        module = dfm.DistributedTimeoutWrapper(Slow(), 1, signal.SIGINT)
        if mode == "handled":  # fairseq's test_timeout_killed, then the process carries on
            try:
                module(torch.rand(5))
            except KeyboardInterrupt:
                print("interrupted", flush=True)
            module.stop_timeout()
            time.sleep(3)
        else:  # blocked: inside a C call that does not return to Python (like a hung collective)
            module.module = torch.nn.Identity()
            module(torch.rand(5))
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            ctypes.CDLL(None).sleep(6)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    print("carried on", flush=True)
""")


@EXCLUSIVE
@pytest.mark.parametrize("in_scope", [False, True], ids=["stock-run", "plugin-run"])
def test_heartbeat_interrupt_that_was_handled_is_not_escalated(in_scope):
    """fairseq's test_timeout_killed scenario: the interrupt is handled and the process carries
    on and exits 0, with the plugin loaded, in a stock run and in a plugin run."""
    proc = subprocess.run([sys.executable, "-c", _WATCHDOG, "handled", "scope" if in_scope else "stock"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "interrupted" in proc.stdout and "carried on" in proc.stdout


@EXCLUSIVE
def test_heartbeat_kills_a_plugin_run_still_blocked_after_the_interrupt():
    proc = subprocess.run([sys.executable, "-c", _WATCHDOG, "blocked", "scope"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stdout + proc.stderr
    assert "still blocked" in proc.stderr and "carried on" not in proc.stdout
    # a stock run keeps fairseq's behaviour: the interrupt arrives once the C call returns, and
    # Python ends the process with it: by SIGINT, or with 128 + SIGINT when no thread can take the
    # signal any more (the main thread still blocks it, and fairseq's watchdog thread has ended:
    # which of the two depends on timing, see CPython's exit_sigint)
    proc = subprocess.run([sys.executable, "-c", _WATCHDOG, "blocked", "stock"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode in (-signal.SIGINT, 128 + signal.SIGINT), proc.stdout + proc.stderr
    assert "KeyboardInterrupt" in proc.stderr and "still blocked" not in proc.stderr, proc.stderr


# --- version guards -------------------------------------------------------------------------

@pytest.fixture
def pretend_fairseq(monkeypatch):
    """Install the fixes as if another fairseq release were installed; puts everything back."""

    def pretend(version):
        uninstall()
        _version.forget()
        monkeypatch.setattr(_version, "installed_fairseq_version", lambda: version)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            install()
        return [str(w.message) for w in caught]

    yield pretend
    uninstall()
    monkeypatch.undo()
    _version.forget()
    install()


def test_on_the_release_they_were_written_for_every_fix_is_installed(pretend_fairseq):
    assert pretend_fairseq(_version.installed_fairseq_version()) == []
    assert len(_patching.replaced()) == 16
    with scope.entered():
        assert scope.active()


def test_on_another_release_no_fix_is_installed_and_each_says_so(pretend_fairseq):
    messages = pretend_fairseq("9.9.9")
    assert _patching.replaced() == []
    for module in modules():
        assert any(module.__name__ in m and "9.9.9" in m for m in messages), module.__name__
    # the safe loading of the plugin's runs is required: they refuse to start without it
    with pytest.raises(scope.FixUnavailableError, match="checkpoint_loading"):
        with scope.entered():
            pass
