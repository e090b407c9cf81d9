"""Each mode's published values: every option the command line leaves unset is resolved here.

``--task declutr`` alone trains DeCLUTR as published, ``--task contrastive_pairs``
SimCSE-supervised (CLSR with ``--freeze-encoder``), ``--task clear`` CLEAR (and
SimCSE-unsupervised with ``--augmentations none``). A flag given explicitly always wins.
The task resolves its options once, where fairseq builds each part: the task's own when it
is set up (``--mlm``, ``--batch-composition``), the model's in ``task.build_model`` and the
criterion's in ``task.build_criterion``; each logs the values it filled in and whose they are.
"""

import logging
from dataclasses import dataclass
from typing import Dict, Tuple

logger = logging.getLogger(__name__)

#: CLEAR (Wu et al. 2020): [CLS], SimCLR's 2-layer head, τ from SimCLR (CLEAR does not state it),
#: MLM on the sentence, batches of similar length (RoBERTa's fairseq recipe)
CLEAR = {"sentence_pooling": "cls", "projection_layers": 2, "projection_output_activation_fn": "linear",
         "temperature": 0.1, "loss_form": "nt-xent", "mlm": "on", "batch_composition": "length"}
#: SimCSE (Gao et al. 2021): [CLS] with a dense+tanh MLP in training, τ 0.05, its own loss,
#: no MLM in its main results, random batches
SIMCSE = {"sentence_pooling": "cls", "projection_layers": 1, "projection_output_activation_fn": "tanh",
          "temperature": 0.05, "loss_form": "simcse", "mlm": "off", "batch_composition": "random"}
#: DeCLUTR (Giorgi et al. 2021): mean pooling, no projection head, τ 0.05, MLM on the anchors
DECLUTR = {"sentence_pooling": "mean", "projection_layers": 0, "projection_output_activation_fn": "linear",
           "temperature": 0.05, "loss_form": "nt-xent", "mlm": "on", "batch_composition": "random"}
#: CLSR (003): mean pooling over a frozen encoder (which MLM could not train), the MLP e and a
#: linear h, τ 0.1
CLSR = {"sentence_pooling": "mean", "projection_layers": 1, "projection_output_activation_fn": "linear",
        "temperature": 0.1, "loss_form": "nt-xent", "mlm": "off", "batch_composition": "random"}

#: seed 004 (CS224N multi-task, §4.1, §5.3): SimCSE's objective on [CLS] through a 2-layer MLP
#: thrown away afterwards, τ 0.05, no MLM, random batches
MULTITASK = {"sentence_pooling": "cls", "projection_layers": 2, "projection_output_activation_fn": "linear",
             "temperature": 0.05, "loss_form": "simcse", "mlm": "off", "batch_composition": "random"}

MODES = {"clear": CLEAR, "simcse": SIMCSE, "declutr": DECLUTR, "clsr": CLSR, "multitask": MULTITASK}

#: seed 004's fine-tuning values (§5.3): the recipe's and the help strings' reference; fairseq's
#: own options (--lr, --batch-size, --max-epoch) keep fairseq's defaults, the recipe passes these
MULTITASK_TRAINING = {"lr": 1e-5, "batch_size": 16, "max_epoch": 10, "head_hidden_dim": 768,
                      "head_dropout": 0.3, "temperature": 0.05}


@dataclass(frozen=True)
class RecipeMode:
    """A recipe mode of examples/pretrained/run.sh (continuing a pre-trained encoder): all the
    recipes know of it. continued.py, budget.py and run.sh read these fields and list no mode."""

    #: whose values these are (named in each log line)
    paper: str
    #: {fairseq-train option: (value for a base-size encoder, for a large one)}
    values: Dict[str, Tuple[str, str]]
    #: (passes over the corpus, where that number comes from): budget.py's default of EPOCHS
    epochs: Tuple[str, str]
    #: its corpus, as run.sh prepares it and budget.py counts an epoch: "text" (clear-prepare;
    #: sentences), "lines" (one sentence a line; sentences), "documents" (blank-line separated;
    #: DeCLUTR's long enough documents), "pairs" (clear-prepare-pairs; pairs)
    data: str
    #: its recipe under examples/, run after the import and the data ("": run.sh's own, --task clear)
    recipe: str = ""
    #: the paper's batch size (GPU runs only: a CPU run keeps the recipe's CPU size), or ""
    batch: str = ""
    #: the encoder is frozen: a checkpoint holds no Adam moments of it (budget.checkpoint_plan)
    frozen_encoder: bool = False


