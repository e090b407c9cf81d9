"""Seed 004's evaluation (§5.2): sentiment accuracy, paraphrase accuracy, STS Pearson correlation
and Overall, their plain mean (Table 1's 0.391 = mean of 0.516, 0.388, 0.270), for one
checkpoint of ``--task multitask`` or several combined (§4.2, Table 2's ensemble). A row without
one of the three metrics (a single-task model) has no Overall, as the seed's "/" (Table 2).

Predictions: the sentiment head's class; paraphrase = the bilinear logit > 0 (probability > ½);
STS = the STS head's cosine (Pearson's r does not change under its scaling to 0-5). An ensemble
is ``per-task`` (the seed's: for each task, the predictions of the checkpoint scoring best on
that task on ``select_split``) or ``average`` (the mean of the checkpoints' class
probabilities, paraphrase probabilities and cosines).

The pair tasks by cosine (:func:`evaluate_cosine`; Table 1's configuration and the §4.3 baseline):
paraphrase and STS "predicted with a cosine similarity function between the final BERT embeddings
of the sentence pairs (i.e. hidden state of the [CLS] tokens), without introducing additional
layers" (§4.3), sentiment from the same checkpoint's sentiment head. The §4.3 baseline is "the
minBERT model trained on the SST dataset", so its sentiment (0.516) is that model's classifier:
score a ``--tasks sentiment`` checkpoint. Any checkpoint the hub loads (ours of any task, an
import) has the pair tasks; one without a sentiment head has sentiment n/a and so no Overall.
STS = Pearson of the cosine with the scores; paraphrase = accuracy of ``cosine > threshold``, the
threshold the one that maximises accuracy on ``threshold_split`` (train by default, never the
scored split unless asked: up to ``threshold_rows`` of its rows, a fixed random sample; the
midpoint between two adjacent cosines, the lowest of ties; the seed does not say how it chose one).
"""

import os
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch

from ...errors import FairseqClearError
from ...models.multitask_heads import TASK_NAMES

METRICS = {"sentiment": "sentiment_acc", "paraphrase": "paraphrase_acc", "sts": "sts_pearson"}
COLUMNS = ("overall", "sentiment_acc", "paraphrase_acc", "sts_pearson")
ENSEMBLES = ("per-task", "average")
BASELINES = ("cosine",)
PAIR_MODES = ("heads", "cosine")
COSINE_TASKS = ("paraphrase", "sts")
#: rows of the threshold split whose cosines choose the paraphrase threshold (QQP's train split has 364k)
THRESHOLD_ROWS = 10000


class MultitaskEvalError(FairseqClearError, ValueError):
    """A checkpoint, data directory or option of the evaluation is unusable; the message names it."""


def accuracy(pred, labels) -> float:
    pred, labels = np.asarray(pred), np.asarray(labels)
    return float((pred == labels).mean()) if len(labels) else float("nan")


def pearson(x, y) -> float:
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(x) < 2 or x.std() == 0 or y.std() == 0:
        return float("nan")
    xc, yc = x - x.mean(), y - y.mean()
    return float((xc * yc).sum() / np.sqrt((xc * xc).sum() * (yc * yc).sum()))


def decide(task: str, scores: np.ndarray) -> np.ndarray:
    """Predictions from scores: argmax of class probabilities, probability > ½, or the cosine itself."""
    if task == "sentiment":
        return scores.argmax(-1)
    if task == "paraphrase":
        return (scores > 0.5).astype(np.int64)
    return scores


def task_metric(task: str, scores: np.ndarray, labels: np.ndarray) -> float:
    pred = decide(task, scores)
    return pearson(pred, labels) if task == "sts" else accuracy(pred, labels.astype(np.int64))


def table_row(metrics: Dict[str, float]) -> Dict[str, Optional[float]]:
    """The seed's row: the metrics present and Overall, the plain mean of all three (None when one is
    missing: never a mean of fewer)."""
    row = {METRICS[t]: metrics[t] for t in TASK_NAMES if t in metrics}
    row["overall"] = float(np.mean(list(row.values()))) if len(row) == len(TASK_NAMES) else None
    return row


