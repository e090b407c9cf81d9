"""Load fairseq checkpoints with ``torch.load(weights_only=True)``.

torch >= 2.6 unpickles checkpoints with ``weights_only=True`` by default, which
refuses any class not on an allow-list; fairseq checkpoints hold an
``argparse.Namespace`` (the model's legacy args) and sometimes numpy scalars
(metric values), so resuming and hub loading fail (fairseq issue #5610).
Importing :mod:`fairseq_clear` allow-lists exactly those plain-data classes.
``weights_only`` is never turned off: a checkpoint that names any other
global (for example one crafted to run a shell command when unpickled) is
refused with :class:`UnsafeCheckpointError`, and nothing in it runs.
"""

import argparse
import contextlib
import logging
import os
import pickle
import re
import zipfile
from typing import Optional

import torch

from .allowlist import SAFE_GLOBALS, allow_fairseq_checkpoints  # noqa: F401  (re-exported)
from .checkpoint_sizes import check_sizes
from .errors import FairseqClearError

logger = logging.getLogger(__name__)


class UnsafeCheckpointError(FairseqClearError, pickle.UnpicklingError):
    """A checkpoint needs a class outside the allow-list to load; it was not loaded."""


class CorruptCheckpointError(FairseqClearError, RuntimeError):
    """A checkpoint file is truncated or damaged (e.g. copied or written when a run was killed)."""


class NotACheckpointError(FairseqClearError, ValueError):
    """A file given as a checkpoint that torch.save did not write (e.g. a file of zeros)."""


def _looks_corrupt(path, error) -> bool:
    if isinstance(error, (FileNotFoundError, PermissionError, IsADirectoryError)):
        return False
    if isinstance(error, EOFError):
        return True
    text = str(error)
    if any(s in text for s in ("unexpected EOF", "corrupted", "central directory", "zip archive")):
        return True
    try:  # torch.save's zip format: the central directory at its end is gone
        import zipfile

        with open(path, "rb") as f:
            return f.read(2) == b"PK" and not zipfile.is_zipfile(path)
    except OSError:
        return False


def _corrupt(path, error) -> CorruptCheckpointError:
    return CorruptCheckpointError(
        f"checkpoint '{path}' is truncated or corrupt ({type(error).__name__}: "
        f"{str(error).strip().splitlines()[0] if str(error).strip() else 'no detail'}). "
        "It was probably being written when a process was killed; restart from another "
        "checkpoint in the same directory (e.g. --restore-file checkpoint_<epoch>_<updates>.pt)."
    )


def zip_damage(path):
    """None when ``path`` is a complete torch zip checkpoint whose every record matches its CRC-32
    (torch.save writes one per record; torch.load never checks them); else what is wrong."""
    try:
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
            # zipfile tolerates bytes before the archive; torch.load does not (a retried write
            # appended to a half-written file looks exactly like that)
            if infos and min(i.header_offset for i in infos) != 0:
                return f"has {min(i.header_offset for i in infos)} stray bytes before its first record"
            bad = z.testzip()
    except zipfile.BadZipFile as e:
        return f"not a complete zip archive ({e})"
    except (OSError, EOFError, RuntimeError, ValueError) as e:
        return f"unreadable ({type(e).__name__}: {e})"
    if bad is not None:
        return f"record '{bad}' does not match the CRC-32 written at save time"
    return None


