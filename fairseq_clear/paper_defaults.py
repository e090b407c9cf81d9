"""Each mode's published values: every option the command line leaves unset is resolved here.

``--task declutr`` alone trains DeCLUTR as published, ``--task contrastive_pairs``
SimCSE-supervised (CLSR with ``--freeze-encoder``), ``--task clear`` CLEAR (and
SimCSE-unsupervised with ``--augmentations none``). A flag given explicitly always wins.
The task resolves its options once, where fairseq builds each part: the task's own when it
is set up (``--mlm``, ``--batch-composition``), the model's in ``task.build_model`` and the
criterion's in ``task.build_criterion``; each logs the values it filled in and whose they are.
"""

import logging

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

#: continuing a pre-trained encoder (the recipes, fairseq_clear/continued.py): recipe MODE ->
#: (paper, {fairseq-train option: (value for a base-size encoder, for a large one)})
CONTINUED = {
    # SimCSE (Gao et al. 2021), Table D.1: unsup BERT-base 3e-5, BERT-large 1e-5; τ 0.05; no warm-up
    "simcse-unsup": ("SimCSE", {"lr": ("3e-05", "1e-05"), "temperature": ("0.05", "0.05"),
                                "warmup-updates": ("0", "0")}),
    # sup: BERT-base 5e-5, BERT-large 1e-5, batch 512
    "simcse-sup": ("SimCSE", {"lr": ("5e-05", "1e-05"), "temperature": ("0.05", "0.05"),
                              "warmup-updates": ("0", "0")}),
    # DeCLUTR (Giorgi et al. 2021) continues DistilRoBERTa / RoBERTa-base with lr 5e-5, τ 0.05
    "declutr": ("DeCLUTR", {"lr": ("5e-05", "5e-05"), "temperature": ("0.05", "0.05")}),
    # CLEAR pre-trains from scratch; continuing an encoder, the recipe's 1e-5 (fine-tuning size)
    "clear": ("CLEAR recipe", {"lr": ("1e-05", "1e-05"), "temperature": ("0.1", "0.1")}),
    # CLSR trains its heads over a frozen encoder: the recipe's own values hold
    "clsr": ("CLSR", {}),
}
#: batch sizes of the papers (GPU runs only: a CPU run keeps the recipe's CPU size)
PAPER_BATCH = {"simcse-unsup": "64", "simcse-sup": "512", "declutr": "16"}

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
