"""Seed 004's evaluation (§5.2): sentiment accuracy, paraphrase accuracy, STS Pearson correlation
and Overall, their plain mean (Table 1's 0.391 = mean of 0.516, 0.388, 0.270), for one
checkpoint of ``--task multitask`` or several combined (§4.2, Table 2's ensemble).

Predictions: the sentiment head's class; paraphrase = the bilinear logit > 0 (probability > ½);
STS = the STS head's cosine (Pearson's r does not change under its scaling to 0-5). An ensemble
is ``per-task`` (the seed's: for each task, the predictions of the checkpoint scoring best on
that task on ``select_split``) or ``average`` (the mean of the checkpoints' class
probabilities, paraphrase probabilities and cosines).

The cosine baseline (§4.3, ``baseline="cosine"``): any checkpoint the hub loads (ours of any task,
an import), no heads and no training: the cosine of the two sentences' [CLS] vectors (the encoder's
output at ``<s>``, no projection). STS = Pearson of that cosine with the scores; paraphrase =
accuracy of ``cosine > threshold``, the threshold the one that maximises accuracy on the dev split
(``select_split``; the midpoint between two adjacent dev cosines, the lowest of ties; the seed does
not say how it chose one); sentiment has no cosine baseline (the seed's table: n/a), so Overall is
the mean of paraphrase and STS only.
"""

import json
import os
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch

from ..errors import FairseqClearError
from ..models.multitask_heads import TASK_NAMES

METRICS = {"sentiment": "sentiment_acc", "paraphrase": "paraphrase_acc", "sts": "sts_pearson"}
COLUMNS = ("overall", "sentiment_acc", "paraphrase_acc", "sts_pearson")
ENSEMBLES = ("per-task", "average")
BASELINES = ("cosine",)
COSINE_TASKS = ("paraphrase", "sts")


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


def table_row(metrics: Dict[str, float]) -> Dict[str, float]:
    """The seed's row: the three metrics present and Overall, their plain mean."""
    row = {METRICS[t]: metrics[t] for t in TASK_NAMES if t in metrics}
    values = list(row.values())
    row["overall"] = float(np.mean(values)) if values else float("nan")
    return row


@torch.no_grad()
def predict(hub, split: str, batch_size: int = 64) -> Dict[str, Dict[str, np.ndarray]]:
    """{task: {"scores": probabilities / cosines, "labels": gold}} of the hub's model on ``split``."""
    from ..data.multitask_dataset import SUPERVISED

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
        indices = [dataset.index(SUPERVISED, name, r) for _, name, rows in update for r in rows]
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
    from ..models.hub_interface import from_pretrained

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
    from ..data.binarized_checks import load_checked
    from ..data.sentence_dataset import SentenceDataset
    from ..tasks.multitask import read_labels

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


def cls_cosines(hub, data: str, task: str, split: str, batch_size: int = 64):
    """(cosine of the two [CLS] vectors per row, labels, the two (N, dim) vector arrays)."""
    from ..models.inference import embed_tokens

    first, second, labels = read_pairs(data, task, split, hub.task.source_dictionary, hub.model.max_positions())
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
        raise MultitaskEvalError("the paraphrase dev split is empty: no threshold to choose")
    candidates = np.concatenate([[values[0] - 1.0], (values[:-1] + values[1:]) / 2, [values[-1]]])
    labels = labels.astype(np.int64)
    scores = [accuracy((cos > t).astype(np.int64), labels) for t in candidates]
    return float(candidates[int(np.argmax(scores))])


def cosine_baseline(checkpoint: str, data: str, split: str = "valid", select_split: str = "valid",
                    batch_size: int = 64, device: str = "cpu") -> dict:
    """The seed's §4.3 baseline row of ``checkpoint`` (see the module's docstring)."""
    hub = load(checkpoint, data, device)
    row = {"model": checkpoint, "baseline": "cosine", "sentiment_acc": None}
    meta = {}
    tasks = [t for t in COSINE_TASKS if os.path.isdir(os.path.join(data, t))]
    if not tasks:
        raise MultitaskEvalError(f"--data: '{data}' has neither paraphrase/ nor sts/ (clear-prepare-multitask's output)")
    metrics, predictions = {}, {}
    for task in tasks:
        cos, labels, _, _ = cls_cosines(hub, data, task, split, batch_size)
        if task == "sts":
            metrics[task] = pearson(cos, labels)
            predictions[task] = {"pred": cos.tolist(), "labels": labels.tolist()}
            continue
        dev_cos, dev_labels = (cos, labels) if select_split == split else cls_cosines(
            hub, data, task, select_split, batch_size)[:2]
        threshold = best_threshold(dev_cos, dev_labels)
        pred = (cos > threshold).astype(np.int64)
        metrics[task] = accuracy(pred, labels.astype(np.int64))
        meta = {"threshold": threshold, "threshold_split": select_split}
        predictions[task] = {"pred": pred.tolist(), "labels": labels.tolist(), "cosine": cos.tolist()}
    row.update(table_row(metrics))
    row.update(meta)
    return {"row": row, "predictions": predictions}


def evaluate_baseline(checkpoints: Sequence[str], data: str, split: str = "valid", select_split: str = "valid",
                      batch_size: int = 64, device: str = "cpu") -> dict:
    """One cosine-baseline row per checkpoint (no ensemble); ``predictions`` are the first one's."""
    if not checkpoints:
        raise MultitaskEvalError("give at least one checkpoint")
    results = [cosine_baseline(c, data, split, select_split, batch_size, device) for c in checkpoints]
    return {"split": split, "baseline": "cosine", "rows": [r["row"] for r in results],
            "predictions": results[0]["predictions"],
            "note": "cosine of the two [CLS] vectors: no sentiment score (n/a); Overall = mean of paraphrase "
                    "and STS only"}


def format_table(result: dict) -> str:
    """The seed's table: Method, Overall, Sentiment Cls. Acc., Paraphrase Acc., STS Corr."""
    header = ["Method", "Overall", "Sentiment Cls. Acc.", "Paraphrase Acc.", "STS Corr."]
    lines = []
    entries = [(r["model"], r) for r in result["rows"]]
    if "ensemble" in result:
        entries.append((f"Ensemble ({result['ensemble']['method']})", result["ensemble"]))
    width = max(len(header[0]), *(len(name) for name, _ in entries))
    lines.append(f"{header[0]:<{width}}  " + "  ".join(f"{h:>19}" for h in header[1:]))
    for name, r in entries:
        cells = [("n/a" if c in r else "-") if r.get(c) is None else format(r[c], ".3f") for c in COLUMNS]
        lines.append(f"{name:<{width}}  " + "  ".join(f"{v:>19}" for v in cells))
    if result.get("baseline") == "cosine":
        thresholds = ", ".join(f"{r['threshold']:.4f}" for r in result["rows"] if "threshold" in r)
        lines.append(f"({result['split']} split; cosine baseline: the cosine of the two [CLS] vectors, no heads; "
                     "sentiment n/a; Overall = the mean of paraphrase and STS only"
                     + (f"; paraphrase threshold {thresholds}, chosen on {result['rows'][0]['threshold_split']}"
                        if thresholds else "") + ")")
    else:
        lines.append(f"({result['split']} split; Overall = the plain mean of the three metrics)")
    return "\n".join(lines)


def write_json(result: dict, path: str):
    tmp = path + ".partial"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)
