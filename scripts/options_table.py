#!/usr/bin/env python
"""Print markdown tables of the plugin's options (name, default, help) from the code itself.

    python scripts/options_table.py > /tmp/options.md

The README's option tables are produced by this script, so they cannot drift
from the dataclass defaults and help strings.
"""

import argparse
import dataclasses
import sys


import fairseq_clear  # noqa: F401  (registers everything)
from fairseq_clear.criterions.clear import ClearCriterionConfig
from fairseq_clear.models.clear_roberta import ClearRobertaModel, base_clear_architecture
from fairseq_clear.tasks.clear import ClearConfig
from fairseq_clear.tasks.contrastive import ContrastiveConfig
from fairseq_clear.tasks.contrastive_pairs import ContrastivePairsConfig
from fairseq_clear.tasks.declutr import DeclutrConfig
from fairseq.models.roberta import RobertaModel
from fairseq.tasks.masked_lm import MaskedLMConfig


def dataclass_rows(cls, skip=()):
    rows = []
    for f in dataclasses.fields(cls):
        if f.name in skip or f.name.startswith("_"):
            continue
        help_text = f.metadata.get("help")
        if help_text is None:
            continue
        default = f.default if f.default is not dataclasses.MISSING else ""
        rows.append((f"--{f.name.replace('_', '-')}", repr(default) if isinstance(default, str) else default, help_text))
    return rows


def table(title, rows):
    out = [f"**{title}**", "", "| option | default | meaning |", "|---|---|---|"]
    for name, default, text in rows:
        text = " ".join(str(text).split()).replace("|", "\\|")
        out.append(f"| `{name}` | `{default}` | {text} |")
    return "\n".join(out) + "\n"


def main():
    base = {f.name for f in dataclasses.fields(MaskedLMConfig)}
    shared = {f.name for f in dataclasses.fields(ContrastiveConfig)}
    common_rows = dataclass_rows(ContrastiveConfig, skip=base - {"tokens_per_sample"})
    # each task's table lists only the options it reads (the others are refused at start-up)
    clear_rows = dataclass_rows(ClearConfig, skip=shared - {"sample_break_mode"})
    mlm_rows = [r for r in dataclass_rows(MaskedLMConfig) if r[0] in (
        "--mask-prob", "--leave-unmasked-prob", "--random-token-prob", "--freq-weighted-replacement")]
    crit_rows = dataclass_rows(ClearCriterionConfig)

    declutr_rows = dataclass_rows(DeclutrConfig, skip=shared)
    pairs_rows = dataclass_rows(ContrastivePairsConfig, skip=shared)

    parser = argparse.ArgumentParser()
    ClearRobertaModel.add_args(parser)
    roberta = argparse.ArgumentParser()
    RobertaModel.add_args(roberta)
    ours = {a.option_strings[0] for a in parser._actions if a.option_strings} - {
        a.option_strings[0] for a in roberta._actions if a.option_strings}
    defaults = argparse.Namespace()
    base_clear_architecture(defaults)
    model_rows = [
        (a.option_strings[0], getattr(defaults, a.dest, ""), a.help)
        for a in parser._actions
        if a.option_strings and a.option_strings[0] in ours
    ]

    sys.stdout.write(table("Every contrastive task (`clear`, `declutr`, `contrastive_pairs`)", common_rows) + "\n")
    sys.stdout.write(table("Task `clear` adds (augmented contrastive denoising)", clear_rows) + "\n")
    sys.stdout.write(table("Task `declutr` adds", declutr_rows) + "\n")
    sys.stdout.write(table("Task `contrastive_pairs` adds", pairs_rows) + "\n")
    sys.stdout.write(table("Masked LM (fairseq's `masked_lm` options, paper values)", mlm_rows) + "\n")
    sys.stdout.write(table("Criterion `clear`", crit_rows) + "\n")
    sys.stdout.write(table("Model `clear_roberta` (added to fairseq's RoBERTa options)", model_rows))


if __name__ == "__main__":
    main()
