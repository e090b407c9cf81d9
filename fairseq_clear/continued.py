"""The recipes' values for continuing a pre-trained model, and where each comes from.

    python -m fairseq_clear.continued MODE CHECKPOINT|- [--cpu] [--sts-dev FILE]
        [--data DATA --recipe-options "RECIPE OPTIONS" [--warmup-ratio R]] -- [USER OPTIONS]
    python -m fairseq_clear.continued --recipe-of MODE

prints fairseq-train options (one argument per line: the recipes read them with mapfile, never
word-split) that the example recipes put after their own settings and before the user's options,
and logs one line per value on stderr saying where it came from; every value read from the
checkpoint is checked to be what its option takes. A checkpoint that clear-import-hf recorded as a pre-trained model (``--pretrained-kind``,
kept through training by model-args) or fairseq's stock RoBERTa gets the papers' values for
*continued* training (SimCSE: lr 3e-5 unsupervised / 5e-5 supervised for base-size encoders, 1e-5
for large ones; DeCLUTR 5e-5; CLEAR 1e-5) instead of the recipes' from-scratch ones (5e-4 on a
CPU, for a 2-layer model trained here); an imported model keeps the pooling clear-import-hf recorded (a
sentence-embedding model's own; a folder with no pooling config: mean, sentence-transformers'
default), on a CPU and on a GPU alike (after the recipe's settings, which differ). A value
the user passes (in USER OPTIONS, or LR in the environment) always wins and is named as theirs.
The modes, their values and what examples/pretrained/run.sh does for each (``--recipe-of``: its
corpus and recipe) are one table, ``paper_defaults.CONTINUED``.

With ``--sts-dev`` (STS-B dev, or the user's own pairs in its format) the run scores the
starting model before the first update, every checkpoint interval after (one whose validations take
about STS_SHARE of the run's time: sts_interval), and keeps the best
(the start included) as checkpoint_best.pt (tasks/sts_validation.py), checkpoint_last.pt and
KEEP (environment, default 0) interval checkpoints. With ``--save-dir`` one line states the
checkpoints the run keeps there and the disk they take, and a disk without room for two of them
is refused before training (budget.checkpoint_plan).
"""

import argparse
import math
import os
import shlex
import sys
from typing import Dict, List, Tuple

from .budget import checkpoint_plan, keep_from, plan, weight_bytes
from .budget import given as _given
from .errors import FairseqClearError
from .models.pooling import pooling_source
from .paper_defaults import CONTINUED  # the recipe modes and the papers' values live in one table
#: encoders at least this wide are "large" (BERT-large, RoBERTa-large: 1024)
LARGE_DIM = 1024


def read_record(checkpoint: str) -> Dict[str, object]:
    """What the checkpoint is: pretrained_kind, pretrained_pooling, sentence_normalize, encoder_embed_dim,
    and weight_bytes (its weights in fp32: the size of the run's checkpoints follows)."""
    import fairseq_clear  # noqa: F401  (allow-listed, weights_only loading)
    from .checkpoint_safety import safe_load
    from .checkpoint_safety import stock_roberta_names

    state = safe_load(checkpoint)
    cfg = state.get("cfg") or {}
    model = cfg.get("model") if hasattr(cfg, "get") else None
    if model is None and state.get("args") is not None:
        model = state["args"]
    get = (lambda k: model.get(k)) if hasattr(model, "get") else (lambda k: getattr(model, k, None))
    kind = get("pretrained_kind")
    stock = stock_roberta_names()
    if not kind and (get("_name") in stock or get("arch") in stock):
        kind = "encoder"  # fairseq's roberta.base as shipped
    # each value becomes a word of fairseq-train's command line: only what its option takes
    from .checkpoint_sizes import option_value
    from .models.pooling import POOLING_CHOICES, PRETRAINED_KINDS

    pooling, width, normalize = get("pretrained_pooling"), get("encoder_embed_dim"), get("sentence_normalize")
    if normalize not in (None, True, False):
        option_value(checkpoint, "sentence_normalize", normalize, {True, False})
    return {"pretrained_kind": kind and option_value(checkpoint, "pretrained_kind", kind, PRETRAINED_KINDS),
            "pretrained_pooling": pooling and option_value(checkpoint, "pretrained_pooling", pooling, POOLING_CHOICES),
            "sentence_normalize": bool(normalize),
            "encoder_embed_dim": width and int(option_value(checkpoint, "encoder_embed_dim", width, int)),
            "weight_bytes": weight_bytes(state)}


