"""InfoCSE's sentence-conditioned MLM (--sentence-mlm-layers / --sentence-mlm-weight): the term equals a
hand computation, it reaches the encoder only through the sentence vector, off it changes neither the
model nor the loss, and a checkpoint with the decoder trains, saves and loads."""

import math

import criterion_helpers as ch
import pytest
import torch
import torch.nn.functional as F
from helpers import run_cli, train_args

pytestmark = pytest.mark.xdist_group("test_sentence_mlm")


@pytest.fixture(scope="module")
def base(tiny_data):
    torch.manual_seed(0)
    return ch.build(tiny_data, "--mlm", "off")


@pytest.fixture(scope="module")
def decoder(tiny_data):
    torch.manual_seed(0)  # as ``base``: the weights they share start equal
    return ch.build(tiny_data, "--mlm", "off", "--sentence-mlm-layers", "1")


def _masked(src, dictionary, prob, seed):
    """The criterion's draw written out: each token but <s>, </s>, padding and the augmentations' [DEL]
    masked with ``prob``."""
    torch.manual_seed(seed)
    draw = torch.rand(src.shape) < prob
    fixed = [dictionary.bos(), dictionary.eos(), dictionary.pad(), dictionary.index("[DEL]")]
    assert dictionary.index("[DEL]") != dictionary.unk() and src.eq(fixed[-1]).any()  # CLEAR's views delete
    return draw & torch.stack([src.ne(i) for i in fixed]).all(0)