def is_zip(path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"PK"
    except OSError:
        return False


def verify_integrity(path) -> None:
    """Refuse a torch zip checkpoint with a damaged record (a flipped bit loads silently otherwise),
    and a file torch.save did not write (neither its zip format nor a legacy pickle)."""
    try:
        with open(path, "rb") as f:
            head = f.read(2)
    except OSError:
        return  # the load names what is wrong with it
    if head and head != b"PK" and head[:1] != b"\x80":  # pickle protocol 2+ starts with PROTO
        raise NotACheckpointError(
            f"checkpoint '{path}' is not a file torch.save wrote (it starts with {head!r}, neither a zip "
            "archive nor a pickle): give a checkpoint fairseq-train wrote")
    if head == b"PK":
        damage = zip_damage(path)
        if damage:
            raise CorruptCheckpointError(
                f"checkpoint '{path}' is corrupt: {damage}. Restore it from a copy, or restart "
                "from another checkpoint in the same directory"
            )


@contextlib.contextmanager
def load_errors_named(path):
    """Turn a refused pickle or a damaged file met while loading ``path`` into errors naming it."""
    try:
        yield
    except pickle.UnpicklingError as e:
        raise _refusal(path, e) from None
    except (EOFError, OSError, RuntimeError) as e:
        if _looks_corrupt(path, e):
            raise _corrupt(path, e) from None
        raise


def checked(load, path, *args, allow_nonfinite: bool = False, **kwargs):
    """``load(path, *args, **kwargs)`` (fairseq's ``load_checkpoint_to_cpu``) once ``path`` passed
    the checks: CRC-32 integrity, then the config (:func:`check_checkpoint_config`) and its sizes
    (:func:`~fairseq_clear.checkpoint_sizes.check_sizes`) read without the tensors' data; the
    load itself with the allow-list and ``weights_only=True`` forced whatever the environment
    says; then the weights must be finite (:func:`check_finite`). A refusal or a damaged file
    raises an error naming ``path``."""
    from fairseq.file_io import PathManager

    allow_fairseq_checkpoints()
    with load_errors_named(path), _forced_weights_only():
        local = PathManager.get_local_path(path)
        verify_integrity(local)
        peeked = _peek_state(local)
        check_checkpoint_config(peeked, path)
        check_sizes(peeked, path)
        del peeked
        state = load(path, *args, **kwargs)
    check_finite(state.get("model") if isinstance(state, dict) else None, path, allow_nonfinite)
    return state


#: set to 1 to load checkpoints whose weights hold NaN or Inf (to debug a diverged run)
ALLOW_NONFINITE_ENV = "FAIRSEQ_CLEAR_ALLOW_NONFINITE_WEIGHTS"


class NonFiniteWeightsError(FairseqClearError, ValueError):
    """A checkpoint's weights hold NaN or Inf: every vector computed from them would too."""


def check_finite(weights, path, allow: bool = False) -> None:
    """Refuse ``weights`` (name -> tensor) holding NaN/Inf, naming the first such tensor, unless
    ``allow`` or the environment variable :data:`ALLOW_NONFINITE_ENV` is 1."""
    if allow or os.environ.get(ALLOW_NONFINITE_ENV) == "1" or not isinstance(weights, dict):
        return
    for name, tensor in weights.items():
        if torch.is_tensor(tensor) and tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            nan, inf = int(torch.isnan(tensor).sum()), int(torch.isinf(tensor).sum())
            raise NonFiniteWeightsError(
                f"checkpoint '{path}': weight {name} holds {nan} NaN and {inf} Inf values, so every "
                f"vector computed from it would be NaN; to load it anyway (debugging a diverged run) "
                f"set {ALLOW_NONFINITE_ENV}=1"
            )


def safe_load(path, map_location="cpu"):
    """``torch.load(path, weights_only=True)`` with the allow-list and a clear refusal."""
    allow_fairseq_checkpoints()
    verify_integrity(path)
    with load_errors_named(path):
        return torch.load(path, map_location=map_location, weights_only=True)


def _refusal(path, error) -> UnsafeCheckpointError:
    detail = str(error).split("WeightsUnpickler error:")[-1].strip().splitlines()[0]
    return UnsafeCheckpointError(
        f"refusing to load checkpoint '{path}': it needs a Python object that is not "
        f"plain data ({detail}). fairseq-clear loads checkpoints with "
        "torch.load(weights_only=True) and never falls back to full unpickling, "
        "since that can run arbitrary code. If you trust this file and know the class "
        "is harmless, add it with torch.serialization.add_safe_globals([...])."
    )


@contextlib.contextmanager
def _forced_weights_only():
    """Force ``weights_only=True`` for torch.load calls that do not pass it (fairseq's)."""
    saved = {k: os.environ.get(k) for k in ("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD")}
    os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = "1"
    os.environ.pop("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", None)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# ---------------------------------------------------------------------------
# What a checkpoint may ask fairseq to build.
#
# fairseq builds whatever model and task a checkpoint's own config names, and
# some of its architectures eval() config strings (wav2vec2's
# conv_feature_layers, fconv's layer specs) or torch.load a path from the
# config (xm_transformer) while they are built. A file that is plain data can
# therefore still pick code to run. Every loaded config is checked against
# these names before fairseq reads it; its strings are never evaluated.

#: fairseq's own tasks whose checkpoints this package loads: masked_lm (fairseq's roberta.base,
#: clear-import-hf's output) and sentence_prediction (GLUE fine-tuning, clear-glue). The
#: plugin's own tasks come from fairseq's registry (:func:`accepted_tasks`): a new task in
#: tasks/ has its checkpoints accepted, resume included, with no entry here.
FAIRSEQ_TASKS = frozenset({"masked_lm", "sentence_prediction"})
#: fairseq's RoBERTa model classes (module.class) whose every registered model and
#: architecture name is accepted (roberta, roberta_base, ..., xlm; xlmr): the encoders of
#: fairseq's roberta.base/large and XLM-R downloads, which the hub and clear-glue rebuild
#: as clear_roberta (same modules, same parameter names). Not every subclass of
#: RobertaModel: model_parallel_roberta needs Megatron and shards its weights, XMOD's
#: encoder has per-language adapters and needs language ids, CamemBERT and GottBERT were
#: never tried here; each would load as something other than what the hub builds.
FAIRSEQ_ROBERTA_CLASSES = frozenset({
    "fairseq.models.roberta.model.RobertaModel",
    "fairseq.models.roberta.model_xlmr.XLMRModel",
})


def _registered(registry, accept) -> set:
    return {name for name, cls in registry.items() if accept(cls)}


def plugin_names() -> dict:
    """{"task": names, "criterion": names, "model": model and architecture names} that this
    package registered in fairseq."""
    from fairseq.criterions import CRITERION_REGISTRY
    from fairseq.models import ARCH_MODEL_REGISTRY, MODEL_REGISTRY
    from fairseq.tasks import TASK_REGISTRY

    root = __name__.split(".")[0]  # "fairseq_clear", or the name fairseq gave the --user-dir

    def ours(cls) -> bool:
        module = getattr(cls, "__module__", "") or ""
        return module == root or module.startswith(root + ".")

    return {
        "task": _registered(TASK_REGISTRY, ours),
        "criterion": _registered(CRITERION_REGISTRY, ours),
        "model": _registered(MODEL_REGISTRY, ours) | _registered(ARCH_MODEL_REGISTRY, ours),
    }


def stock_roberta_names() -> frozenset:
    """The model and architecture names fairseq registers for :data:`FAIRSEQ_ROBERTA_CLASSES`."""
    from fairseq.models import ARCH_MODEL_REGISTRY, MODEL_REGISTRY

    def stock(cls):
        return f"{cls.__module__}.{cls.__qualname__}" in FAIRSEQ_ROBERTA_CLASSES

    return frozenset(_registered(MODEL_REGISTRY, stock) | _registered(ARCH_MODEL_REGISTRY, stock))


def accepted_model_names() -> frozenset:
    """Model names (``cfg.model._name`` / ``arch``) a checkpoint may name: every model and
    architecture this package registered in fairseq, and fairseq's RoBERTa family."""
    return frozenset(plugin_names()["model"]) | stock_roberta_names()


def accepted_tasks() -> frozenset:
    """Tasks whose checkpoints this package loads: every task it registered, and :data:`FAIRSEQ_TASKS`."""
    return frozenset(plugin_names()["task"]) | FAIRSEQ_TASKS


def accepted_bpe() -> frozenset:
    """fairseq ``--bpe`` names the hub may build from a checkpoint's config: the kinds of the
    tokenizer classes of :mod:`fairseq_clear.vocabulary` (None: not set)."""
    from .vocabulary import kinds

    return frozenset(kinds())


# ${a.b.c} refers to another config value (fairseq's II(...) defaults); anything
# else inside ${...} calls an OmegaConf resolver (oc.env, custom ones), i.e. code.
_NODE_REFERENCE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_.]*\}")