class ModelArgsError(FairseqClearError, ValueError):
    """A checkpoint model-args cannot rebuild (missing, not RoBERTa, or a value its option refuses)."""


def model_args(checkpoint: str) -> List[str]:
    """Command-line flags that rebuild the encoder of ``checkpoint`` (arch, sizes, positions)."""
    import fairseq_clear  # noqa: F401  (allow-listed, weights_only loading)
    from .checkpoint_safety import safe_load

    if not os.path.isfile(checkpoint):
        raise ModelArgsError(f"checkpoint '{checkpoint}' does not exist")
    state = safe_load(checkpoint)
    cfg = state.get("cfg") or {}
    model = cfg.get("model") if hasattr(cfg, "get") else None
    if model is None and state.get("args") is not None:
        model = state["args"]
    get = (lambda k, d=None: model.get(k, d)) if hasattr(model, "get") else (lambda k, d=None: getattr(model, k, d))
    from .checkpoint_safety import stock_roberta_names

    arch = get("_name") or get("arch")
    if arch in stock_roberta_names():
        arch = "clear_roberta"  # fairseq's own RoBERTa (roberta.base as shipped): same encoder
    if not arch or not str(arch).startswith("clear_roberta"):
        raise ModelArgsError(f"{checkpoint}: not a clear_roberta or fairseq RoBERTa checkpoint (arch '{arch}')")
    max_positions = get("max_positions") or get("tokens_per_sample")
    if max_positions is None and hasattr(cfg, "get") and cfg.get("task") is not None:
        max_positions = cfg["task"].get("tokens_per_sample")
    from fairseq.utils import get_available_activation_fns

    from .checkpoint_safety import UnsupportedCheckpointError, accepted_model_names, check_checkpoint_config
    from .checkpoint_sizes import CheckpointSizeError, check_sizes

    try:
        check_checkpoint_config(state, checkpoint)
        check_sizes(state, checkpoint)  # the flags below rebuild the model: nothing larger than its weights
    except (UnsupportedCheckpointError, CheckpointSizeError) as e:
        raise ModelArgsError(str(e)) from None

    from .checkpoint_sizes import CheckpointValueError, option_value

    def checked(field, value, kind):
        try:
            return option_value(checkpoint, field, value, kind)
        except CheckpointValueError as e:
            raise ModelArgsError(str(e)) from None

    flags = [
        "--arch", checked("arch", arch, accepted_model_names()),
        "--encoder-layers", checked("encoder_layers", get("encoder_layers"), int),
        "--encoder-embed-dim", checked("encoder_embed_dim", get("encoder_embed_dim"), int),
        "--encoder-ffn-embed-dim", checked("encoder_ffn_embed_dim", get("encoder_ffn_embed_dim"), int),
        "--encoder-attention-heads", checked("encoder_attention_heads", get("encoder_attention_heads"), int),
        "--activation-fn", checked("activation_fn", get("activation_fn", "gelu"), get_available_activation_fns()),
        "--max-positions", checked("max_positions", max_positions, int),
    ]
    if get("layernorm_eps") is not None:
        flags += ["--layernorm-eps", checked("layernorm_eps", get("layernorm_eps"), float)]  # BERT's 1e-12
    if get("encoder_normalize_before", False):
        flags.append("--encoder-normalize-before")
    if get("untie_weights_roberta", False):
        flags.append("--untie-weights-roberta")
    # what the starting model is (clear-import-hf's record), carried into the trained checkpoint
    from .models.pooling import POOLING_CHOICES, PRETRAINED_KINDS

    from .checkpoint_safety import stock_roberta_names

    kind = get("pretrained_kind") or ("encoder" if (get("_name") or get("arch")) in stock_roberta_names() else None)
    if kind:
        flags += ["--pretrained-kind", checked("pretrained_kind", kind, PRETRAINED_KINDS)]
    if get("pretrained_pooling"):
        flags += ["--pretrained-pooling", checked("pretrained_pooling", get("pretrained_pooling"), POOLING_CHOICES)]
    if get("sentence_normalize", False):
        flags.append("--sentence-normalize")
    if get("sentence_max_length"):  # sentence-transformers' max_seq_length and do_lower_case of the import
        flags += ["--sentence-max-length", checked("sentence_max_length", get("sentence_max_length"), int)]
    if get("sentence_lowercase", False):
        flags.append("--sentence-lowercase")
    if get("sentence_similarity"):
        from .models.pooling import SIMILARITY_FUNCTIONS

        flags += ["--sentence-similarity", checked("sentence_similarity", get("sentence_similarity"),
                                                   SIMILARITY_FUNCTIONS)]
    if get("sentence_prompts"):  # one word of letters, digits and %XX (models.inference.prompts_word)
        from .models.inference import PromptsError, read_prompts_word

        try:
            read_prompts_word(get("sentence_prompts"))
        except PromptsError as e:
            raise ModelArgsError(f"{checkpoint}: {e}") from None
        flags += ["--sentence-prompts", get("sentence_prompts")]
    if get("sentence_exclude_prompt", False):
        flags.append("--sentence-exclude-prompt")
    if get("sentence_dense"):  # one word of widths and activations of the table (checked by check_sizes above)
        from .models.dense import parse, word

        flags += ["--sentence-dense", word(parse(get("sentence_dense")))]
    return flags


