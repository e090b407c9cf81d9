"""docs/design.md's "Where a change goes", checked: a new task is one file in tasks/, a new
tokenizer one class, and nothing else needs an edit (the lists of accepted names, the model
card, the tokenizer record and detection, the Hugging Face export derive from them)."""

import importlib.util
import itertools
import pkgutil
import sys
import textwrap

import numpy as np
import pytest

import fairseq_clear
from fairseq.tasks import TASK_CLASS_NAMES, TASK_DATACLASS_REGISTRY, TASK_REGISTRY
from fairseq_clear import checkpoint_safety, tasks, vocabulary
from fairseq_clear.fairseq_fixes import scope

_ids = itertools.count()

TOY_TASK = '''
"""A toy task: what a new task file in fairseq_clear/tasks/ holds."""
from dataclasses import dataclass, field

from fairseq.tasks import register_task

from fairseq_clear.tasks.contrastive import ContrastiveConfig, ContrastiveTask


@dataclass
class ToyConfig(ContrastiveConfig):
    toy_rate: float = field(default=0.5, metadata={{"help": "toy: a rate"}})
    toy_width: int = field(default=8, metadata={{"help": "toy: a size", "bounds": (1, 64)}})


@register_task("{name}", dataclass=ToyConfig)
class {cls}(ContrastiveTask):
    name = "{name}"
    config_class = ToyConfig

    @classmethod
    def model_card_training(cls, task_cfg, model_args):
        return f"the toy objective at rate {{task_cfg.get('toy_rate')}}"
'''


@pytest.fixture
def toy_task(tmp_path):
    """A task file loaded as a module of fairseq_clear.tasks (registered in fairseq as a file in
    tasks/ is), unregistered afterwards."""
    n = next(_ids)
    name, cls, module = f"toy_task_{n}", f"ToyTask{n}", f"{tasks.__name__}.toy_task_{n}"
    path = tmp_path / f"toy_task_{n}.py"
    path.write_text(textwrap.dedent(TOY_TASK.format(name=name, cls=cls)), encoding="utf-8")
    before = _checkpoint(name)
    with pytest.raises(checkpoint_safety.UnsupportedCheckpointError):
        checkpoint_safety.check_checkpoint_config(before, "before.pt")  # not registered yet
    spec = importlib.util.spec_from_file_location(module, path)
    sys.modules[module] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules[module])
    try:
        yield name
    finally:
        del sys.modules[module]
        TASK_REGISTRY.pop(name, None)
        TASK_DATACLASS_REGISTRY.pop(name, None)
        TASK_CLASS_NAMES.discard(cls)


def _checkpoint(task):
    return {"cfg": {"model": {"_name": "clear_roberta", "arch": "clear_roberta_tiny"},
                    "task": {"_name": task, "toy_rate": 0.25}}, "model": {}}


def test_a_new_tasks_bounds_are_checked_in_its_checkpoints_and_at_start_up(toy_task):
    """A size or rate is bounded where the option is written (``bounds`` in its field's metadata):
    the checkpoint loader and the start-up check read it there, no list names the task."""
    from omegaconf import OmegaConf

    from fairseq_clear.checkpoint_sizes import CheckpointSizeError, check_sizes
    from fairseq_clear.tasks.contrastive import TaskConfigError

    state = _checkpoint(toy_task)
    check_sizes(state, "fine.pt")
    state["cfg"]["task"]["toy_width"] = 10**9
    with pytest.raises(CheckpointSizeError, match="task option toy_width is 1000000000: outside 1..64"):
        check_sizes(state, "bomb.pt")
    cfg = OmegaConf.structured(TASK_DATACLASS_REGISTRY[toy_task])
    cfg.toy_width = 0
    with pytest.raises(TaskConfigError, match="--toy-width 0: outside 1..64"):
        TASK_REGISTRY[toy_task](cfg)  # what setup_task builds, refused before it reads any data