class UnsupportedCheckpointError(FairseqClearError, ValueError):
    """A checkpoint's config names a model, task or setting this package does not load."""


def _field(section, key):
    if section is None:
        return None
    if isinstance(section, dict):
        return section.get(key)
    return getattr(section, key, None)


def _strings(value, path, depth=0):
    if depth > 50:
        raise UnsupportedCheckpointError(f"config nested deeper than 50 levels at '{path}'")
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, f"{path}.{k}" if path else str(k), depth + 1)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _strings(v, f"{path}[{i}]", depth + 1)
    elif isinstance(value, argparse.Namespace):
        yield from _strings(vars(value), path, depth + 1)


def check_checkpoint_config(state, path) -> None:
    """Refuse a checkpoint whose config asks for anything but our models/tasks or calls a resolver.

    Checked on the raw loaded data, before fairseq upgrades it, turns it into
    an OmegaConf config or builds anything. Raises
    :class:`UnsupportedCheckpointError` naming the field and the value.
    """
    if not isinstance(state, dict):
        raise UnsupportedCheckpointError(f"checkpoint '{path}' is not a dict of plain data")

    def refuse(field, value, accepted):
        raise UnsupportedCheckpointError(
            f"refusing checkpoint '{path}': {field} is {value!r}, which fairseq-clear does not "
            f"load (accepted: {', '.join(sorted(accepted))}). fairseq builds what a checkpoint's "
            "config names, and other architectures run code from config strings while being built"
        )

    sources = []
    if state.get("cfg") is not None:
        sources.append(("cfg", state["cfg"]))
    if state.get("args") is not None:
        sources.append(("args", state["args"]))
    if not sources:
        raise UnsupportedCheckpointError(
            f"refusing checkpoint '{path}': it has neither 'cfg' nor 'args', so nothing says what "
            "model it holds (fairseq-train writes both kinds of checkpoint with one of them)"
        )
    accepted = {"model": accepted_model_names(), "task": accepted_tasks(), "bpe": accepted_bpe(),
                "tokenizer": frozenset()}
    accepted["arch"] = accepted["model"]
    for name, cfg in sources:
        for where, text in _strings(cfg if not isinstance(cfg, argparse.Namespace) else vars(cfg), name):
            if "${" in _NODE_REFERENCE.sub("", text):
                raise UnsupportedCheckpointError(
                    f"refusing checkpoint '{path}': {where} is {text!r}, an OmegaConf interpolation "
                    "that calls a resolver; a loaded config is data and is never evaluated"
                )
        if name == "cfg":
            model, task = _field(cfg, "model"), _field(cfg, "task")
            # (field, kind of name, value, may be absent): fairseq-hydra-train writes model
            # configs that carry only _name; fairseq-train's carry arch too
            checks = [
                ("cfg.model._name", "model", _field(model, "_name"), False),
                ("cfg.model.arch", "arch", _field(model, "arch"), True),
                ("cfg.task._name", "task", _field(task, "_name"), False),
                ("cfg.bpe._name", "bpe", _field(_field(cfg, "bpe"), "_name"), True),
                ("cfg.tokenizer._name", "tokenizer", _field(_field(cfg, "tokenizer"), "_name"), True),
            ]
            if model is None:
                refuse("cfg.model", None, accepted["model"])
        else:
            checks = [
                ("args.arch", "arch", _field(cfg, "arch"), False),
                ("args.task", "task", _field(cfg, "task"), False),
                ("args.bpe", "bpe", _field(cfg, "bpe"), True),
                ("args.tokenizer", "tokenizer", _field(cfg, "tokenizer"), True),
            ]
        for field, kind, value, optional in checks:
            if value is None and optional:
                continue
            if not isinstance(value, str) or value not in accepted[kind]:
                refuse(field, value, accepted[kind] or {"none"})