def _layer_by_hand(layer, x, pad):
    """A post-LN transformer layer (attention over the unpadded positions, then the feed-forward block)."""
    b, t, d = x.shape
    heads = layer.self_attn.num_heads
    q, k, v = (x @ layer.self_attn.in_proj_weight.t() + layer.self_attn.in_proj_bias).split(d, dim=-1)
    q, k, v = (y.view(b, t, heads, d // heads).transpose(1, 2) for y in (q, k, v))
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(d // heads)
    scores = scores.masked_fill(pad[:, None, None, :], float("-inf"))
    attended = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
    x = layer.norm1(x + layer.self_attn.out_proj(attended))
    return layer.norm2(x + layer.linear2(F.gelu(layer.linear1(x))))


def test_the_term_equals_a_hand_computation(decoder):
    task, model, _ = decoder
    criterion = ch.criterion(decoder, sentence_mlm_weight=0.5, sentence_mlm_prob=0.4)
    sample = ch.batch(task, range(5))
    model.eval()  # no dropout: the mask is the only draw
    torch.manual_seed(7)
    loss, sample_size, logs = criterion(model, sample)
    views = sample["contrastive"]
    src = views["src_tokens"][: views["num_anchors"]]
    dictionary = task.source_dictionary
    masked = _masked(src, dictionary, 0.4, seed=7)
    assert masked.any()
    with torch.no_grad():
        s = model.sentence_representation(src)  # the representation, before the projection head
        tokens = src.masked_fill(masked, dictionary.index("<mask>"))
        x = model.encoder.sentence_encoder.forward_embedding(tokens)[0]
        x = torch.cat([s[:, None], x[:, 1:]], dim=1)  # the sentence vector in place of <s>
        for layer in model.sentence_decoder.layers:
            x = _layer_by_hand(layer, x, tokens.eq(dictionary.pad()))
        log_p = model.encoder.lm_head(x[masked]).log_softmax(-1)
        expected = -log_p.gather(1, src[masked][:, None]).sum()
    assert logs["n_smlm"].item() == int(masked.sum())
    assert logs["smlm_loss"].item() == pytest.approx(expected.item(), rel=1e-4)
    # L = λ·L_CL + w · (its mean over its masked tokens) per unit of sample_size (anchors: --mlm off)
    assert loss.item() == pytest.approx(logs["cl_loss"].item() + 0.5 * expected.item() * float(sample_size)
                                        / int(masked.sum()), rel=1e-5)


def test_the_term_reaches_the_encoder_only_through_the_sentence_vector(decoder, base):
    task, model, _ = decoder
    src = ch.batch(task, range(4))["contrastive"]["src_tokens"][:4]
    masked = _masked(src, task.source_dictionary, 0.4, seed=1)
    model.train()
    captured = []
    original = model.sentence_representation
    model.sentence_representation = lambda *a, **k: captured.append(original(*a, **k)) or captured[-1]
    try:
        logits = model(src, sentence_mlm=(src.masked_fill(masked, task.mask_idx), masked))[0]
    finally:
        del model.sentence_representation
    term = F.cross_entropy(logits, src[masked], reduction="sum")
    (s,) = captured
    # every encoder weight but the token table (tied to the LM head's output): positions, layers, norms
    names = [n for n, p in model.named_parameters() if n.startswith("encoder.sentence_encoder.")
             and "embed_tokens" not in n]
    params = [dict(model.named_parameters())[n] for n in names]
    direct = torch.autograd.grad(term, params + [s], allow_unused=True, retain_graph=True)
    via_vector = torch.autograd.grad(s, params, grad_outputs=direct[-1], allow_unused=True)
    assert direct[-1].abs().sum() > 0
    for name, got, chained in zip(names, direct[:-1], via_vector):
        got = torch.zeros_like(chained) if got is None else got
        torch.testing.assert_close(got, chained, msg=f"{name}: a gradient that bypasses the sentence vector")
    # through the criterion with the token-level MLM off: the decoder and the LM head train only by the term
    criterion = ch.criterion(decoder, sentence_mlm_weight=1.0)
    model.zero_grad(set_to_none=True)
    logs, _ = ch.forward(criterion, model, ch.batch(task, range(6)))
    assert logs["n_masked"] == 0 and logs["smlm_loss"] > 0
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.sentence_decoder.parameters())
    assert model.encoder.lm_head.dense.weight.grad.abs().sum() > 0
    plain = base[1]
    plain.zero_grad(set_to_none=True)
    ch.forward(ch.criterion(base), plain, ch.batch(task, range(6)))
    assert plain.encoder.lm_head.dense.weight.grad is None  # without the term nothing reaches it


def test_off_the_model_and_the_loss_are_as_before(base, decoder):
    task, plain, _ = base
    model = decoder[1]
    keys, with_decoder = set(plain.state_dict()), model.state_dict()
    assert not any("sentence_decoder" in k for k in keys)
    assert set(with_decoder) - keys and all(k.startswith("sentence_decoder.") for k in set(with_decoder) - keys)
    assert keys <= set(with_decoder)
    # built last: every other weight starts as without it
    plain_state = plain.state_dict()
    assert all(torch.equal(plain_state[k], with_decoder[k]) for k in keys)
    sample = ch.batch(task, range(8, 14))
    default, _ = ch.forward(ch.criterion(base), plain, sample, seed=3)
    after_default = torch.get_rng_state()
    explicit, _ = ch.forward(ch.criterion(base, sentence_mlm_weight=0.0), plain, sample, seed=3)
    assert torch.equal(torch.get_rng_state(), after_default)  # no extra draw
    assert default["loss"].item() == explicit["loss"].item() and "smlm_loss" not in explicit
    # on: the contrastive term itself is unchanged, bit for bit (the decoder's forward comes after it)
    on, _ = ch.forward(ch.criterion(decoder, sentence_mlm_weight=1.0), model, sample, seed=3)
    assert on["cl_loss"].item() == default["cl_loss"].item()
    assert on["loss"].item() > default["loss"].item()


def test_with_mlm_chunks_the_term_runs_a_chunk_of_anchors_at_a_time(tiny_data):
    """--mlm-chunk-size K: the decoder's forward sees at most K anchors at a time (its activations those of
    K rows, as CLEAR's MLM term), and the loss and every gradient equal the unchunked run's (no dropout)."""
    torch.manual_seed(0)
    built = ch.build(tiny_data, "--mlm", "off", "--sentence-mlm-layers", "1", "--dropout", "0",
                     "--attention-dropout", "0")
    task, model, _ = built
    sample = ch.batch(task, range(8))
    results = []
    for chunk in (0, 3):
        rows = []
        forward = model.forward

        def counting(src, *args, **kwargs):
            if kwargs.get("sentence_mlm") is not None:
                rows.append(src.size(0))
            return forward(src, *args, **kwargs)

        model.forward = counting
        try:
            model.zero_grad(set_to_none=True)
            logs, _ = ch.forward(ch.criterion(built, sentence_mlm_weight=1.0, mlm_chunk_size=chunk), model, sample)
        finally:
            del model.forward
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        results.append((logs, grads, rows))
    (plain, plain_grads, plain_rows), (chunked, chunked_grads, chunked_rows) = results
    assert plain_rows == [8] and max(chunked_rows) <= 3 and sum(chunked_rows) >= 8, (plain_rows, chunked_rows)
    assert chunked["smlm_loss"] == pytest.approx(plain["smlm_loss"], rel=1e-5) and plain["smlm_loss"] > 0
    assert chunked["n_smlm"] == plain["n_smlm"]
    assert set(chunked_grads) == set(plain_grads) and any("sentence_decoder" in n for n in plain_grads)
    for name, grad in plain_grads.items():
        torch.testing.assert_close(chunked_grads[name], grad, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize("changes,message", [
    ({"sentence_mlm_weight": 1.0}, "--sentence-mlm-weight needs the model's decoder: give --sentence-mlm-layers"),
    ({"sentence_mlm_weight": 1.0, "cl_weight": 0.0}, "--sentence-mlm-weight predicts the contrastive views' tokens"),
    ({"sentence_mlm_weight": 1.0, "sentence_mlm_prob": 0.0}, "--sentence-mlm-prob must be in (0, 1], got 0.0"),
])
def test_a_term_without_its_decoder_or_views_is_refused_at_start_up(base, changes, message):
    """Refused when the criterion is built (fairseq-train's start-up), not at the first forward."""
    from fairseq_clear.criterions.clear import ClearCriterionError

    with pytest.raises(ClearCriterionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ch.criterion(base, **changes)


def test_a_term_on_anchors_the_mlm_masked_is_refused(tiny_data):
    """DeCLUTR's contrastive anchors are, by default, the MLM's masked anchors: the term's targets would be
    <mask> and MLM's random replacements. Refused at start-up, naming the way out; the clean anchors
    (--contrast-clean-anchors) and --mlm off start."""
    from fairseq_clear.criterions.clear import ClearCriterionError
    from fairseq_clear.criterions.clear_config import ClearCriterionConfig, check_config
    from fairseq_clear.tasks.declutr import DeclutrConfig, DeclutrTask

    options = dict(data=str(tiny_data), seed=1, tokens_per_sample=64, min_span_length=4, max_span_length=16)
    cfg = ClearCriterionConfig(sentence_mlm_weight=1.0, temperature=0.05)  # (its default: the paper's, filled later)
    masked = DeclutrTask.setup_task(DeclutrConfig(**options))
    assert masked.uses_mlm and masked.contrastive_views_masked
    with pytest.raises(ClearCriterionError, match="^--sentence-mlm-weight predicts the anchor views' tokens, and "
                       "this task's anchors are the MLM's masked ones .* give --contrast-clean-anchors, or --mlm off$"):
        check_config(cfg, masked, 1)
    for fix in ({"contrast_clean_anchors": True}, {"mlm": "off"}):
        task = DeclutrTask.setup_task(DeclutrConfig(**options, **fix))
        assert not task.contrastive_views_masked
        check_config(cfg, task, 1)


def test_a_decoder_without_its_term_or_of_three_layers_is_refused(decoder, tiny_data):
    from fairseq_clear.criterions.clear import ClearCriterionError
    from fairseq_clear.models.clear_roberta import SentenceDecoderError

    task, model, _ = decoder
    with pytest.raises(ClearCriterionError, match="--sentence-mlm-layers builds a decoder that only"):
        ch.forward(ch.criterion(decoder), model, ch.batch(task, range(4)))
    with pytest.raises(SentenceDecoderError, match="--sentence-mlm-layers must be 0, 1 or 2, got 3"):
        ch.build(tiny_data, "--sentence-mlm-layers", "3")


def test_a_checkpoint_with_the_decoder_trains_saves_and_loads(tiny_data, tmp_path):
    from fairseq_clear.checkpoint_safety import safe_load
    from fairseq_clear.models import ClearRobertaModel

    run_cli(train_args(tiny_data, tmp_path, "--mlm", "off", "--sentence-mlm-layers", "2",
                       "--sentence-mlm-weight", "1", max_update=2, batch_size=8))
    state = safe_load(str(tmp_path / "checkpoint_last.pt"))
    saved = {k: v for k, v in state["model"].items() if k.startswith("sentence_decoder.")}
    assert any(k.startswith("sentence_decoder.layers.1.") for k in saved)
    hub = ClearRobertaModel.from_pretrained(tmp_path, "checkpoint_last.pt", tiny_data)
    loaded = hub.model.state_dict()
    assert all(torch.equal(loaded[k], v) for k, v in saved.items())
    assert len(hub.embed(["a small test sentence"])[0]) > 0
    # its size is checked before anything is built, as the other heads' (checkpoint_sizes)
    from fairseq_clear.checkpoint_sizes import CheckpointSizeError, check_sizes

    check_sizes(state, "ckpt.pt")
    state["cfg"]["model"].sentence_mlm_layers = 100_000
    with pytest.raises(CheckpointSizeError, match="sentence_mlm_layers is 100000, outside 1..2"):
        check_sizes(state, "ckpt.pt")
    state["cfg"]["model"].sentence_mlm_layers = 2
    # a model without the decoder (another task, --sentence-mlm-layers 0) loads the rest and drops it
    plain = ch.build(tiny_data, "--mlm", "off")[1]
    plain.load_state_dict(dict(state["model"]), strict=True)
    assert not any("sentence_decoder" in k for k in plain.state_dict())
