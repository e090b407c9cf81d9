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

MODES = {"clear": CLEAR, "simcse": SIMCSE, "declutr": DECLUTR, "clsr": CLSR}

#: the options each part resolves, and how "not given" reads for those that cannot default to
#: None (fairseq's generation config shares --temperature and cannot take None: NaN there)
TASK_OPTIONS = {"mlm": lambda v: v in (None, "auto"), "batch_composition": lambda v: v in (None, "auto")}
MODEL_OPTIONS = {"sentence_pooling": None, "projection_layers": None, "projection_output_activation_fn": None}
CRITERION_OPTIONS = {"temperature": lambda v: v is None or v != v, "loss_form": lambda v: v in (None, "paper")}


def fill(target, options: dict, mode: str, what: str) -> dict:
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
        logger.info("%s: %s's published values for the options not given: %s", what, mode,
                    ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in applied.items()))
    return applied
