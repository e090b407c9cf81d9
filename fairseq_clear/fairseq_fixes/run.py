"""A fairseq-clear run: fairseq's ``main`` inside the scope where the fixes act.

fairseq-train, fairseq-hydra-train, fairseq-validate and fairseq-eval-lm start their ``main``
through ``fairseq.distributed.utils.call_main(cfg, main)``. When ``cfg`` names one of the
plugin's tasks, criterions or models (scope.names_plugin), before fairseq's ``call_main``:

* ``--bf16`` without torch_xla means bfloat16 on the GPU or CPU, not ``--tpu`` (bf16_without_tpu);
* ``torchrun ... --cpu`` forms one group of workers (cpu_torchrun);
* a DATA the task cannot read a dictionary from ends the command with one ``error:`` line (check_data;
  fairseq-train checks it before it converts its options through hydra, whose deprecation warnings
  would come first: ``convert_namespace_to_omegaconf`` of fairseq_cli.train, for the plugin's tasks only);

and ``main`` runs, in every process (also those fairseq spawns), inside ``scope.entered(cfg)``;
when it returns or fails, fairseq's prefetch threads are stopped (prefetch_threads) and the
--save-dir lock is released (save_dir_lock): :func:`end_of_run`, also the end of a run that a
component opened (scope.component_built). For any other config, ``call_main`` is fairseq's.
"""

import functools
import sys

from . import _patching, bf16_without_tpu, cpu_torchrun, prefetch_threads, save_dir_lock, scope
from ._version import applies

#: the fairseq release this fix was written and tested against
WRITTEN_FOR = "0.12.3.1"


class ScopedMain:
    """``main(cfg, **kwargs)`` inside the plugin's scope; a class so that fairseq's spawned
    processes can unpickle it (they import this module, which installs the fixes there too)."""

    def __init__(self, main):
        self.main = main

    def __call__(self, cfg, **kwargs):
        with scope.entered(cfg):
            try:
                result = self.main(cfg, **kwargs)
                scope.run_ended()  # e.g. the STS summary line (tasks/sts_validation.py)
                return result
            finally:
                scope.cleanup()


def end_of_run() -> None:
    """What ends every fairseq-clear run, however it opened (scope.py): fairseq's prefetch threads
    stopped, the --save-dir lock released."""
    if applies(prefetch_threads):
        prefetch_threads.stop_prefetch_threads()
    save_dir_lock.release_all()


def check_data(cfg) -> None:
    """A DATA that the run's task cannot read a dictionary from (a clear-prepare that stopped, a typo)
    ends the command with one ``error:`` line (status 2), as the clear-* commands end: before
    fairseq logs its config and builds the task, whose traceback would bury the line."""
    _check_task_data(getattr(cfg.task, "_name", None), cfg.task)


def check_parsed_data(args) -> None:
    """check_data on fairseq-train's parsed arguments (the task's options are attributes of them)."""
    _check_task_data(getattr(args, "task", None), args)


def _check_task_data(name, task_cfg) -> None:
    from fairseq.tasks import TASK_REGISTRY

    # the plugin's tasks name what their DATA lacks (ContrastiveTask.data_error; fairseq's own
    # tasks have none): found in fairseq's registry, as the fixes never import the tasks
    data_error = getattr(TASK_REGISTRY.get(name), "data_error", None)
    if data_error is None or not getattr(task_cfg, "data", None):
        return
    message = data_error(task_cfg)
    if message:
        print(f"error: {message}", file=sys.stderr)
        sys.exit(2)


def prepare(cfg) -> None:
    """The config fixes of a fairseq-clear run, before fairseq's call_main reads the config."""
    if applies(bf16_without_tpu):
        bf16_without_tpu.untie(cfg)
    if applies(cpu_torchrun):
        cpu_torchrun.init_from_torchrun(cfg.distributed_training)


def install():
    from fairseq.distributed import utils as distributed_utils

    scope.on_every_run_end(end_of_run)

    def make(fairseq_call_main):
        @functools.wraps(fairseq_call_main)
        def call_main(cfg, main, **kwargs):
            if isinstance(main, ScopedMain) or not scope.names_plugin(cfg):
                return fairseq_call_main(cfg, main, **kwargs)
            check_data(cfg)
            prepare(cfg)
            return fairseq_call_main(cfg, ScopedMain(main), **kwargs)

        return call_main

    _patching.replace(distributed_utils, "call_main", make)

    import fairseq_cli.train  # fairseq-train calls the name it imported from fairseq.dataclass.utils

    def make_convert(fairseq_convert):
        @functools.wraps(fairseq_convert)
        def convert_namespace_to_omegaconf(args):
            # hydra prints ~18 lines of deprecation warnings while converting: a DATA the task
            # refuses is refused before them (check_parsed_data does nothing for fairseq's own tasks)
            check_parsed_data(args)
            return fairseq_convert(args)

        return convert_namespace_to_omegaconf

    _patching.replace(fairseq_cli.train, "convert_namespace_to_omegaconf", make_convert)
