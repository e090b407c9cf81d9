"""Let fairseq's batch-prefetch threads finish before the interpreter exits.

fairseq wraps each epoch's batches in a ``BufferedIterator`` (``--data-buffer-size``,
default 10) whose daemon thread builds the next batches in the background. When
training ends, that thread is usually still building one; if the interpreter
finalises while it is inside torch or numpy code, CPython tears the thread down
in the middle of a C++ call and the process aborts ("terminate called without
an active exception", exit status -6 / SIGABRT) *after* a successful run. It
happens whenever batches are built more slowly than the model trains (e.g.
``--cl-weight 0``, a fast accelerator with ``--num-workers 0``).

:func:`track` remembers the task's epoch iterators; at exit every live prefetch
thread is told to stop after its current batch and its queue is drained until
it has, so nothing is left running inside native code.
"""

import atexit
import queue
import time
import weakref

from ._version import check_version

#: the fairseq release this fix was written and tested against
WRITTEN_FOR = "0.12.3.1"

_ITERATORS = weakref.WeakSet()
#: upper bound on the wait at exit (one batch is built in well under this)
EXIT_TIMEOUT_S = 60.0


def track(epoch_itr):
    """Stop ``epoch_itr``'s prefetch thread (if any) at exit."""
    try:
        _ITERATORS.add(epoch_itr)
    except TypeError:  # not weak-referenceable: nothing to track
        pass
    return epoch_itr


def _prefetchers(epoch_itr):
    for name in ("_cur_epoch_itr", "_next_epoch_itr"):
        counting = getattr(epoch_itr, name, None)
        buffered = getattr(counting, "_itr", None)
        consumer = getattr(buffered, "_consumer", None)
        if consumer is not None and hasattr(buffered, "_queue"):
            yield buffered._queue, consumer


def stop_prefetch_threads(timeout: float = EXIT_TIMEOUT_S) -> int:
    """Stop every tracked prefetch thread after its current batch; returns how many still run."""
    deadline = time.monotonic() + timeout
    running = 0
    for epoch_itr in list(_ITERATORS):
        for q, consumer in _prefetchers(epoch_itr):
            consumer._max_len = 0  # BackgroundConsumer stops once count >= max_len
            while consumer.is_alive() and time.monotonic() < deadline:
                try:
                    while True:
                        q.get_nowait()  # make room for the item in hand and the sentinel
                except queue.Empty:
                    pass
                consumer.join(0.05)
            running += int(consumer.is_alive())
    return running


atexit.register(stop_prefetch_threads)


def apply():
    """Every task's batch iterators (sentence_prediction fine-tuning included, when the
    plugin is loaded) stop their prefetch thread at exit."""
    from fairseq.tasks.fairseq_task import FairseqTask

    check_version(__name__, WRITTEN_FOR)
    original = FairseqTask.get_batch_iterator
    if getattr(original, "_clear_tracked", False):
        return

    def get_batch_iterator(self, *args, **kwargs):
        return track(original(self, *args, **kwargs))

    get_batch_iterator._clear_tracked = True
    FairseqTask.get_batch_iterator = get_batch_iterator