def test_a_new_task_file_is_accepted_everywhere(toy_task, tmp_path):
    import argparse

    import torch

    from fairseq_clear.export.model_card import method

    state = _checkpoint(toy_task)
    assert toy_task in checkpoint_safety.accepted_tasks()
    checkpoint_safety.check_checkpoint_config(state, "toy.pt")  # resume and the hub load it
    path = tmp_path / "toy.pt"
    torch.save(state, path)
    loaded = checkpoint_safety.checked(lambda p: checkpoint_safety.safe_load(p), str(path))
    assert loaded["cfg"]["task"]["_name"] == toy_task
    assert scope.names_plugin(state["cfg"])  # the fixes act in its runs
    assert method({"_name": toy_task, "toy_rate": 0.25}, argparse.Namespace()) == "the toy objective at rate 0.25"


def test_every_file_in_tasks_is_imported():
    found = {info.name for info in pkgutil.iter_modules(tasks.__path__) if not info.name.startswith("_")}
    assert {"clear", "declutr", "contrastive_pairs"} <= found
    assert all(f"{tasks.__name__}.{name}" in sys.modules for name in found)


def test_the_accepted_names_are_the_registered_ones():
    """What the lists held by hand before: derived, the same."""
    assert checkpoint_safety.accepted_tasks() == {"clear", "declutr", "contrastive_pairs", "multitask", "masked_lm",
                                                  "sentence_prediction"}
    assert checkpoint_safety.stock_roberta_names() == {"roberta", "roberta_base", "roberta_large",
                                                       "roberta_prenorm", "xlm", "xlmr"}
    assert checkpoint_safety.accepted_model_names() == checkpoint_safety.stock_roberta_names() | {
        "clear_roberta", "clear_roberta_base", "clear_roberta_large", "clear_roberta_small", "clear_roberta_tiny"}
    assert checkpoint_safety.accepted_bpe() == {"sentencepiece", "gpt2", "bert"}
    # RobertaModel subclasses that load as something else than the hub builds stay out
    assert not checkpoint_safety.accepted_model_names() & {"model_parallel_roberta", "xmod_base", "camembert"}


# ---- a new tokenizer: one class -------------------------------------------------------

WORDS = ["the", "cat", "sees", "a", "ball", "dog", "runs"]


def _toy_tokenizer_class():
    class ToyWordTokenizer(vocabulary.Tokenizer):
        """Whole words from words.txt (one a line); a word not in it is [UNK]."""

        kind = "toy-words"
        looks_for = "words.txt (toy)"
        hf_architecture = "bert"
        hf_specials = vocabulary.BERT_SPECIALS

        def __init__(self, words_txt):
            self.files = {"words": words_txt}
            with open(words_txt, encoding="utf-8") as f:
                self._symbols = ["[UNK]"] + [line.strip() for line in f]

        def encode_ids(self, sentences):
            index = {s: i for i, s in enumerate(self._symbols)}
            return [[index.get(w, 0) for w in s.split()] for s in sentences]

        def symbols(self):
            return self._symbols

        def unknown_ids(self):
            return [0]

        def is_word_start(self, symbol):
            return True

        def fairseq_bpe(self):
            return {"bpe": self.kind}

        @classmethod
        def from_files(cls, files, options):
            return cls(files["words"])

        @classmethod
        def find_in(cls, directory):
            import os

            path = os.path.join(directory, "words.txt")
            return cls(path) if os.path.isfile(path) else None

        def hf_tokenizer(self, dictionary, max_positions, work_dir):
            from fairseq_clear.hf_tokenizers import bert_row_tokenizer

            return bert_row_tokenizer(self.hf_row_tokens(dictionary), False, max_positions, work_dir)

    return ToyWordTokenizer


@pytest.fixture
def toy_tokenizer():
    cls = _toy_tokenizer_class()
    try:
        yield cls
    finally:
        vocabulary.TOKENIZERS.pop(cls.kind, None)