@torch.no_grad()
def predict(hub, split: str, batch_size: int = 64, tasks: Sequence[str] = TASK_NAMES) -> Dict[str, Dict[str, np.ndarray]]:
    """{task: {"scores": probabilities / cosines, "labels": gold}} of the hub's model's heads of ``tasks``
    on ``split``."""
    from ...data.multitask_dataset import SUPERVISED

    task = hub.task
    if getattr(task, "name", None) != "multitask":
        raise MultitaskEvalError(f"{getattr(hub, 'checkpoint_path', 'the checkpoint')} was not trained with "
                                 f"--task multitask (its task: {getattr(task, 'name', type(task).__name__)})")
    try:
        task.load_dataset(split)
    except FileNotFoundError as e:
        raise MultitaskEvalError(str(e)) from None
    dataset = task.dataset(split)
    model = hub.model
    model.eval()
    device = next(model.parameters()).device
    out = {}
    for update in dataset.updates(1, batch_size):
        indices = [dataset.index(SUPERVISED, name, r) for _, name, rows in update for r in rows if name in tasks]
        if not indices:
            continue
        batch = dataset.collater([dataset[i] for i in indices])
        for name, part in batch["multitask"].items():
            output = model(part["src_tokens"].to(device), multitask_head=name)[0].float()
            if name == "sentiment":
                scores = torch.softmax(output, -1)
            elif name == "paraphrase":
                scores = torch.sigmoid(output)
            else:
                scores = output
            entry = out.setdefault(name, {"scores": [], "labels": []})
            entry["scores"].append(scores.cpu().numpy())
            entry["labels"].append(part["target"].numpy())
    return {name: {k: np.concatenate(v) for k, v in entry.items()} for name, entry in out.items()}


def load(checkpoint: str, data: str, device: str = "cpu"):
    from ...models.hub_interface import from_pretrained

    if not os.path.isfile(checkpoint):
        raise MultitaskEvalError(f"checkpoint '{checkpoint}' does not exist")
    hub = from_pretrained(os.path.dirname(os.path.abspath(checkpoint)), os.path.basename(checkpoint), data,
                          data_option="--data")
    return hub.to(device)


def evaluate(checkpoints: Sequence[str], data: str, split: str = "valid", ensemble: str = "per-task",
             select_split: Optional[str] = "valid", batch_size: int = 64, device: str = "cpu") -> dict:
    """Every checkpoint's row on ``split`` and, with several, the ensemble's (``ensemble``)."""
    if ensemble not in ENSEMBLES:
        raise MultitaskEvalError(f"--ensemble must be one of {', '.join(ENSEMBLES)}, got '{ensemble}'")
    if not checkpoints:
        raise MultitaskEvalError("give at least one checkpoint")
    rows, predictions, selection = [], [], []
    for path in checkpoints:
        hub = load(path, data, device)
        pred = predict(hub, split, batch_size)
        predictions.append(pred)
        metrics = {t: task_metric(t, p["scores"], p["labels"]) for t, p in pred.items()}
        rows.append({"model": path, **table_row(metrics)})
        if len(checkpoints) > 1 and ensemble == "per-task":
            chosen = pred if select_split == split else predict(hub, select_split, batch_size)
            selection.append({t: task_metric(t, p["scores"], p["labels"]) for t, p in chosen.items()})
    result = {"split": split, "rows": rows}
    final = predictions[0]
    if len(checkpoints) > 1:
        final, chosen = combine(predictions, ensemble, selection)
        metrics = {t: task_metric(t, p["scores"], p["labels"]) for t, p in final.items()}
        result["ensemble"] = {"method": ensemble, "select_split": select_split if ensemble == "per-task" else None,
                              "chosen": {t: checkpoints[i] for t, i in chosen.items()}, **table_row(metrics)}
    result["predictions"] = {t: {"pred": decide(t, p["scores"]).tolist(), "labels": p["labels"].tolist()}
                             for t, p in final.items()}
    return result


def combine(predictions: List[dict], ensemble: str, selection: List[dict]):
    """(the ensemble's {task: {"scores", "labels"}}, {task: index of the chosen checkpoint} for per-task).

    Each task comes from the checkpoints that have its head, so single-task models ensemble into
    one row (the seed's best model per task)."""
    tasks = [t for t in TASK_NAMES if any(t in p for p in predictions)]
    if not tasks:
        raise MultitaskEvalError("the checkpoints have no task head")
    out, chosen = {}, {}
    for t in tasks:
        having = [i for i, p in enumerate(predictions) if t in p]
        labels = predictions[having[0]][t]["labels"]
        if ensemble == "average":
            shapes = {np.shape(predictions[i][t]["scores"]) for i in having}
            if len(shapes) > 1:  # e.g. a 5-class and a 2-class sentiment head: no mean of their probabilities
                raise MultitaskEvalError(
                    f"--ensemble average: the checkpoints' {t} heads give scores of different shapes "
                    f"({', '.join(str(s) for s in sorted(shapes))}); average only models of the same classes, "
                    "or use --ensemble per-task")
            out[t] = {"scores": np.mean([predictions[i][t]["scores"] for i in having], axis=0), "labels": labels}
            continue
        scores = [selection[i][t] for i in having]
        best = having[int(np.nanargmax(scores))] if not all(np.isnan(scores)) else having[0]
        chosen[t] = best
        out[t] = predictions[best][t]
    return out, chosen


