"""A finished run exits with status 0: fairseq's batch-prefetch thread is stopped before
the interpreter finalises (else: "terminate called without an active exception", SIGABRT,
in about half of the runs whose batches are slower to build than the model trains);
and a corpus smaller than --required-batch-size-multiple still trains."""

import time

from fairseq_clear.fairseq_fixes import prefetch_threads
from harness.runs import build_task, logged
from helpers import make_binarized, run_cli, synthetic_sentences, train_args


def test_prefetch_thread_is_stopped_and_joined(tiny_data):
    task, _ = build_task(tiny_data, "--tokens-per-sample", "64")
    itr = task.get_batch_iterator(task.dataset("train"), max_sentences=4, seed=1, epoch=1,
                                  data_buffer_size=10, disable_iterator_cache=True)
    epoch = itr.next_epoch_itr(shuffle=True)
    next(epoch)  # starts the prefetch thread, which keeps building batches
    consumer = epoch._itr._consumer
    time.sleep(0.2)
    assert consumer.is_alive()
    assert prefetch_threads.stop_prefetch_threads(timeout=30) == 0
    assert not consumer.is_alive()


def test_runs_exit_cleanly_when_batches_are_the_bottleneck(tiny_data, tmp_path):
    # --cl-weight 0: the model skips the views the data pipeline still builds
    codes = [
        run_cli(train_args(tiny_data, tmp_path / str(i), "--cl-weight", "0", max_update=2),
                check=False).returncode
        for i in range(4)
    ]
    assert codes == [0, 0, 0, 0]


def test_corpus_smaller_than_the_batch_multiple_trains(tmp_path):
    data = make_binarized(tmp_path / "three", synthetic_sentences(3, seed=5),
                          synthetic_sentences(3, seed=6), vocab_size=60)
    out = run_cli(train_args(data, tmp_path / "save", max_update=3, batch_size=16)).stdout
    records = logged(out)
    assert [r["bsz"] for r in records] == ["3", "3", "3"]
    assert "kept the last batch of 3 samples" in out
