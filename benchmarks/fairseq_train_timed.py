"""``fairseq-train`` with per-update instrumentation, for the benchmarks.

    python benchmarks/fairseq_train_timed.py --bench-out run.json [--bench-warmup 3] DATA ...fairseq-train options...

Runs fairseq's own ``fairseq_cli.train.cli_main`` (the real trainer, data loader,
progress bar, distributed launch) and records, for every update:

* the wall time of ``Trainer.train_step`` and the gap before it (waiting for the
  batch, progress-bar logging, learning-rate step), and the CPU time of the
  process (all its threads) over the same two intervals;
* the tokens of the batch: non-padding and padded, for the MLM input ``s``
  (``net_input``; ``net_input2`` of Double-MLM) and for the contrastive views
  (``contrastive``), so that the token floor (s + s~1 + s~2) / s is measured on
  the batches actually trained on;
* the losses at full precision (fairseq's log rounds them to 3 decimals), from the
  logging outputs after they are summed over ranks: ``loss``, ``mlm_loss``,
  ``cl_loss`` (bits), ``cl_acc`` (%), and the contrastive rows each rank's anchors
  were compared with.

At exit it writes ``--bench-out`` (``{rank}`` is replaced by the rank) with the
records, the peak resident memory of the process (``ru_maxrss``) and the total
training time. Nothing in fairseq's behaviour is changed, except that the batch-prefetch
threads of every task (masked_lm included) are stopped when training returns, as a
fairseq-clear run stops its own (fairseq_clear/fairseq_fixes/prefetch_threads.py), so that a
finished run cannot abort (SIGABRT), and ``--bf16`` without torch_xla means bfloat16 on the CPU
or GPU for every task, as in a fairseq-clear run (bf16_without_tpu.py), so that the masked_lm
baseline runs in the precision it is compared in.
"""

import json
import math
import os
import resource
import sys
import time


def _pop_option(argv, name, default=None, cast=str):
    if name in argv:
        i = argv.index(name)
        value = cast(argv[i + 1])
        del argv[i : i + 2]
        return value
    return default


def _tokens(tensor, pad):
    return int(tensor.ne(pad).sum()), int(tensor.numel())


def main():
    argv = sys.argv[1:]
    out = _pop_option(argv, "--bench-out")
    if out is None:
        sys.exit("--bench-out FILE is required")
    sys.argv = [sys.argv[0]] + argv

    import torch
    from fairseq import trainer as fairseq_trainer
    from fairseq_cli import train as fairseq_train

    records = []
    state = {"last_end": None, "start": time.perf_counter(), "pending": None}
    Trainer = fairseq_trainer.Trainer
    original_step = Trainer.train_step
    original_reduce = Trainer._reduce_and_log_stats

    def batch_stats(self, samples):
        pad = self.task.source_dictionary.pad()
        stats = {"sentences": 0, "s_tokens": 0, "s_padded": 0, "views_tokens": 0,
                 "views_padded": 0, "views_rows": 0, "mlm2_tokens": 0, "ids": []}
        for sample in samples:
            if not sample:
                continue
            stats["sentences"] += int(sample.get("nsentences", 0))
            if "id" in sample:  # which sentences: compares the batches of two runs
                stats["ids"].append(int(sample["id"].sum()))
            if "net_input" in sample:
                t, p = _tokens(sample["net_input"]["src_tokens"], pad)
                stats["s_tokens"] += t
                stats["s_padded"] += p
            if "net_input2" in sample:
                stats["mlm2_tokens"] += _tokens(sample["net_input2"]["src_tokens"], pad)[0]
            views = sample.get("contrastive")
            if isinstance(views, dict) and "src_tokens" in views:
                t, p = _tokens(views["src_tokens"], pad)
                stats["views_tokens"] += t
                stats["views_padded"] += p
                stats["views_rows"] += int(views["src_tokens"].size(0))
        return stats

    def timed_step(self, samples, raise_oom=False):
        stats = batch_stats(self, samples)
        if "rank" not in state:
            state["rank"] = self.data_parallel_rank
        start, cpu_start = time.perf_counter(), time.process_time()
        state["pending"] = {}
        result = original_step(self, samples, raise_oom)
        end, cpu_end = time.perf_counter(), time.process_time()
        gap = None if state["last_end"] is None else start - state["last_end"]
        cpu_gap = None if state["last_end"] is None else cpu_start - state["last_cpu_end"]
        state["last_end"], state["last_cpu_end"] = end, cpu_end
        rec = {"update": len(records) + 1, "step_s": end - start, "gap_s": gap,
               "step_cpu_s": cpu_end - cpu_start, "gap_cpu_s": cpu_gap, **stats}
        rec.update(state["pending"] or {})
        records.append(rec)
        return result

    def capture_reduce(self, logging_outputs, sample_size, grad_norm=None):
        if logging_outputs:
            def total(key):
                return sum(float(log.get(key, 0)) for log in logging_outputs)

            ln2 = math.log(2)
            size = float(sample_size) if sample_size else total("sample_size")
            values = {"loss": total("loss") / max(size, 1e-8) / ln2}
            masked = total("n_masked") or total("sample_size")
            if "mlm_loss" in logging_outputs[0] and total("n_masked") > 0:
                values["mlm_loss"] = total("mlm_loss") / total("n_masked") / ln2
            elif "n_masked" not in logging_outputs[0] and masked > 0 and "cl_loss" not in logging_outputs[0]:
                values["mlm_loss"] = values["loss"]  # fairseq's masked_lm: loss is the MLM loss
            if total("cl_anchors") > 0:
                values["cl_loss"] = total("cl_loss") / total("cl_anchors") / ln2
                values["cl_acc"] = 100.0 * total("cl_correct") / total("cl_anchors")
                values["cl_anchors"] = total("cl_anchors")
            if grad_norm is not None:
                values["gnorm"] = float(grad_norm)
            if state["pending"] is not None:
                state["pending"].update(values)
        return original_reduce(self, logging_outputs, sample_size, grad_norm)

    Trainer.train_step = timed_step
    Trainer._reduce_and_log_stats = capture_reduce

    def write():
        rank = state.get("rank", 0)
        path = out.replace("{rank}", str(rank))
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        result = {
            "argv": argv,
            "rank": rank,
            "records": records,
            "train_seconds": sum(r["step_s"] + (r["gap_s"] or 0) for r in records),
            "process_seconds": time.perf_counter() - state["start"],
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
            # the device's own peak (None on CPU): what a GPU run is limited by
            "peak_device_mb": (torch.cuda.max_memory_allocated() / 2**20
                               if torch.cuda.is_available() and torch.cuda.is_initialized() else None),
            "torch_threads": torch.get_num_threads(),
        }
        with open(path, "w") as f:
            json.dump(result, f)

    from fairseq.distributed import utils as distributed_utils

    from fairseq_clear.fairseq_fixes.bf16_without_tpu import untie
    from fairseq_clear.fairseq_fixes.prefetch_threads import stop_prefetch_threads

    call_main = distributed_utils.call_main

    def call_main_bf16(cfg, main_fn, **kwargs):
        untie(cfg)
        return call_main(cfg, main_fn, **kwargs)

    distributed_utils.call_main = call_main_bf16
    try:
        fairseq_train.cli_main()
    finally:
        stop_prefetch_threads()  # for masked_lm too (a fairseq-clear run stops its own)
        write()


if __name__ == "__main__":
    main()