#: the share of a run's time its STS_DEV validations may take: their interval is chosen for it
STS_SHARE = 0.1
#: a training update's forward and backward pass cost about 3 forward passes over its tokens
TRAIN_PASSES = 3


def sts_interval(max_update: int, validation_updates: float = 0.0, share: float = STS_SHARE) -> int:
    """Updates between two STS_DEV validations: every tenth of the run (SimCSE's 125 at most), or
    longer where one validation takes ``validation_updates`` updates' time, so that the validations
    take at most ``share`` of the run; at most half the run (fairseq validates the last update too:
    one validation between the start's and the last's, so that the best can be a checkpoint of its own)."""
    if not max_update:
        return 125  # SimCSE evaluates every 125
    tenth = max(1, min(125, max_update // 10))
    needed = math.ceil(validation_updates * (1 - share) / share) if validation_updates > 0 else 1
    return max(1, min(max(tenth, needed), (max_update + 1) // 2))


def sts_share(max_update: int, interval: int, validation_updates: float) -> float:
    """The share of the run's time its validations take: the start's, one per interval, the end's."""
    n = 1 + math.ceil(max_update / interval)
    return n * validation_updates / (n * validation_updates + max_update)


def sts_validation_cost(mode: str, sts_dev: str, data: str, words: List[str]):
    """(one STS_DEV validation's time in training updates, how that was estimated), or None: a validation
    embeds the distinct dev sentences once, forward only; an update runs forward and backward over
    its batch's views. Both counted in the data's tokens (the tokenizer that made DATA)."""
    import numpy as np

    from . import vocabulary
    from .budget import _sizes
    from .preprocessing.sts_readers import read_sts_benchmark, sts_dev_path

    kind = CONTINUED[mode].data
    if kind == "documents":  # DeCLUTR's spans: no sentence rows to compare with (the tenth's interval)
        return None
    limit = int(_given(words, "tokens-per-sample") or 512)
    pairs = read_sts_benchmark(sts_dev_path(sts_dev))
    distinct = list(dict.fromkeys(pairs.sent1 + pairs.sent2))
    tokenizer = vocabulary.find(data, "STS_DEV", None)
    dev = sum(min(len(ids) + 2, limit) for ids in tokenizer.encode_ids(distinct))  # + <s> and </s>
    body = _sizes(os.path.join(data, _given(words, "anchor-column") or "sent0") if kind == "pairs" else data)
    body = body[body > 0]
    row = float(np.minimum(body + 2, limit).mean()) if len(body) else 1.0
    batch, views = int(_given(words, "batch-size") or 1), 2  # two views (dropout, augmentations; a pair)
    update = TRAIN_PASSES * batch * views * row
    return dev / update, (f"{len(distinct):,} distinct dev sentences of {dev:,} tokens forward, against an update's "
                          f"{batch} x {views} views of {row:.0f} tokens forward and backward")


def sts_options(user: List[str], max_update: int = 0, sts_dev: str = "", keep: int = 0,
                cost: Tuple[float, str] = None) -> Tuple[List[str], List[str]]:
    """(fairseq-train options, log lines) of STS_DEV: score the start and keep the best, at an
    interval whose validations take at most STS_SHARE of the run when ``cost`` (sts_validation_cost)
    is known; of any interval saves (STS_DEV's or yours): keep ``keep`` (KEEP) interval checkpoints."""
    out, log = [], []
    if sts_dev:
        interval = sts_interval(max_update, cost[0] if cost else 0.0)
        if not _given(user, "validate-interval-updates"):
            out += ["--validate-interval-updates", str(interval)]
        if not _given(user, "save-interval-updates"):
            out += ["--save-interval-updates", str(interval)]
    if (sts_dev or _given(user, "save-interval-updates")) and not _given(user, "keep-interval-updates"):
        # fairseq keeps every interval checkpoint unless told (0 too), and at least its newest one when
        # told: the recipes remove that one at the end when KEEP is 0 (drop_interval_checkpoints, common.sh)
        out += ["--keep-interval-updates", str(max(keep, 1))]
    if sts_dev:
        out += ["--sts-validation", sts_dev, "--best-checkpoint-metric", "sts_b_spearman",
                "--maximize-best-checkpoint-metric"]
        mine = _given(user, "validate-interval-updates")
        every = f"{mine} updates (yours: --validate-interval-updates)" if mine else f"{interval} updates"
        used = int(mine) if mine.isdigit() else 0 if mine else interval  # fairseq refuses a bad one of yours
        if cost and max_update and used:
            every += (f" (one validation takes about {cost[0]:.2g} updates' time: {cost[1]}; about "
                      f"{100 * sts_share(max_update, used, cost[0]):.0f}% of the run's time)")
        log.append(f"STS dev {sts_dev}: the start is scored before the first update, then every {every}; "
                   "the best, the start included, is checkpoint_best.pt")
    else:
        log.append("no STS_DEV: the start is not scored and nothing keeps a better checkpoint; set STS_DEV= "
                   "STS-B's sts-dev.csv (or your own pairs in its format) so that the run never ends worse "
                   "than it started")
    return out, log


def options(mode: str, record: Dict[str, object], cpu: bool, user: List[str], env: Dict[str, str],
            max_update: int = 0, sts_dev: str = "", keep: int = 0, sts_cost=None) -> Tuple[List[str], List[str]]:
    """(fairseq-train options, log lines saying where each value comes from)."""
    out, log = [], []

    def put(option, value, source):
        mine = _given(user, option)
        if mine:
            log.append(f"{option.replace('-updates', '')} {mine} (yours: --{option})")
            return
        out.extend([f"--{option}", value])
        log.append(f"{option.replace('-updates', '')} {value} ({source})")

    kind = record.get("pretrained_kind")
    if kind:
        paper, values = CONTINUED[mode].paper, CONTINUED[mode].values
        dim = record.get("encoder_embed_dim") or 768
        size = "large" if dim >= LARGE_DIM else "base"
        what = "a sentence-embedding model" if kind == "sentence-embedding" else "a pre-trained encoder"
        for option, (base, large) in values.items():
            if option == "lr" and env.get("LR"):
                log.append(f"lr {env['LR']} ({env.get('CLEAR_LR_SOURCE') or 'yours: LR'})")
                continue
            put(option, base if size == "base" else large,
                f"{paper}, continued training of {what} of {size} size ({dim} wide)")
        if CONTINUED[mode].batch and not cpu:
            put("batch-size", CONTINUED[mode].batch, f"{paper}'s batch")
        if record.get("pretrained_pooling"):
            # after the recipe's settings: the same pooling on a CPU and on a GPU
            put("sentence-pooling", str(record["pretrained_pooling"]), "the model's own pooling: " + pooling_source(kind))
        if record.get("sentence_normalize"):
            log.append("unit-length vectors (the model's Normalize module): kept by embed(), clear-embed and "
                       "clear-export-hf")
    else:
        log.append("the checkpoint was not imported as a pre-trained model (no --pretrained-kind): the recipe's "
                   "own values (sized for a model trained here from scratch)")
    sts, sts_log = sts_options(user, max_update, sts_dev, keep, sts_cost)
    out += sts
    log += sts_log
    return out, log


#: an lr this many times the paper's continued-training value is a from-scratch one (the recipes'
#: CPU lr 5e-4 is 17x SimCSE's 3e-5; it took MiniLM's STS avg from 78.9 to 73.0 in 30 updates)
LR_WARN_FACTOR = 10


def lr_warning(mode: str, kind, dim, lr: float, distilling: bool = False) -> str:
    """The warning for continuing a pre-trained model (``kind``: its --pretrained-kind) in recipe
    ``mode`` (a key of CONTINUED) at ``lr``, when lr is LR_WARN_FACTOR times the paper's
    continued-training value or more; '' otherwise, for a model trained here from scratch, and for a
    student a teacher distils (``distilling``: --distill-weight or --distill-mse-weight): its terms
    hold the student to the teacher, and a cut student learns at a from-scratch lr (BENCHMARKS §12c:
    lr 1e-3)."""
    if not kind or distilling or mode not in CONTINUED or "lr" not in CONTINUED[mode].values:
        return ""
    paper, values = CONTINUED[mode].paper, CONTINUED[mode].values
    size = "large" if (dim or 768) >= LARGE_DIM else "base"
    base, large = values["lr"]
    theirs = float(base if size == "base" else large)
    if lr < LR_WARN_FACTOR * theirs:
        return ""
    what = "a sentence-embedding model" if kind == "sentence-embedding" else "a pre-trained encoder"
    return (f"--lr {lr:g} is {lr / theirs:.0f}x what {paper} uses to continue {what} of {size} size "
            f"({theirs:g}): a pre-trained model trained further at a from-scratch learning rate usually gets "
            f"worse. Pass --lr {theirs:g} (examples/pretrained/run.sh picks it), and --sts-validation "
            "sts-dev.csv --best-checkpoint-metric sts_b_spearman --maximize-best-checkpoint-metric to keep "
            "the start when nothing beats it")


def recipe_of(mode: str) -> List[str]:
    """What examples/pretrained/run.sh does for ``mode`` (``--recipe-of MODE``), one a line: how its
    corpus is prepared and its recipe under examples/ (CONTINUED's ``data`` and ``recipe``)."""
    if mode not in CONTINUED:
        raise ValueError(f"MODE must be one of {', '.join(CONTINUED)}, got '{mode}'")
    return [CONTINUED[mode].data, CONTINUED[mode].recipe]


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--recipe-of"]:  # run.sh asks the table, before any work
        try:
            print("\n".join(recipe_of(argv[1] if len(argv) > 1 else "")))
        except ValueError as e:
            sys.exit(f"error: {e}")
        return
    user = []
    if "--" in argv:
        i = argv.index("--")
        argv, user = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(prog="python -m fairseq_clear.continued", description=__doc__.split("\n\n")[0])
    p.add_argument("mode", choices=list(CONTINUED))
    p.add_argument("checkpoint")
    p.add_argument("--cpu", action="store_true")
    p.add_argument("--max-update", type=int, default=0)
    p.add_argument("--sts-dev", default="")
    p.add_argument("--data", default="", help="the binarized corpus: the budget comes from its size")
    p.add_argument("--recipe-options", default="", help="the recipe's own fairseq-train options (one string)")
    p.add_argument("--warmup-ratio", type=float, default=0.0)
    p.add_argument("--save-dir", default="", help="the run's --save-dir: its checkpoints' disk is stated and checked")
    args = p.parse_args(argv)
    if args.sts_dev and not os.path.exists(args.sts_dev):
        sys.exit(f"error: STS_DEV '{args.sts_dev}' does not exist")
    env = dict(os.environ)
    try:
        keep = keep_from(env)
    except ValueError as e:
        sys.exit(f"error: {e}")
    try:
        record = read_record(args.checkpoint) if args.checkpoint != "-" else {}
    except Exception as e:  # an unreadable checkpoint: model-args names it too
        sys.exit(f"error: cannot read '{args.checkpoint}': {e}")
    max_update = args.max_update
    budget, budget_log = [], []
    if args.data:
        # the batch and span options the run gets: the recipe's, the continued values, yours
        first, _ = options(args.mode, record, args.cpu, user, env) if record else ([], [])
        every = shlex.split(args.recipe_options) + first + user
        try:
            budget, budget_log, max_update = plan(
                args.mode, args.data, "", int(_given(every, "batch-size") or 1), args.cpu, every, env,
                args.warmup_ratio, warmup=_given(first, "warmup-updates") or None)
        except (OSError, ValueError, KeyError) as e:
            sys.exit(f"error: {e}")
    cost = None
    if args.sts_dev and args.data:  # the interval from what a validation costs against an update
        try:
            cost = sts_validation_cost(args.mode, args.sts_dev, args.data, every)
        except FairseqClearError as e:  # the run's start would refuse it too, after loading the model
            sys.exit(f"error: STS_DEV: {e}")
        except (OSError, ValueError):  # no rows to count, an option fairseq refuses: every tenth of the run
            cost = None
    if record:
        words, log = options(args.mode, record, args.cpu, user, env, max_update,
                             os.path.abspath(args.sts_dev) if args.sts_dev else "", keep, cost)
    else:
        words, log = sts_options(user, max_update, os.path.abspath(args.sts_dev) if args.sts_dev else "", keep,
                                 cost)
        log = log if args.sts_dev else []  # a model from scratch: nothing to keep from the start
    words, log = words + budget, budget_log + log
    save_dir = _given(user, "save-dir") or args.save_dir
    if save_dir:  # before training: a full disk found at the first save loses the run's time
        every = shlex.split(args.recipe_options) + words + user
        try:
            disk_log, error = checkpoint_plan(args.mode, record.get("weight_bytes"), save_dir, every, user, keep,
                                              max_update)
        except (OSError, ValueError) as e:
            error, disk_log = f"--save-dir '{save_dir}': {e}", []
        log += disk_log
        if error:
            for line in log:
                print(f"recipe: {line}", file=sys.stderr)
            sys.exit(f"error: {error}")
    bad = [w for w in words if "\n" in w or "\0" in w]
    if bad:  # one argument per line: a line break inside one would split it
        sys.exit(f"error: {bad[0]!r}: a line break in an option's value (STS_DEV?) cannot be passed to the recipe")
    for line in log:
        print(f"recipe: {line}", file=sys.stderr)
    print("\n".join(words))  # one argument per line (the recipes' mapfile): never word-split


if __name__ == "__main__":
    main()
