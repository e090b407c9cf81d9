"""Each mode's published values, used for every option the command line leaves unset.

``--task declutr`` alone trains DeCLUTR as published, ``--task contrastive_pairs``
SimCSE-supervised (CLSR with ``--freeze-encoder``), ``--task clear`` CLEAR (and
SimCSE-unsupervised with ``--augmentations none``). A flag given explicitly always
wins. The model and the criterion ask the task (``task.paper_defaults(model_args)``)
when they are built, and log the values in force.
"""

import logging

logger = logging.getLogger(__name__)

#: CLEAR (Wu et al. 2020): [CLS], SimCLR's 2-layer head, τ from SimCLR (CLEAR does not state it)
CLEAR = {"sentence_pooling": "cls", "projection_layers": 2, "projection_output_activation_fn": "linear",
         "temperature": 0.1, "loss_form": "nt-xent"}
#: SimCSE (Gao et al. 2021): [CLS] with a dense+tanh MLP in training, τ 0.05, its own loss
SIMCSE = {"sentence_pooling": "cls", "projection_layers": 1, "projection_output_activation_fn": "tanh",
          "temperature": 0.05, "loss_form": "simcse"}
#: DeCLUTR (Giorgi et al. 2021): mean pooling, no projection head, τ 0.05
DECLUTR = {"sentence_pooling": "mean", "projection_layers": 0, "projection_output_activation_fn": "linear",
           "temperature": 0.05, "loss_form": "nt-xent"}
#: CLSR (003): mean pooling over a frozen encoder, the MLP e and a linear h, τ 0.1
CLSR = {"sentence_pooling": "mean", "projection_layers": 1, "projection_output_activation_fn": "linear",
        "temperature": 0.1, "loss_form": "nt-xent"}

MODES = {"clear": CLEAR, "simcse": SIMCSE, "declutr": DECLUTR, "clsr": CLSR}


def task_mode(task, model_args=None) -> str:
    """The task's mode (a key of MODES); CLEAR for a task that names none (e.g. sentence_prediction)."""
    mode = getattr(task, "paper_mode", None)
    return mode(model_args) if callable(mode) else "clear"


def fill(target, keys, task, what: str, model_args=None, unset=None) -> dict:
    """Set each of ``keys`` that is unset on ``target`` (a Namespace or config) to the task's paper value.

    Unset means None, or ``unset[key](value)`` is true, for options that cannot default to None.
    """
    contrastive = callable(getattr(task, "paper_mode", None))
    mode = task_mode(task, model_args if model_args is not None else target)
    defaults = MODES[mode]
    applied = {}
    for key in keys:
        value = getattr(target, key, None)
        if value is None or (unset is not None and key in unset and unset[key](value)):
            setattr(target, key, defaults[key])
            applied[key] = defaults[key]
    if applied:
        # a task that names no paper (masked_lm of an import, sentence_prediction) trains no
        # contrastive head: the values only fill the config, and saying "clear's" there misleads
        (logger.info if contrastive else logger.debug)(
            "%s: %s's published values for the options not given: %s", what, mode,
            ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in applied.items()))
    return applied
