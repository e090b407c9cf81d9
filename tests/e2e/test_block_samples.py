"""--sample-break-mode for --task clear: 'eos' sentences, or the paper's (RoBERTa's) token blocks."""

import numpy as np
import pytest
import torch
from fairseq.data import TokenBlockDataset, data_utils

from harness.runs import build_task
from helpers import make_binarized, run_cli, synthetic_sentences, train_args

ARGS = ("--tokens-per-sample", "64", "--augmentations", "del-span,reorder")


@pytest.fixture(scope="module")
def doc_data(tmp_path_factory):
    """Documents of 5 sentences separated by empty lines (as clear-prepare writes them)."""
    lines = []
    for d, sentence in enumerate(synthetic_sentences(300, seed=3)):
        lines.append(sentence)
        if d % 5 == 4:
            lines.append("")
    return make_binarized(tmp_path_factory.mktemp("docs"), lines, synthetic_sentences(40, seed=4))


@pytest.mark.parametrize("mode", ["complete", "complete_doc", "none"])
def test_blocks_are_fairseqs_token_blocks_with_bos_and_eos(doc_data, mode):
    task, _ = build_task(doc_data, "--sample-break-mode", mode, *ARGS)
    dataset = task.datasets["train"]
    lines = data_utils.load_indexed_dataset(str(doc_data / "train"), task.source_dictionary)
    d = task.source_dictionary
    # what fairseq's masked_lm would cut (block sizes as in token_blocks)
    ref = TokenBlockDataset(lines, lines.sizes, 62 if mode == "none" else 63, d.pad(), d.eos(), break_mode=mode,
                            document_sep_len=1)
    nonempty = [i for i in range(len(ref)) if ref.sizes[i] > (0 if mode == "none" else 1)]
    n_lines = int((lines.sizes > 1).sum())
    assert len(dataset) == len(nonempty) < n_lines  # several lines per sample
    sizes = [dataset.size(i) for i in range(len(dataset))]
    assert max(sizes) <= 64 and np.mean(sizes) > 40
    # every token of the split is in exactly one block, in order (complete_doc drops the
    # document separators, as fairseq's masked_lm does)
    blocks = torch.cat([ref[i] for i in nonempty])
    kept = [lines[i] for i in range(len(lines)) if mode != "complete_doc" or lines.sizes[i] > 1]
    assert torch.equal(blocks, torch.cat(kept))
    samples = task.load_sentences("train")
    for i in range(len(samples)):
        sample = samples[i]
        assert sample[0] == d.bos() and sample[-1] == d.eos()
        body = ref[nonempty[i]]
        expected = body if mode == "none" else body[:-1]
        assert torch.equal(sample[1:-1], expected), i
    for v in dataset[0]["contrastive"]:
        assert v[0] == d.bos() and v[-1] == d.eos() and len(v) <= 64


def test_complete_doc_blocks_do_not_cross_documents(doc_data):
    task, _ = build_task(doc_data, "--sample-break-mode", "complete_doc", *ARGS)
    sentences = task.load_sentences("train")
    d = task.source_dictionary
    for i in range(len(sentences)):
        body = sentences[i][1:-1].tolist()
        # an empty line (document separator) is a lone </s>: never two </s> in a row inside a block
        assert all(not (a == d.eos() and b == d.eos()) for a, b in zip(body, body[1:])), i


def test_block_spans_are_five_percent_of_the_block(doc_data):
    """del-span's 5 spans of 5% of a 62-token body delete 4 tokens each, not 1 as in a sentence."""
    from fairseq_clear import augmentations as aug

    task, _ = build_task(doc_data, "--sample-break-mode", "complete", *ARGS)
    blocks = task.load_sentences("train")
    body = blocks[0][1:-1].numpy()
    rng = np.random.default_rng(0)
    out = aug.span_deletion(body, rng, 5, 0.05, del_idx=task.del_idx)
    assert len(body) - len(out) >= 5 * (int(np.ceil(0.05 * len(body))) - 1)


def test_paper_blocks_train_and_resume_through_fairseq_train(doc_data, tmp_path):
    save = tmp_path / "save"
    common = ("--sample-break-mode", "complete", "--augmentations", "del-span,reorder")
    run_cli(train_args(doc_data, save, *common, max_update=3))
    out = run_cli(train_args(doc_data, save, *common, max_update=5)).stdout
    assert "| train_inner |" in out and '"num_updates": "5"' in out


def test_unknown_mode_is_refused_naming_the_option(doc_data):
    with pytest.raises(ValueError, match="--sample-break-mode must be one of eos, complete, complete_doc, none"):
        build_task(doc_data, "--sample-break-mode", "sentences", *ARGS)