def read_pairs(data: str, task: str, split: str, dictionary, max_positions: int):
    """(first sentences, second sentences, labels) of ``task``'s ``split`` in clear-prepare-multitask's DATA:
    token tensors ``<s> body </s>``, bodies cut to the model's positions."""
    from ...data.binarized_checks import load_checked
    from ...data.sentence_dataset import SentenceDataset
    from ...tasks.multitask import read_labels

    root = os.path.join(data, task)
    columns = []
    for column in ("input0", "input1"):
        path = os.path.join(root, column, split)
        lines = load_checked(path, dictionary)
        if lines is None:
            raise MultitaskEvalError(f"--data: no {path}.bin/.idx (build DATA with clear-prepare-multitask)")
        rows = SentenceDataset(lines, max_body_len=max_positions - 2, bos=dictionary.bos(), eos=dictionary.eos())
        if rows.num_empty:
            raise MultitaskEvalError(f"{path} has {rows.num_empty} empty lines: rebuild DATA")
        columns.append([rows[i] for i in range(len(rows))])
    try:
        labels = read_labels(os.path.join(root, "label", f"{split}.label"), task)
    except FairseqClearError as e:
        raise MultitaskEvalError(str(e)) from None
    if not len(columns[0]) == len(columns[1]) == len(labels):
        raise MultitaskEvalError(f"{root}: {len(columns[0])}/{len(columns[1])} rows for {len(labels)} labels "
                                 f"in split {split}: rebuild DATA")
    return columns[0], columns[1], labels


def cls_cosines(hub, data: str, task: str, split: str, batch_size: int = 64, max_rows: int = 0):
    """(cosine of the two [CLS] vectors per row, labels, the two (N, dim) vector arrays); with ``max_rows``,
    of a fixed random sample of that many rows (in their order)."""
    from ...models.inference import embed_tokens

    first, second, labels = read_pairs(data, task, split, hub.task.source_dictionary, hub.model.max_positions())
    if 0 < max_rows < len(labels):
        keep = np.sort(np.random.default_rng(0).choice(len(labels), max_rows, replace=False))
        first, second, labels = [first[i] for i in keep], [second[i] for i in keep], labels[keep]
    u = embed_tokens(hub.model, first, ("cls",), head="pooled", batch_size=batch_size)["cls"].double().numpy()
    v = embed_tokens(hub.model, second, ("cls",), head="pooled", batch_size=batch_size)["cls"].double().numpy()
    norms = np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1)
    cos = np.where(norms > 0, (u * v).sum(1) / np.where(norms > 0, norms, 1.0), 0.0)
    return cos, labels, u, v


def best_threshold(cos: np.ndarray, labels: np.ndarray) -> float:
    """The threshold t maximising the accuracy of ``cos > t`` on these rows: a midpoint between two adjacent
    distinct cosines, or just below the smallest / at the largest; the lowest one of ties."""
    values = np.unique(cos)
    if not len(values):
        raise MultitaskEvalError("the paraphrase split that chooses the threshold is empty: pass another "
                                 "--threshold-split")
    candidates = np.concatenate([[values[0] - 1.0], (values[:-1] + values[1:]) / 2, [values[-1]]])
    labels = labels.astype(np.int64)
    scores = [accuracy((cos > t).astype(np.int64), labels) for t in candidates]
    return float(candidates[int(np.argmax(scores))])


def has_sentiment_head(hub) -> bool:
    return getattr(hub.task, "name", None) == "multitask" and "sentiment" in getattr(hub.task, "task_names", ())


def cosine_row(checkpoint: str, data: str, split: str = "valid", threshold_split: str = "train",
               threshold_rows: int = THRESHOLD_ROWS, batch_size: int = 64, device: str = "cpu") -> dict:
    """``checkpoint``'s row with the pair tasks by cosine (see the module's docstring)."""
    tasks = [t for t in COSINE_TASKS if os.path.isdir(os.path.join(data, t))]
    if not tasks:
        raise MultitaskEvalError(f"--data: '{data}' has neither paraphrase/ nor sts/ (clear-prepare-multitask's output)")
    hub = load(checkpoint, data, device)
    row = {"model": checkpoint, "pair_tasks": "cosine", "sentiment_acc": None}
    metrics, predictions = {}, {}
    if has_sentiment_head(hub):  # the seed's baseline: the SST-trained model's own classifier
        p = predict(hub, split, batch_size, ("sentiment",))["sentiment"]
        metrics["sentiment"] = task_metric("sentiment", p["scores"], p["labels"])
        predictions["sentiment"] = {"pred": decide("sentiment", p["scores"]).tolist(), "labels": p["labels"].tolist()}
    for task in tasks:
        cos, labels, _, _ = cls_cosines(hub, data, task, split, batch_size)
        if task == "sts":
            metrics[task] = pearson(cos, labels)
            predictions[task] = {"pred": cos.tolist(), "labels": labels.tolist()}
            continue
        chosen_on = cls_cosines(hub, data, task, threshold_split, batch_size, threshold_rows)[:2]
        threshold = best_threshold(*chosen_on)
        pred = (cos > threshold).astype(np.int64)
        metrics[task] = accuracy(pred, labels.astype(np.int64))
        row.update(threshold=threshold, threshold_split=threshold_split, threshold_rows=len(chosen_on[1]))
        predictions[task] = {"pred": pred.tolist(), "labels": labels.tolist(), "cosine": cos.tolist()}
    row.update(table_row(metrics))
    return {"row": row, "predictions": predictions}


