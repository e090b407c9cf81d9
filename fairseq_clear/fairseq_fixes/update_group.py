"""Tell the task how many micro-batches (``--update-freq``) make up the update.

fairseq's ``Trainer.train_step(samples)`` calls ``task.train_step`` once per
micro-batch, and neither the task nor the criterion learns which call is the last
one of the update (the final group of an epoch can be shorter than --update-freq).
``--accumulate-contrastive`` needs it: the contrastive loss over all micro-batches is
computed once, at the last. The trainer itself is unchanged; a task that defines
``begin_update(n)`` hears ``n = len(samples)`` before the loop.
"""

from ._version import check_version

#: the fairseq release this fix was written and tested against
WRITTEN_FOR = "0.12.3.1"


def patch_trainer():
    from fairseq import trainer

    cls = trainer.Trainer
    if getattr(cls, "_clear_update_group", False):
        return
    original = cls.train_step

    def train_step(self, samples, raise_oom=False):
        begin = getattr(self.task, "begin_update", None)
        if begin is not None:
            begin(len(samples))
        return original(self, samples, raise_oom)

    cls.train_step = train_step
    cls._clear_update_group = True


def apply():
    check_version(__name__, WRITTEN_FOR)
    patch_trainer()