def _peek_state(path):
    """The checkpoint's plain data without reading its tensors (mmap), for the config check."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except RuntimeError as e:
        if "mmap" not in str(e):  # legacy (non-zip) files cannot be mapped: read them whole
            raise
        return torch.load(path, map_location="cpu", weights_only=True)


def names_plugin(path) -> Optional[bool]:
    """Whether a checkpoint's own config names one of the plugin's tasks, criterions or models,
    read as plain data without its tensors; None when it cannot be read so (it holds more than
    plain data, or is not a checkpoint)."""
    try:
        state = _peek_state(path)
    except Exception:  # noqa: BLE001  (whatever stops a plain-data read: the safe loader names it)
        return None
    if not isinstance(state, dict):
        return None
    ours = plugin_names()
    cfg, args = state.get("cfg"), state.get("args")
    names = []
    if isinstance(cfg, dict):
        names += [("task", _field(_field(cfg, "task"), "_name")), ("criterion", _field(_field(cfg, "criterion"), "_name")),
                  ("model", _field(_field(cfg, "model"), "_name")), ("model", _field(_field(cfg, "model"), "arch"))]
    if args is not None:
        names += [("task", _field(args, "task")), ("criterion", _field(args, "criterion")),
                  ("model", _field(args, "arch"))]
    return any(isinstance(name, str) and name in ours[kind] for kind, name in names)


def training_task_config(path) -> dict:
    """The task options a checkpoint was trained with, as saved (before any load-time override),
    read without its tensors: a dict (cfg.task, or the legacy args)."""
    state = _peek_state(path)
    cfg = state.get("cfg") if isinstance(state, dict) else None
    task = cfg.get("task") if isinstance(cfg, dict) else None
    if isinstance(task, dict):
        return dict(task)
    args = state.get("args") if isinstance(state, dict) else None
    if args is not None:
        out = dict(vars(args))
        out["_name"] = out.get("task")
        return out
    return {}