def test_a_new_tokenizer_class_is_found_recorded_accepted_and_exported(toy_tokenizer, tmp_path):
    from fairseq.data import Dictionary

    from fairseq_clear.models.hub_interface import find_tokenizer

    (tmp_path / "words.txt").write_text("\n".join(WORDS) + "\n", encoding="utf-8")
    found = vocabulary.detect(str(tmp_path))
    assert type(found) is toy_tokenizer
    assert "words.txt (toy)" in vocabulary.looked_for()
    dictionary = Dictionary()
    for w in WORDS:
        dictionary.add_symbol(w)
    dictionary.add_symbol(vocabulary.MASK_SYMBOL)
    dictionary.save(str(tmp_path / "dict.txt"))

    # its record: written, read back, copied
    copy = tmp_path / "copy"
    copy.mkdir()
    copied = vocabulary.copy_to(found, str(copy), str(tmp_path / "dict.txt"))
    assert type(copied) is toy_tokenizer and vocabulary.read_record(str(copy))["kind"] == "toy-words"
    assert type(vocabulary.detect(str(copy))) is toy_tokenizer
    # the hub takes it by its kind, and a checkpoint may name it as its bpe
    assert type(find_tokenizer("toy-words", str(tmp_path), str(tmp_path), {})) is toy_tokenizer
    assert "toy-words" in checkpoint_safety.accepted_bpe()

    # the export's tokenizer numbers tokens as fairseq does
    encoder = vocabulary.DictionaryEncoder(found, dictionary)
    work = tmp_path / "hf"
    work.mkdir()
    found.hf_check(dictionary)
    hf = found.hf_tokenizer(dictionary, 64, str(work))
    for sentence in ["the cat sees a ball", "a dog runs", "the unicorn runs"]:
        assert hf(sentence)["input_ids"] == encoder.encode([sentence])[0].tolist(), sentence
    assert hf.mask_token_id == dictionary.index(vocabulary.MASK_SYMBOL)


def test_the_export_asks_the_tokenizer_class():
    """No tokenizer kind is named in the export's code: the classes carry their layout."""
    import inspect

    from fairseq_clear.export import hf

    source = inspect.getsource(hf)
    assert "kind ==" not in source and ".kind" not in source and "kind in" not in source


def test_a_tokenizer_without_an_export_is_refused_by_name(toy_tokenizer, tmp_path):
    from fairseq_clear.export.errors import ExportError

    (tmp_path / "words.txt").write_text("the\n", encoding="utf-8")

    class NoExport(toy_tokenizer):
        kind = "toy-no-export"
        hf_architecture = ""

    try:
        with pytest.raises(ExportError, match="toy-no-export tokenizer .* has no Hugging Face export"):
            NoExport(str(tmp_path / "words.txt")).hf_check(None)
    finally:
        vocabulary.TOKENIZERS.pop("toy-no-export", None)


def test_the_augmentation_rates_are_declared_once():
    """--task clear's rate options are AugmentationParams' fields (help text and paper value)."""
    import dataclasses

    from fairseq_clear import augmentations as aug
    from fairseq_clear.tasks.clear import ClearConfig, augmentation_params

    rates = {f.name: f for f in dataclasses.fields(aug.AugmentationParams)}
    options = {f.name: f for f in dataclasses.fields(ClearConfig)}
    for name, f in rates.items():
        assert options[name].default == f.default and options[name].metadata["help"] == f.metadata["help"]
    cfg = ClearConfig(del_word_rate=0.4, reorder_pairs=3)
    assert augmentation_params(cfg) == aug.AugmentationParams(del_word_rate=0.4, reorder_pairs=3)
    assert np.isclose(aug.AugmentationParams().del_word_rate, 0.7)  # the paper's
    assert fairseq_clear.__version__


# ---- a new augmentation: one entry of BUILDERS (+ DELETIONS when it writes [DEL]) ------------------

