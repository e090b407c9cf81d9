"""fairseq's progress bar (``--log-format tqdm``) counts to the end of the run, not of the epoch.

fairseq-train's training bar is ``tqdm`` over the epoch's iterator, so its total, and the ETA
tqdm derives from it, are the whole epoch's updates, also when ``--max-update`` ends the run
within the epoch (a continued-training recipe's run is usually a fraction of one epoch: its ETA
was many times the run's) and also after a resume inside the epoch (tqdm counts from 0 what the
iterator yields from its position). Here the total is what the bar will count: the updates left
in the epoch, or those ``--max-update`` leaves when fewer (the trainer's ``num_updates`` as it
logs it, in fairseq's ``default`` metrics). Validation bars and other formats are fairseq's.
Outside a fairseq-clear run (scope.py) the bar is fairseq's.
"""

from . import _patching, scope

#: the fairseq release this fix was written and tested against
WRITTEN_FOR = "0.12.3.1"


def updates_left(max_update: int) -> int:
    """``max_update`` less the updates done (fairseq's trainer logs ``num_updates`` as it sets it)."""
    from fairseq.logging import metrics

    meter = metrics.get_meter("default", "num_updates")
    done = int(meter.val) if meter is not None and getattr(meter, "val", None) is not None else 0
    return max(0, max_update - done)


def count_to_the_end(bar, iterator) -> None:
    """Set a training tqdm bar's total to the updates it will count (see the module's docstring)."""
    from fairseq.logging.progress_bar import TqdmProgressBar

    inner = bar
    while hasattr(inner, "wrapped_bar"):  # fairseq's aim / tensorboard / wandb / azureml wrappers
        inner = inner.wrapped_bar
    from omegaconf import OmegaConf

    cfg = scope.run_config()
    if not isinstance(inner, TqdmProgressBar) or not hasattr(iterator, "__len__"):
        return
    total = len(iterator) - getattr(iterator, "n", 0)
    max_update = OmegaConf.select(cfg, "optimization.max_update") if OmegaConf.is_config(cfg) else None
    if max_update and max_update > 0:
        total = min(total, updates_left(max_update))
    inner.tqdm.total = max(0, total)
    inner.tqdm.refresh()


def install():
    from fairseq.logging import progress_bar as module

    def make(fairseq_progress_bar):
        def progress_bar(iterator, *args, **kwargs):
            if not scope.active():
                return fairseq_progress_bar(iterator, *args, **kwargs)
            bar = fairseq_progress_bar(iterator, *args, **kwargs)
            # (log_format, log_interval, log_file, epoch, prefix, ...): the training bar has no prefix
            if kwargs.get("prefix", args[4] if len(args) > 4 else None) is None:
                count_to_the_end(bar, iterator)
            return bar

        return progress_bar

    _patching.replace(module, "progress_bar", make)