#: the recipe modes, the one table of them (continued.py, budget.py, examples/pretrained/run.sh)
CONTINUED = {
    # CLEAR pre-trains from scratch; continuing an encoder, the recipe's 1e-5 (fine-tuning size)
    "clear": RecipeMode("CLEAR recipe", {"lr": ("1e-05", "1e-05"), "temperature": ("0.1", "0.1")},
                        ("1", "1 epoch, as SimCSE-unsup continues an encoder"), "text"),
    # DeCLUTR (Giorgi et al. 2021) continues DistilRoBERTa / RoBERTa-base with lr 5e-5, τ 0.05
    "declutr": RecipeMode("DeCLUTR", {"lr": ("5e-05", "5e-05"), "temperature": ("0.05", "0.05")},
                          ("1", "DeCLUTR: 1 epoch"), "documents", "declutr/train.sh", batch="16"),
    # SimCSE (Gao et al. 2021), Table D.1: unsup BERT-base 3e-5, BERT-large 1e-5; τ 0.05; no warm-up
    "simcse-unsup": RecipeMode("SimCSE", {"lr": ("3e-05", "1e-05"), "temperature": ("0.05", "0.05"),
                                          "warmup-updates": ("0", "0")},
                               ("1", "SimCSE: 1 epoch unsupervised"), "lines", "simcse/unsup.sh", batch="64"),
    # sup: BERT-base 5e-5, BERT-large 1e-5, batch 512
    "simcse-sup": RecipeMode("SimCSE", {"lr": ("5e-05", "1e-05"), "temperature": ("0.05", "0.05"),
                                        "warmup-updates": ("0", "0")},
                             ("3", "SimCSE: 3 epochs supervised"), "pairs", "simcse/sup.sh", batch="512"),
    # CLSR trains its heads over a frozen encoder: the recipe's own values hold
    "clsr": RecipeMode("CLSR", {}, ("2000", "CLSR: 2,000 epochs of its heads"), "pairs", "clsr/train.sh",
                       frozen_encoder=True),
}

#: the options each part resolves, and how "not given" reads for those that cannot default to
#: None (fairseq's generation config shares --temperature and cannot take None: NaN there)
TASK_OPTIONS = {"mlm": lambda v: v in (None, "auto"), "batch_composition": lambda v: v in (None, "auto")}
MODEL_OPTIONS = {"sentence_pooling": None, "projection_layers": None, "projection_output_activation_fn": None}
CRITERION_OPTIONS = {"temperature": lambda v: v is None or v != v, "loss_form": lambda v: v in (None, "paper")}


def fill(target, options: dict, mode: str, what: str, quiet: bool = False) -> dict:
    """Set each option of ``options`` that is unset on ``target`` (a Namespace or config) to
    ``mode``'s published value; returns what it set (and logs it once, naming the mode)."""
    from omegaconf import OmegaConf

    applied = {}
    for key, is_unset in options.items():
        value = getattr(target, key, None)
        if value is None or (is_unset is not None and is_unset(value)):
            applied[key] = MODES[mode][key]
    if applied:
        struct = OmegaConf.is_config(target) and OmegaConf.is_struct(target)
        if struct:
            OmegaConf.set_struct(target, False)
        for key, value in applied.items():
            setattr(target, key, value)
        if struct:
            OmegaConf.set_struct(target, True)
        # quiet: the fallback of a part built by a task that names no paper (masked_lm of an
        # import, sentence_prediction): the values only fill the config, and "clear's" would mislead
        (logger.debug if quiet else logger.info)(
            "%s: %s's published values for the options not given: %s", what, mode,
            ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in applied.items()))
    return applied