def test_a_new_deleting_augmentation_is_driven_by_deletions_alone(monkeypatch):
    """A toy deletion that writes runs of [DEL] and merges nothing itself: registered in BUILDERS and
    named in DELETIONS, it is an --augmentations name, needs [DEL] (the task adds it), and its views
    (alone, composed, in a mixture) hold no two [DEL]s in a row."""
    from types import SimpleNamespace

    from fairseq_clear import augmentations as aug
    from fairseq_clear.tasks.clear import ClearTask

    def toy_deletion(params, del_idx, synonym_index):
        return lambda t, r: np.where(np.arange(len(t)) < len(t) // 2, del_idx, t)  # the first half, unmerged

    monkeypatch.setitem(aug.BUILDERS, "toy-del", toy_deletion)
    monkeypatch.setattr(aug, "DELETIONS", aug.DELETIONS + ("toy-del",))
    params, DEL = aug.AugmentationParams(), 99
    assert aug.parse_augmentations("toy-del,reorder") == ["toy-del", "reorder"]
    with pytest.raises(aug.AugmentationConfigError, match=r"'toy-del' needs the \[DEL\] symbol"):
        aug.build_augmentation(["toy-del"], params, None)
    task = SimpleNamespace(cfg=SimpleNamespace(mlm_only=False, augmentation_mix=""), augmentation_names=["toy-del"])
    assert ClearTask.uses_del_symbol(task)  # the task adds [DEL] to the dictionary
    tokens = np.arange(10, 30)
    rng = np.random.default_rng(0)
    views = [aug.build_augmentation(["toy-del"], params, DEL)(tokens, rng),
             aug.build_augmentation(["subs", "toy-del"], aug.AugmentationParams(subs_rate=0.0), DEL,
                                    aug.SynonymIndex(np.ones(200, bool), {}))(tokens, rng),
             aug.build_mixture([("toy-del", 1.0)], params, DEL)(tokens, rng)]
    for view in views:
        assert view.tolist() == [DEL] + list(range(20, 30)), view  # ten [DEL]s merged into one


# ---- a new pooling: one entry of models/pooling.POOLINGS --------------------------------------------

def test_a_new_pooling_round_trips_through_the_export_and_the_import(monkeypatch, tmp_path):
    """A toy pooling registered in the one table (under sentence-transformers' 'max', whose own entry it
    replaces): a sentence-transformers model pooling with max imports as it, the export writes max and
    both key sets of its config, sentence-transformers and the model card's transformers-alone snippet
    give the hub's vectors, and the export imports back as the toy."""
    import json
    import re

    import torch
    from hf_standins import make_bert, saved_by_sentence_transformers
    from sentence_transformers import SentenceTransformer

    from fairseq_clear.export.from_hf import import_hf
    from fairseq_clear.export.hf import CHECK_SENTENCES, export
    from fairseq_clear.models import pooling
    from fairseq_clear.models.hub_interface import from_pretrained

    def toy(features, keep):
        return features.masked_fill(keep == 0, float("-inf")).amax(dim=1)

    monkeypatch.delitem(pooling.POOLINGS, "max")
    monkeypatch.setitem(pooling.POOLINGS, "toy", pooling.PoolingMode(
        "max", toy, "hidden.masked_fill(mask == 0, float('-inf')).amax(dim=1)"))
    source = saved_by_sentence_transformers(make_bert(tmp_path / "bert"), tmp_path / "st", "max", normalize=False)
    # the import's check compares with sentence-transformers' encode(): the toy computes its max
    assert import_hf(str(source), str(tmp_path / "imported"))["options"]["pretrained_pooling"] == "toy"
    hub = from_pretrained(str(tmp_path / "imported"), "model.pt", ".")
    assert hub.default_pooling == "toy"
    out = tmp_path / "export"
    export(hub, str(out), check_sentences=CHECK_SENTENCES)
    config = json.loads((out / "1_Pooling" / "config.json").read_text())
    assert config["pooling_mode"] == "max" and config["pooling_mode_max_tokens"] is True
    sentences = ["A man is playing a guitar.", "Someone plays an instrument on a big stage tonight."]
    theirs = SentenceTransformer(str(out), device="cpu").encode(sentences, convert_to_numpy=True)
    np.testing.assert_allclose(hub.embed(sentences), theirs, atol=1e-5)
    card = (out / "README.md").read_text()
    snippet = re.search(r"With transformers alone.*?```python\n(.*?)```", card, re.S).group(1)
    scope = {}
    exec(snippet.replace("PATH", str(out)).replace("['A man is playing a guitar.', 'Someone plays an "
                                                   "instrument.']", repr(sentences)), scope)
    assert "amax" in snippet
    np.testing.assert_allclose(scope["vector"].detach().numpy(), theirs, atol=1e-5)
    assert torch.is_tensor(scope["vector"])
    assert import_hf(str(out), str(tmp_path / "again"))["options"]["pretrained_pooling"] == "toy"


# ---- a new recipe mode: one entry of paper_defaults.CONTINUED ----------------------------------------

def test_a_new_recipe_mode_is_one_entry_of_the_table(monkeypatch, tmp_path, capsys):
    """A toy mode added to CONTINUED alone: continued.py gives its values and takes it as MODE, budget.py
    its epochs, its corpus's count and its frozen encoder's checkpoints, run.sh its data and recipe."""
    import json
    import re

    from helpers import REPO

    from fairseq_clear import budget, continued, paper_defaults

    run_sh = (REPO / "examples" / "pretrained" / "run.sh").read_text(encoding="utf-8")
    usage = re.search(r"^# MODE +(.*)$", run_sh, re.M).group(1)
    assert re.findall(r"[a-z][a-z-]+", usage.split("(")[0]) == list(paper_defaults.CONTINUED)  # its usage
    assert 'continued --recipe-of "$MODE"' in run_sh and 'case "$MODE"' not in run_sh  # it lists no mode

    toy = paper_defaults.RecipeMode("Toy 2026", {"lr": ("2e-05", "7e-06")}, ("2", "Toy: 2 epochs"), "pairs",
                                    "toy/train.sh", batch="24", frozen_encoder=True)
    monkeypatch.setitem(paper_defaults.CONTINUED, "toy", toy)
    # continued: the values for a pre-trained encoder of each size, the paper's batch on a GPU
    record = {"pretrained_kind": "encoder", "encoder_embed_dim": 1024}
    words, log = continued.options("toy", record, False, [], {})
    assert words[:4] == ["--lr", "7e-06", "--batch-size", "24"], words
    assert any("Toy 2026, continued training of a pre-trained encoder of large size" in line for line in log)
    assert continued.lr_warning("toy", "encoder", 768, 1e-3).startswith("--lr 0.001 is 50x what Toy 2026 uses")
    continued.main(["toy", "-", "--max-update", "10"])  # MODE is one of the table's
    # budget: its epochs over its corpus's examples (pairs), its checkpoints without Adam moments
    (tmp_path / "pairs.json").write_text(json.dumps({"splits": {"train": {"pairs_written": 40}}}))
    out, log, max_update = budget.plan("toy", str(tmp_path), "", 8, True, [], {})
    assert max_update == 10 and "2 epoch(s) (Toy: 2 epochs) x 5 updates of 8 over 40 pairs" in log[0], log
    log, error = budget.checkpoint_plan("toy", 1000, str(tmp_path), [], [], 0)
    assert not error and "Toy 2026's frozen encoder has no Adam moments" in log[0], log
    # run.sh: its corpus and recipe (python -m fairseq_clear.continued --recipe-of toy)
    assert continued.recipe_of("toy") == ["pairs", "toy/train.sh"]
    continued.main(["--recipe-of", "toy"])
    assert capsys.readouterr().out.splitlines()[-2:] == ["pairs", "toy/train.sh"]
    with pytest.raises(ValueError, match="MODE must be one of clear, declutr, simcse-unsup, simcse-sup, clsr, toy, "
                                         "got 'tyo'"):
        continued.recipe_of("tyo")


# ---- a new evaluation command: a line in setup.py, a thin main in cli/ through cli.command -----------

TOY_EVALUATION = '''
"""A toy evaluation command: its library (evaluation/) raises the package's error, its main calls it."""
from fairseq_clear.cli import command
from fairseq_clear.errors import FairseqClearError


class ToyScoresError(FairseqClearError, ValueError):
    """A line of the scores file is not a number."""


def mean_score(path):
    with open(path, encoding="utf-8") as f:
        values = []
        for number, line in enumerate(f, 1):
            try:
                values.append(float(line))
            except ValueError:
                raise ToyScoresError(f"{path}:{number}: '{line.strip()}' is not a score") from None
    return sum(values) / len(values)


def main(argv=None):
    print(f"mean {mean_score(argv[0]):.2f}")


wrapped = command(main)
'''


def _console_scripts():
    """{command: (module, function)} of setup.py's console_scripts."""
    import re

    from helpers import REPO

    setup = (REPO / "setup.py").read_text(encoding="utf-8")
    return {m.group(1): (m.group(2), m.group(3)) for m in re.finditer(r'"(clear-[a-z-]+) = ([\w.]+):(\w+)"', setup)}


def _design_commands():
    """The commands docs/design.md's layout row of cli/ names."""
    import re

    from helpers import REPO

    design = (REPO / "docs" / "design.md").read_text(encoding="utf-8")
    row = next(line for line in design.splitlines() if line.startswith("| `fairseq_clear/cli/`"))
    return set(re.findall(r"\bclear-[a-z]+(?:-[a-z]+)*", row))


def _not_thin(scripts):
    """The commands whose main is not in cli/ or not wrapped by cli.command (no one-line errors)."""
    import importlib

    from fairseq_clear.cli import command

    wrapper = command(lambda: None).__code__
    return sorted(name for name, (module, function) in scripts.items()
                  if not module.startswith("fairseq_clear.cli.")
                  or getattr(getattr(importlib.import_module(module), function), "__code__", None) is not wrapper)


def test_a_new_evaluation_command_is_a_setup_line_and_a_main_wrapped_in_cli(tmp_path, capsys):
    """What design.md promises of a command: setup.py installs it (the forked runner and the docs take
    it from there), its main is in cli/ through cli.command, design.md's layout names it; the checks
    catch a toy command that breaks each."""
    from fairseq_clear import cli

    scripts = _console_scripts()
    assert len(scripts) >= 15 and set(scripts) == _design_commands(), set(scripts) ^ _design_commands()
    assert _not_thin(scripts) == []
    n = next(_ids)
    module = f"{cli.__name__}.toy_eval_{n}"
    path = tmp_path / f"toy_eval_{n}.py"
    path.write_text(textwrap.dedent(TOY_EVALUATION), encoding="utf-8")
    spec = importlib.util.spec_from_file_location(module, path)
    sys.modules[module] = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(sys.modules[module])
        toy = {**scripts, "clear-eval-toy": (module, "wrapped")}
        assert _not_thin(toy) == [] and set(toy) - _design_commands() == {"clear-eval-toy"}  # not listed yet
        assert _not_thin({**scripts, "clear-eval-toy": (module, "main")}) == ["clear-eval-toy"]  # unwrapped
        scores = tmp_path / "scores.txt"
        scores.write_text("1.0\n3.0\n", encoding="utf-8")
        sys.modules[module].wrapped([str(scores)])
        assert capsys.readouterr().out == "mean 2.00\n"
        scores.write_text("1.0\nthree\n", encoding="utf-8")
        with pytest.raises(SystemExit) as end:
            sys.modules[module].wrapped([str(scores)])
        assert end.value.code == 2
        assert capsys.readouterr().err == f"error: {scores}:2: 'three' is not a score\n"
    finally:
        del sys.modules[module]


def test_where_a_change_goes_lists_each_kind_with_its_toy():
    """docs/design.md's "Where a change goes" names exactly the kinds of change checked here, each with
    its toy test (which exists)."""
    import re

    from helpers import REPO

    design = (REPO / "docs" / "design.md").read_text(encoding="utf-8")
    section = design.split("## Where a change goes\n", 1)[1].split("\n## ", 1)[0]
    bullets = [b for b in section.split("\n* ") if b.startswith("**")]
    kinds = ["A new task", "A new tokenizer", "A size or rate", "A new augmentation", "A new pooling",
             "A new recipe mode", "A new evaluation command"]
    assert [next((k for k in kinds if b[2:].startswith(k)), b[:40]) for b in bullets] == kinds
    for bullet in bullets:
        toys = re.findall(r"Toy: `(test_\w+)`", " ".join(bullet.split()))
        assert len(toys) == 1 and callable(globals().get(toys[0])), bullet[:60]
