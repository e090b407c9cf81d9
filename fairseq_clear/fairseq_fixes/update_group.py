"""Tell a fairseq-clear task how many micro-batches (``--update-freq``) make up the update.

fairseq's ``Trainer.train_step(samples)`` calls ``task.train_step`` once per micro-batch, and
no task hook learns which call is the last one of the update (the final group of an epoch can
be shorter than --update-freq). ``--accumulate-contrastive`` needs it: the contrastive loss over
all micro-batches is computed once, at the last. The trainer itself is unchanged; in a
fairseq-clear run (scope.py) a task that defines ``begin_update(n)`` hears ``n = len(samples)``
before the loop.
"""

from . import _patching, scope

#: the fairseq release this fix was written and tested against
WRITTEN_FOR = "0.12.3.1"


def install():
    from fairseq.trainer import Trainer

    def make(fairseq_train_step):
        def train_step(self, samples, raise_oom=False):
            begin = getattr(self.task, "begin_update", None) if scope.active() else None
            if begin is not None:
                begin(len(samples))
            return fairseq_train_step(self, samples, raise_oom)

        train_step.__wrapped__ = fairseq_train_step
        return train_step

    _patching.replace(Trainer, "train_step", make)