def evaluate_cosine(checkpoints: Sequence[str], data: str, split: str = "valid", threshold_split: str = "train",
                    threshold_rows: int = THRESHOLD_ROWS, batch_size: int = 64, device: str = "cpu") -> dict:
    """One row per checkpoint with the pair tasks by cosine (no ensemble); ``predictions`` are the first one's."""
    if not checkpoints:
        raise MultitaskEvalError("give at least one checkpoint")
    if threshold_rows < 0:
        raise MultitaskEvalError(f"--threshold-rows must be >= 0 (0 = all), got {threshold_rows}")
    chooser = os.path.join(data, "paraphrase", "label", f"{threshold_split}.label")
    if os.path.isdir(os.path.join(data, "paraphrase")) and not os.path.isfile(chooser):
        raise MultitaskEvalError(f"--threshold-split {threshold_split}: no {chooser} (the paraphrase split that "
                                 "chooses the threshold)")
    results = [cosine_row(c, data, split, threshold_split, threshold_rows, batch_size, device) for c in checkpoints]
    return {"split": split, "pair_tasks": "cosine", "rows": [r["row"] for r in results],
            "predictions": results[0]["predictions"],
            "note": "sentiment from the checkpoint's sentiment head (n/a without one, and then no Overall); "
                    "paraphrase and STS from the cosine of the two [CLS] vectors, no pair heads"}


def format_table(result: dict) -> str:
    """The seed's table: Method, Overall, Sentiment Cls. Acc., Paraphrase Acc., STS Corr."""
    from ..row_names import unique_names

    header = ["Method", "Overall", "Sentiment Cls. Acc.", "Paraphrase Acc.", "STS Corr."]
    lines = []
    # a checkpoint's row: its file name without .pt, and folders when another row shares it (one checkpoint
    # given twice: numbered)
    names = unique_names([os.path.splitext(r["model"])[0] for r in result["rows"]])
    entries = list(zip(names, result["rows"]))
    if "ensemble" in result:
        entries.append((f"Ensemble ({result['ensemble']['method']})", result["ensemble"]))
    width = max(len(header[0]), *(len(name) for name, _ in entries))
    lines.append(f"{header[0]:<{width}}  " + "  ".join(f"{h:>19}" for h in header[1:]))
    for name, r in entries:
        cells = [("n/a" if c in r else "-") if r.get(c) is None else format(r[c], ".3f") for c in COLUMNS]
        lines.append(f"{name:<{width}}  " + "  ".join(f"{v:>19}" for v in cells))
    if result.get("pair_tasks") == "cosine":
        rows = [r for r in result["rows"] if "threshold" in r]
        chosen = "; paraphrase threshold " + ", ".join(f"{r['threshold']:.4f}" for r in rows) + (
            f", chosen on {rows[0]['threshold_split']} ({rows[0]['threshold_rows']} rows"
            + (", the scored split: optimistic)" if rows[0]["threshold_split"] == result["split"] else ")")) \
            if rows else ""
        headless = any(r["sentiment_acc"] is None for r in result["rows"])
        lines.append(f"({result['split']} split; paraphrase and STS by the cosine of the two [CLS] vectors, no pair "
                     "heads; sentiment by the checkpoint's sentiment head"
                     + (" (n/a: none, so no Overall; the seed's §4.3 baseline is the SST-trained model, a --tasks "
                        "sentiment checkpoint)" if headless else "")
                     + chosen + "; Overall = the plain mean of the three metrics)")
    else:
        lines.append(f"({result['split']} split; Overall = the plain mean of the three metrics)")
    return "\n".join(lines)


def write_json(result: dict, path: str):
    from ...atomic_files import write_json as atomic_json

    atomic_json(path, result)
