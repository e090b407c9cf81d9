"""A fairseq-clear run stops fairseq's batch-prefetch threads before it returns.

fairseq wraps each epoch's batches in a ``BufferedIterator`` (``--data-buffer-size``,
default 10) whose daemon thread builds the next batches in the background. When
training ends, that thread is usually still building one; if the interpreter
finalises while it is inside torch or numpy code, CPython tears the thread down
in the middle of a C++ call and the process aborts ("terminate called without
an active exception", exit status -6 / SIGABRT) *after* a successful run. It
happens whenever batches are built more slowly than the model trains (e.g.
``--cl-weight 0``, a fast accelerator with ``--num-workers 0``).

At the end of a fairseq-clear run (run.py), every live prefetch thread is told to stop
after its current batch and its queue is drained until it has, so nothing is left
running inside native code. Other runs are left as fairseq leaves them.
"""

import queue
import threading
import time

#: the fairseq release this fix was written and tested against
WRITTEN_FOR = "0.12.3.1"
#: upper bound on the wait (one batch is built in well under this)
STOP_TIMEOUT_S = 60.0


def _prefetchers():
    from fairseq.data.iterators import BackgroundConsumer

    for thread in threading.enumerate():
        if isinstance(thread, BackgroundConsumer) and thread.is_alive():
            yield thread


def stop_prefetch_threads(timeout: float = STOP_TIMEOUT_S) -> int:
    """Stop every prefetch thread after its current batch; returns how many still run."""
    deadline = time.monotonic() + timeout
    running = 0
    for consumer in list(_prefetchers()):
        consumer._max_len = 0  # BackgroundConsumer stops once count >= max_len
        while consumer.is_alive() and time.monotonic() < deadline:
            try:
                while True:
                    consumer._queue.get_nowait()  # make room for the item in hand and the sentinel
            except queue.Empty:
                pass
            consumer.join(0.05)
        running += int(consumer.is_alive())
    return running
