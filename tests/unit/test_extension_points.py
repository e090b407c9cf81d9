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
            from fairseq_clear.export.hf_tokenizers import bert_row_tokenizer

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
