"""RoBERTa with a projection head for contrastive sentence-level training (CLEAR §3.1).

``ClearRobertaModel`` *is* fairseq's ``RobertaModel`` (same encoder, LM head,
classification heads and hub methods) plus:

* the nonlinear projection head g(·) of the paper (dense → activation → dense),
  used only by the contrastive loss;
* a sentence representation: the ``<s>`` ([CLS]) output (the paper) or the mean
  of the outputs over real tokens;
* optionally, CLSR's sentence encoder e(·) (Wu-style MLP over a frozen encoder's
  pooled embedding, seed 003 §3), whose output then *is* the representation;
* optionally, InfoCSE's decoder (``--sentence-mlm-layers``): the masked sentence's tokens
  predicted from its sentence vector (:meth:`ClearRobertaModel.sentence_mlm_output`).

The heads exist only when the task trains contrastively. Fine-tuning a CLEAR
checkpoint with fairseq's ``sentence_prediction`` task therefore builds a plain
RoBERTa, and the projection head's weights are dropped from the checkpoint on
load (logged), so they never reach DDP as unused parameters.
"""

import logging

import torch
import torch.nn as nn
import torch.nn.functional as F
from fairseq import utils
from fairseq.models import register_model, register_model_architecture
from fairseq.models.roberta import RobertaModel
from fairseq.models.roberta.model import (
    RobertaEncoder,
    base_architecture,
    roberta_large_architecture,
)
from fairseq.utils import safe_getattr, safe_hasattr
from omegaconf import OmegaConf

from .. import paper_defaults
from ..vocabulary import APPENDED_SYMBOLS
from .dense import SentenceDense, parse as parse_dense
from .errors import DictionarySizeError  # noqa: F401  (re-exported)
from .pooling import (  # noqa: F401  (re-exported)
    HEAD_CHOICES, POOLING_CHOICES, PRETRAINED_KINDS, SIMILARITY_FUNCTIONS, check_head_name, own_pooling, pool)
from ..errors import FairseqClearError

logger = logging.getLogger(__name__)

def _plain_encoder(model) -> bool:
    # the [CLS]-only shortcut replays fairseq's post/pre-LN encoder layer; anything else
    # (another layer class, fc results requested) takes the ordinary forward
    from fairseq.modules.transformer_layer import TransformerEncoderLayerBase

    layers = getattr(model.encoder.sentence_encoder, "layers", None)
    return bool(layers) and all(
        type(layer).forward is TransformerEncoderLayerBase.forward and not getattr(layer, "return_fc", False)
        for layer in layers
    )


def _last_layer_cls(layer, x, padding_mask):
    """fairseq's TransformerEncoderLayerBase.forward for the <s> position only.

    Keys and values still come from every position; only the query, the
    feed-forward block and the layer norms shrink to one row. For [CLS]
    pooling the top layer's other rows are never used, so this is exact and
    saves most of one layer (about 1/7 of a 6-layer encoder's work).
    """
    residual = x[:1]
    kv = layer.self_attn_layer_norm(x) if layer.normalize_before else x
    y, _ = layer.self_attn(
        query=kv[:1], key=kv, value=kv, key_padding_mask=padding_mask, need_weights=False
    )
    y = layer.residual_connection(layer.dropout_module(y), residual)
    if not layer.normalize_before:
        y = layer.self_attn_layer_norm(y)
    residual = y
    if layer.normalize_before:
        y = layer.final_layer_norm(y)
    y = layer.fc2(layer.activation_dropout_module(layer.activation_fn(layer.fc1(y))))
    y = layer.residual_connection(layer.dropout_module(y), residual)
    if not layer.normalize_before:
        y = layer.final_layer_norm(y)
    return y


class ProjectionHead(nn.Module):
    """g(·): ``layers`` dense layers with ``activation`` between them (1 = linear, as CLSR's h)."""

    def __init__(self, input_dim, hidden_dim, output_dim, activation_fn, layers=2,
                 output_activation_fn="linear"):
        super().__init__()
        dims = [input_dim] + [hidden_dim] * (layers - 1) + [output_dim]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.activation_fn = utils.get_activation_fn(activation_fn)
        # SimCSE's head is dense -> tanh: one layer with an output activation
        self.output_activation_fn = utils.get_activation_fn(output_activation_fn)

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            if i > 0:
                x = self.activation_fn(x)
            x = layer(x)
        return self.output_activation_fn(x)


class SentenceDecoderError(FairseqClearError, ValueError):
    """--sentence-mlm-layers that cannot build InfoCSE's decoder; the message names the option."""


class SentenceDecoder(nn.Module):
    """InfoCSE's MLM network over the sentence vector (Wu et al., Findings of EMNLP 2022; its code's
    ``--n_head_layers 2``): ``layers`` transformer layers of the encoder's sizes (post-LN, as RoBERTa)."""

    def __init__(self, args, layers):
        super().__init__()
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(args.encoder_embed_dim, args.encoder_attention_heads,
                                       args.encoder_ffn_embed_dim, args.dropout,
                                       activation=utils.get_activation_fn(args.activation_fn),
                                       layer_norm_eps=args.layernorm_eps, batch_first=True)
            for _ in range(layers))

    def forward(self, x, padding_mask):
        for layer in self.layers:
            x = layer(x, src_key_padding_mask=padding_mask)
        return x


class SentenceMLP(nn.Module):
    """CLSR's encoder e(·): one hidden layer with ReLU (seed 003 §3)."""

    def __init__(self, input_dim, hidden_dim, output_dim):
        super().__init__()
        self.fc1 = nn.Linear(input_dim, hidden_dim)
        self.fc2 = nn.Linear(hidden_dim, output_dim)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


#: model options whose default is the task's paper value
@register_model("clear_roberta")
class ClearRobertaModel(RobertaModel):
    @staticmethod
    def add_args(parser):
        RobertaModel.add_args(parser)
        parser.add_argument(
            "--sentence-pooling",
            choices=POOLING_CHOICES,
            help="sentence representation for the contrastive loss and the default of "
            "embed(): the <s> ([CLS]) output (CLEAR) or the mean over tokens "
            "(DeCLUTR, CLSR) (default: the task's paper value: cls for CLEAR and SimCSE, mean for "
            "DeCLUTR and CLSR)",
        )
        parser.add_argument(
            "--projection-layers",
            type=int,
            help="layers of the projection head g: 2 = dense-activation-dense (CLEAR, "
            "SimCLR), 1 = linear (CLSR's h) or SimCSE's dense+tanh, 0 = no head (DeCLUTR) (default: "
            "the task's paper value)",
        )
        parser.add_argument(
            "--projection-hidden-dim",
            type=int,
            help="hidden size of g (default: --encoder-embed-dim)",
        )
        parser.add_argument(
            "--projection-dim",
            type=int,
            help="output size of g, the space where NT-Xent is computed "
            "(default: --encoder-embed-dim)",
        )
        parser.add_argument(
            "--projection-activation-fn",
            choices=utils.get_available_activation_fns(),
            help="activation inside g (default: relu, as SimCLR)",
        )
        parser.add_argument(
            "--projection-output-activation-fn",
            choices=utils.get_available_activation_fns(),
            help="activation after g's last layer: linear (CLEAR, CLSR) or tanh (SimCSE's "
            "dense-tanh head with --projection-layers 1) (default: the task's paper value)",
        )
        parser.add_argument(
            "--freeze-encoder",
            action="store_true",
            help="CLSR: keep the transformer encoder fixed (no gradient, no dropout); "
            "only the heads train",
        )
        parser.add_argument(
            "--sentence-mlp-hidden-dim",
            type=int,
            help="CLSR: hidden size of the sentence encoder e over the pooled embedding; "
            "0 = no e (default: 0)",
        )
        parser.add_argument(
            "--sentence-mlp-dim",
            type=int,
            help="CLSR: output size of e, the sentence representation "
            "(default: --encoder-embed-dim)",
        )
        # what the starting model is, recorded by clear-import-hf and carried through training
        # (cli.glue model-args): the user's model keeps its own sentence head unless told otherwise
        parser.add_argument(
            "--sentence-normalize",
            action="store_true",
            help="the sentence vectors are unit length (a sentence-transformers Normalize module, "
            "recorded by clear-import-hf): the default of embed(normalize=) and clear-embed, and "
            "clear-export-hf writes the Normalize module",
        )
        parser.add_argument(
            "--pretrained-kind",
            choices=PRETRAINED_KINDS,
            help="what the starting model is (recorded by clear-import-hf): 'encoder' (BERT, RoBERTa, "
            "XLM-R) or 'sentence-embedding' (a sentence-transformers model); recipes pick "
            "continued-training values for it (default: none, a model trained here from scratch)",
        )
        parser.add_argument(
            "--pretrained-pooling",
            choices=POOLING_CHOICES,
            help="the starting model's pooling (recorded by clear-import-hf: a sentence-embedding "
            "model's own; mean, sentence-transformers' default, for a folder with no pooling config): "
            "the default --sentence-pooling of training and embedding",
        )
        parser.add_argument(
            "--sentence-max-length",
            type=int,
            help="the starting model's sentence-transformers max_seq_length (recorded by clear-import-hf): "
            "embed(), clear-embed and clear-export-hf truncate sentences to this many tokens, <s> and </s> "
            "included (default: none, the model's --max-positions)",
        )
        parser.add_argument(
            "--sentence-lowercase",
            action="store_true",
            help="the starting model lower-cases its input (sentence-transformers' do_lower_case, recorded by "
            "clear-import-hf): embed(), clear-embed and clear-export-hf keep it",
        )
        parser.add_argument(
            "--sentence-similarity",
            choices=SIMILARITY_FUNCTIONS,
            help="the starting model's sentence-transformers similarity_fn_name (recorded by clear-import-hf): "
            "the hub's similarity() and search() score with it, clear-export-hf writes it back for "
            "sentence-transformers' similarity() (default: none, cosine)",
        )
        parser.add_argument(
            "--sentence-prompts",
            help="the starting model's sentence-transformers prompts and default_prompt_name, as one word "
            "(JSON, percent-encoded: written by clear-import-hf): embed(), clear-embed, clear-eval-sts and "
            "--sts-validation put the default prompt before every sentence; clear-export-hf writes them back "
            "(default: none)",
        )
        parser.add_argument(
            "--sentence-exclude-prompt",
            action="store_true",
            help="the default prompt's tokens are left out of the pooling (sentence-transformers' Pooling "
            "include_prompt false, recorded by clear-import-hf): embed(), clear-embed, clear-eval-sts and "
            "--sts-validation pool the sentence alone; clear-export-hf writes include_prompt false",
        )
        parser.add_argument(
            "--sentence-dense",
            help="the starting model's sentence-transformers Dense modules (recorded by clear-import-hf), one "
            "word: OUT:ACTIVATION[:nobias] per layer, comma-separated (e.g. 768:tanh): applied after the pooling, "
            "before CLSR's e, the projection head and Normalize, and trained with the encoder; clear-export-hf "
            "writes them back (default: none)",
        )
        parser.add_argument(
            "--layernorm-eps",
            type=float,
            help="epsilon of every layer norm (default: 1e-5, fairseq's and RoBERTa's; BERT uses "
            "1e-12: clear-import-hf sets it from config.json)",
        )
        parser.add_argument(
            "--sentence-mlm-layers",
            type=int,
            help="InfoCSE's sentence-conditioned MLM (Wu et al. 2022): build a decoder of this many "
            "transformer layers (1 or 2; InfoCSE: 2) that predicts the masked tokens of a view from its "
            "sentence vector; trained by the criterion's --sentence-mlm-weight (default: 0, no decoder)",
        )

    def __init__(self, args, encoder, contrastive: bool = False):
        super().__init__(args, encoder)
        dim = args.encoder_embed_dim
        # sentence-transformers' Dense modules (an import's): part of the sentence vector, before e and g
        self.sentence_dense = None
        if args.sentence_dense:
            self.sentence_dense = SentenceDense(dim, parse_dense(args.sentence_dense))
            dim = self.sentence_dense.out_features
        self.sentence_mlp = None
        if args.sentence_mlp_hidden_dim > 0:
            self.sentence_mlp = SentenceMLP(
                dim, args.sentence_mlp_hidden_dim, args.sentence_mlp_dim or dim
            )
            dim = args.sentence_mlp_dim or dim
        self.projection_head = None
        if contrastive and args.projection_layers > 0:
            self.projection_head = ProjectionHead(
                dim,
                args.projection_hidden_dim or dim,
                args.projection_dim or dim,
                args.projection_activation_fn,
                args.projection_layers,
                args.projection_output_activation_fn,
            )
        # built last: the other modules' initialisation draws the same numbers with or without it
        self.sentence_decoder = None
        if contrastive and args.sentence_mlm_layers > 0:
            self.sentence_decoder = SentenceDecoder(args, args.sentence_mlm_layers)
        if args.freeze_encoder:
            for p in self.encoder.parameters():
                p.requires_grad_(False)

    @classmethod
    def build_model(cls, args, task):
        from ..fairseq_fixes import scope

        scope.component_built(args, "model clear_roberta")  # inside a fairseq command: the run is ours
        if OmegaConf.is_config(args):
            OmegaConf.set_struct(args, False)
        base_clear_architecture(args)
        # a sentence-embedding model keeps its own pooling (our tasks applied it already); the
        # plugin's tasks resolved the rest in their build_model; another task (fairseq's
        # sentence_prediction fine-tuning a CLEAR checkpoint, masked_lm of an import) gets CLEAR's
        if args.sentence_pooling is None:
            own_pooling(args)
        paper_defaults.fill(args, paper_defaults.MODEL_OPTIONS, "clear", "model", quiet=True)
        if args.projection_layers < 0:
            raise ValueError(f"--projection-layers must be >= 0, got {args.projection_layers}")
        if args.sentence_mlm_layers not in (0, 1, 2):
            raise SentenceDecoderError(f"--sentence-mlm-layers must be 0, 1 or 2, got {args.sentence_mlm_layers}")
        dense = parse_dense(args.sentence_dense)  # a bad word is one line, before anything is built
        if args.sentence_mlm_layers and dense and dense[-1].out_features != args.encoder_embed_dim:
            raise SentenceDecoderError(f"--sentence-mlm-layers puts the sentence vector in place of a token "
                                       f"embedding: --sentence-dense {args.sentence_dense} must end in "
                                       f"--encoder-embed-dim {args.encoder_embed_dim}")
        if args.sentence_mlm_layers and (args.sentence_mlp_dim or args.encoder_embed_dim) != args.encoder_embed_dim:
            raise SentenceDecoderError(f"--sentence-mlm-layers puts the sentence vector in place of a token "
                                       f"embedding: --sentence-mlp-dim {args.sentence_mlp_dim} must be "
                                       f"--encoder-embed-dim {args.encoder_embed_dim}")
        if not safe_hasattr(args, "max_positions"):
            if not safe_hasattr(args, "tokens_per_sample"):
                args.tokens_per_sample = task.max_positions()
            args.max_positions = args.tokens_per_sample
        encoder = RobertaEncoder(args, task.source_dictionary)
        if args.layernorm_eps != 1e-5:
            for module in encoder.modules():
                if "LayerNorm" in type(module).__name__ and hasattr(module, "eps"):
                    module.eps = args.layernorm_eps
        if OmegaConf.is_config(args):
            OmegaConf.set_struct(args, True)
        return cls(args, encoder, contrastive=getattr(task, "is_contrastive", False))

    def train(self, mode: bool = True):
        super().train(mode)
        if self.args.freeze_encoder:
            self.encoder.eval()  # a frozen encoder gives fixed embeddings: no dropout
        return self

    # ---- the sentence representation (one place: training, embed(), STS validation, export)
    def sentence_features(self, src_tokens, cls_only: bool = False):
        """B x T x C encoder output; with ``cls_only``, B x 1 x C for the <s> position (cheaper,
        exact: the top layer's other rows are never used by [CLS] pooling)."""
        if not cls_only or not _plain_encoder(self):
            features, _ = self.encoder(src_tokens, features_only=True)
            return features[:, :1] if cls_only else features
        enc = self.encoder.sentence_encoder
        padding_mask = src_tokens.eq(enc.padding_idx)
        has_pads = bool(padding_mask.any())
        x, _ = enc.forward_embedding(src_tokens)
        if has_pads:
            x = x * (1 - padding_mask.unsqueeze(-1).type_as(x))  # as TransformerEncoder does
        x = x.transpose(0, 1)
        mask = padding_mask if has_pads else None
        layers = list(enc.layers)
        for layer in layers[:-1]:
            x = layer(x, encoder_padding_mask=mask)
        x = _last_layer_cls(layers[-1], x, mask)
        if enc.layer_norm is not None:
            x = enc.layer_norm(x)
        return x.transpose(0, 1)

    def represent(self, features, padding_mask, pooling=None, head: str = "representation"):
        """pool -> CLSR's e -> projection head g, as far as ``head`` asks (see HEAD_CHOICES)."""
        check_head_name(head)
        x = pool(features, padding_mask, pooling or self.args.sentence_pooling)
        if head == "pooled":
            return x
        if self.sentence_dense is not None:
            x = self.sentence_dense(x)
        if self.sentence_mlp is not None:
            x = self.sentence_mlp(x.type_as(self.sentence_mlp.fc1.weight))
        if head == "projection":
            if self.projection_head is None:
                raise ValueError(
                    "head='projection': this model has no projection head (it exists only in "
                    "checkpoints of contrastive tasks with --projection-layers > 0)"
                )
            x = self.projection_head(x)
        return x

    def representation_dim(self, head: str = "representation") -> int:
        """Size of the vectors :meth:`represent` returns for ``head`` (raises for a missing head)."""
        check_head_name(head)
        dim = self.args.encoder_embed_dim
        if head == "pooled":
            return dim
        if self.sentence_dense is not None:
            dim = self.sentence_dense.out_features
        if self.sentence_mlp is not None:
            dim = self.sentence_mlp.fc2.out_features
        if head == "projection":
            if self.projection_head is None:
                raise ValueError(
                    "head='projection': this model has no projection head (it exists only in "
                    "checkpoints of contrastive tasks with --projection-layers > 0)"
                )
            dim = self.projection_head.layers[-1].out_features
        return dim

    def sentence_representation(
        self, src_tokens, pooling=None, apply_sentence_mlp=True, project=False
    ):
        """Pooled sentence vectors, optionally through CLSR's e and the projection head g."""
        frozen = self.args.freeze_encoder
        with torch.set_grad_enabled(torch.is_grad_enabled() and not frozen):
            features = self.sentence_features(src_tokens)
        padding_mask = src_tokens.eq(self.encoder.dictionary.pad())
        head = "projection" if project else ("representation" if apply_sentence_mlp else "pooled")
        if project and not apply_sentence_mlp and self.sentence_mlp is not None:
            raise ValueError("project=True goes through CLSR's e; apply_sentence_mlp=False cannot skip it")
        return self.represent(features, padding_mask, pooling, head)

    def sentence_mlm_output(self, src_tokens, masked_tokens, masked):
        """InfoCSE's MLM through the sentence vector: the LM head's logits at the ``masked`` positions of
        ``masked_tokens`` (``src_tokens`` with those replaced by <mask>), from the decoder over the
        sentence vector of ``src_tokens`` (the representation, before the projection head: InfoCSE's
        last-layer [CLS]) in place of <s>, then the masked sentence's token embeddings. These are
        constants, as InfoCSE's frozen lower layers: the term reaches the encoder through the vector."""
        s = self.sentence_representation(src_tokens)
        with torch.no_grad():
            x, _ = self.encoder.sentence_encoder.forward_embedding(masked_tokens)
        x = torch.cat([s.unsqueeze(1).type_as(x), x[:, 1:]], dim=1)
        x = self.sentence_decoder(x, masked_tokens.eq(self.encoder.dictionary.pad()))
        return self.encoder.lm_head(x, masked_tokens=masked)

    # ---- seed 004's task heads (models/multitask_heads.py), kept as named classification heads
    def register_multitask_heads(self, num_classes: int, hidden_dim: int, dropout: float,
                                 sharing: str = "first-layer", tasks=None):
        """Add the sentiment, paraphrase and STS heads (those of ``tasks``) to
        ``classification_heads`` under their task's name, as fairseq's ``sentence_prediction``
        adds its head; fairseq's checkpoint code saves and reloads them."""
        from .multitask_heads import TASK_NAMES, build_heads

        heads = build_heads(self.representation_dim(), hidden_dim, num_classes, dropout, sharing,
                            self.args.pooler_activation_fn, tasks or TASK_NAMES)
        for name, head in heads.items():
            self.classification_heads[name] = head

    def multitask_output(self, src_tokens, head_name: str):
        """The ``head_name`` head on the [CLS] (the model's pooling) representation of
        ``src_tokens``: class logits (sentiment), one logit per pair (paraphrase) or one cosine
        per pair (sts); a pair task's rows are the B first sentences, then the B second ones."""
        from .multitask_heads import apply_head

        if head_name not in self.classification_heads:
            raise KeyError(f"this model has no '{head_name}' head (it has {', '.join(self.classification_heads) or 'none'})")
        pooling = self.args.sentence_pooling
        frozen = self.args.freeze_encoder
        with torch.set_grad_enabled(torch.is_grad_enabled() and not frozen):
            features = self.sentence_features(src_tokens, cls_only=pooling == "cls")
        padding_mask = src_tokens.eq(self.encoder.dictionary.pad())
        x = self.represent(features, padding_mask, pooling, "representation")
        head = self.classification_heads[head_name]
        return apply_head(head, x.type_as(head.dense.weight))

    def forward(self, src_tokens, features_only=False, return_all_hiddens=False,
                classification_head_name=None, contrastive=False, multitask_head=None, sentence_mlm=None,
                **kwargs):
        """``contrastive=True`` returns the vectors the contrastive loss compares;
        ``multitask_head=NAME`` the output of seed 004's head NAME (:meth:`multitask_output`);
        ``sentence_mlm=(masked_tokens, masked)`` InfoCSE's logits (:meth:`sentence_mlm_output`).

        Going through ``forward`` (rather than a helper method) keeps the call
        inside DistributedDataParallel's bookkeeping.
        """
        if multitask_head is not None:
            return self.multitask_output(src_tokens, multitask_head), {}
        if sentence_mlm is not None:
            return self.sentence_mlm_output(src_tokens, *sentence_mlm), {}
        if contrastive:
            z = self.sentence_representation(
                src_tokens, project=self.projection_head is not None
            )
            return z, {}
        return super().forward(
            src_tokens,
            features_only=features_only,
            return_all_hiddens=return_all_hiddens,
            classification_head_name=classification_head_name,
            **kwargs,
        )

    def upgrade_state_dict_named(self, state_dict, name):
        super().upgrade_state_dict_named(state_dict, name)
        prefix = name + "." if name != "" else ""
        keep_encoder_layers(self.args, state_dict, prefix)
        check_encoder_shapes(self, state_dict, prefix)
        reconcile_dictionary_rows(self.encoder.dictionary, state_dict, prefix)
        check_dense_shapes(self, state_dict, prefix)
        for module_name in ("projection_head", "sentence_mlp", "sentence_decoder"):
            module = getattr(self, module_name)
            key_prefix = prefix + module_name + "."
            if module is None:
                dropped = [k for k in state_dict if k.startswith(key_prefix)]
                for k in dropped:
                    del state_dict[k]
                if dropped:
                    logger.info("not loading %s from the checkpoint: this task does not use it", module_name)
                continue
            current = module.state_dict()
            saved = {k[len(key_prefix):]: v for k, v in state_dict.items() if k.startswith(key_prefix)}
            if saved and (
                saved.keys() != current.keys()
                or any(saved[k].shape != current[k].shape for k in current)
            ):
                # a checkpoint of another head configuration (e.g. CLEAR's 2-layer g
                # loaded for CLSR's linear h): the encoder carries over, the head restarts
                for k in saved:
                    del state_dict[key_prefix + k]
                logger.info(
                    "%s in the checkpoint has another shape (%s); starting it from its "
                    "initialisation", module_name,
                    ", ".join(f"{k}{tuple(v.shape)}" for k, v in sorted(saved.items())),
                )
            missing = [k for k in current if key_prefix + k not in state_dict]
            for k in missing:
                state_dict[key_prefix + k] = current[k]
            if missing:
                logger.info("%s is not in the checkpoint: starting it from its initialisation", module_name)

    @classmethod
    def from_pretrained(cls, model_name_or_path, checkpoint_file="model.pt",
                        data_name_or_path=".", bpe=None, **kwargs):
        from .hub_interface import from_pretrained

        return from_pretrained(
            model_name_or_path, checkpoint_file, data_name_or_path, bpe=bpe, **kwargs
        )


VOCAB_ROW_KEYS = ("encoder.sentence_encoder.embed_tokens.weight", "encoder.lm_head.weight", "encoder.lm_head.bias")


def _appended(dictionary):
    n = 0
    while n < len(APPENDED_SYMBOLS) and len(dictionary) - n - 1 >= dictionary.nspecial and \
            dictionary[len(dictionary) - n - 1] in APPENDED_SYMBOLS:
        n += 1
    return [dictionary[i] for i in range(len(dictionary) - n, len(dictionary))]


def _where(dictionary) -> str:
    path = getattr(dictionary, "path", None)
    return f"dict.txt ({path})" if path else "dict.txt of the data directory"


def reconcile_dictionary_rows(dictionary, state_dict, prefix=""):
    """Grow or trim the checkpoint's vocabulary rows to the task's appended symbols.

    A stock RoBERTa or imported checkpoint lacks [DEL] (and an encoder trained without
    masked LM lacks <mask>); rows the task adds are initialised from the checkpoint's
    <mask> row (its embedding and LM-head bias), or from the mean row when it has no
    <mask>. A checkpoint that has [DEL] while the task does not use it loses that row.
    Anything else is a real mismatch, named with both sizes.
    """
    key = prefix + VOCAB_ROW_KEYS[0]
    if key not in state_dict:
        return
    saved, wanted = state_dict[key].size(0), len(dictionary)
    if saved == wanted:
        return
    appended = _appended(dictionary)
    core = wanted - len(appended)
    extras = list(appended) + [s for s in APPENDED_SYMBOLS if s not in appended]
    if not core <= saved <= core + len(APPENDED_SYMBOLS) or extras != list(APPENDED_SYMBOLS)[: len(extras)]:
        raise DictionarySizeError(
            f"the checkpoint was trained with a dictionary of {saved} types, but {_where(dictionary)} "
            f"gives {wanted} ({core} from the file and its 4 specials, plus {', '.join(appended) or 'nothing'} "
            "added by the task); use the dict.txt of the data the model was trained on, or prepare the "
            "data with clear-prepare --tokenizer-from MODEL_DIR"
        )
    saved_symbols = APPENDED_SYMBOLS[: saved - core]
    for k in VOCAB_ROW_KEYS:
        k = prefix + k
        if k not in state_dict:
            continue
        rows = state_dict[k]
        if saved > wanted:
            state_dict[k] = rows[:wanted].clone()
            continue
        if "<mask>" in saved_symbols:
            seed = rows[core + saved_symbols.index("<mask>")]
        else:
            seed = rows[:core].mean(0)
        state_dict[k] = torch.cat([rows, seed.unsqueeze(0).expand(wanted - saved, *rows.shape[1:])], 0)
    if saved > wanted:
        logger.info("dictionary: dropping the checkpoint's rows for %s (this task does not use them)",
                    ", ".join(saved_symbols[wanted - core:]))
    else:
        logger.info(
            "dictionary: the checkpoint has %d rows, the task %d: added %s, initialised from the "
            "checkpoint's %s row (embedding and LM-head bias)", saved, wanted,
            ", ".join(appended[saved - core:]), "<mask>" if "<mask>" in saved_symbols else "mean",
        )


class EncoderShapeError(FairseqClearError, ValueError):
    """The checkpoint's encoder has other sizes than the model built from the options."""


def keep_encoder_layers(args, state_dict, prefix=""):
    """--encoder-layers-to-keep: the checkpoint's encoder cut to those layers, renumbered from 0 (a student
    started from a teacher's first layers). fairseq's prune_state_dict would cut after this upgrade, but it
    also drops every other key holding ".layers.N." (the projection head's), so the cut is made here and the
    option cleared, as prune_state_dict clears it (the model saved has its own layers alone)."""
    keep = getattr(args, "encoder_layers_to_keep", None)
    if not keep:
        return
    enc = prefix + "encoder.sentence_encoder.layers."
    held = {k: state_dict.pop(k) for k in [k for k in state_dict if k.startswith(enc)]}
    if not held:  # a checkpoint without this encoder's layers: nothing to cut
        return
    found = {int(k[len(enc):].split(".")[0]) for k in held}
    kept = sorted({int(i) for i in str(keep).split(",")})
    if found == set(range(len(kept))):  # already cut (a resume of the student): as it is
        state_dict.update(held)
        args.encoder_layers_to_keep = None
        return
    if not set(kept) <= found:
        raise EncoderShapeError(f"--encoder-layers-to-keep {keep}: the checkpoint's encoder has {len(found)} layers "
                                f"(0..{max(found)})")
    number = {i: j for j, i in enumerate(kept)}
    for k, v in held.items():
        layer, rest = k[len(enc):].split(".", 1)
        if int(layer) in number:
            state_dict[f"{enc}{number[int(layer)]}.{rest}"] = v
    args.encoder_layers_to_keep = None


def check_encoder_shapes(model, state_dict, prefix=""):
    """Name the options when a checkpoint's encoder sizes differ (torch would list tensors)."""
    args = model.args
    enc = prefix + "encoder.sentence_encoder."
    problems = []
    emb = state_dict.get(enc + "embed_tokens.weight")
    if emb is not None and emb.size(1) != args.encoder_embed_dim:
        problems.append(f"--encoder-embed-dim {emb.size(1)} (model: {args.encoder_embed_dim})")
    layers = {int(k[len(enc + "layers."):].split(".")[0]) for k in state_dict if k.startswith(enc + "layers.")}
    if layers and len(layers) != args.encoder_layers:
        problems.append(f"--encoder-layers {len(layers)} (model: {args.encoder_layers})")
    fc1 = state_dict.get(enc + "layers.0.fc1.weight")
    if fc1 is not None and fc1.size(0) != args.encoder_ffn_embed_dim:
        problems.append(f"--encoder-ffn-embed-dim {fc1.size(0)} (model: {args.encoder_ffn_embed_dim})")
    pos = state_dict.get(enc + "embed_positions.weight")
    own = model.encoder.sentence_encoder.embed_positions
    if pos is not None and own is not None and pos.size(0) != own.weight.size(0):
        problems.append(f"--max-positions {pos.size(0) - model.encoder.dictionary.pad() - 1} "
                        f"(model: {args.max_positions})")
    if problems:
        raise EncoderShapeError(
            "the checkpoint's encoder does not fit the model's options; pass " + ", ".join(problems)
            + " (clear-import-hf writes these options to OUT_DIR/fairseq_args.txt)"
        )


def check_dense_shapes(model, state_dict, prefix=""):
    """The checkpoint's Dense layers are the model's (--sentence-dense): they are the sentence vector's
    meaning, never restarted from their initialisation nor dropped like a head."""
    key_prefix = prefix + "sentence_dense."
    saved = {k[len(key_prefix):]: tuple(v.shape) for k, v in state_dict.items() if k.startswith(key_prefix)}
    own = {} if model.sentence_dense is None else {k: tuple(v.shape) for k, v in model.sentence_dense.state_dict().items()}
    if saved != own:
        raise EncoderShapeError(
            f"the checkpoint's Dense layers ({', '.join(f'{k}{v}' for k, v in sorted(saved.items()))}) are not "
            f"those --sentence-dense {model.args.sentence_dense or '(none)'} builds: pass the checkpoint's "
            "--sentence-dense (clear-import-hf writes it to OUT_DIR/fairseq_args.txt)")


def base_clear_architecture(args):
    # sentence_pooling, projection_layers and projection_output_activation_fn stay None
    # when not given: the task's build_model fills them with its paper's values
    args.sentence_pooling = safe_getattr(args, "sentence_pooling", None)
    args.projection_layers = safe_getattr(args, "projection_layers", None)
    args.projection_hidden_dim = safe_getattr(args, "projection_hidden_dim", None) or 0
    args.projection_dim = safe_getattr(args, "projection_dim", None) or 0
    args.projection_activation_fn = safe_getattr(args, "projection_activation_fn", None) or "relu"
    args.projection_output_activation_fn = safe_getattr(args, "projection_output_activation_fn", None)
    args.freeze_encoder = safe_getattr(args, "freeze_encoder", False)
    args.sentence_mlp_hidden_dim = safe_getattr(args, "sentence_mlp_hidden_dim", None) or 0
    args.sentence_mlp_dim = safe_getattr(args, "sentence_mlp_dim", None) or 0
    args.layernorm_eps = safe_getattr(args, "layernorm_eps", None) or 1e-5
    args.sentence_normalize = bool(safe_getattr(args, "sentence_normalize", False))
    args.pretrained_kind = safe_getattr(args, "pretrained_kind", None)
    args.pretrained_pooling = safe_getattr(args, "pretrained_pooling", None)
    args.sentence_max_length = safe_getattr(args, "sentence_max_length", None)
    args.sentence_lowercase = bool(safe_getattr(args, "sentence_lowercase", False))
    args.sentence_similarity = safe_getattr(args, "sentence_similarity", None)
    args.sentence_prompts = safe_getattr(args, "sentence_prompts", None)
    args.sentence_dense = safe_getattr(args, "sentence_dense", None)
    args.sentence_exclude_prompt = bool(safe_getattr(args, "sentence_exclude_prompt", False))
    args.sentence_mlm_layers = safe_getattr(args, "sentence_mlm_layers", None) or 0
    base_architecture(args)


@register_model_architecture("clear_roberta", "clear_roberta")
def clear_roberta_architecture(args):
    base_clear_architecture(args)


@register_model_architecture("clear_roberta", "clear_roberta_base")
def clear_roberta_base_architecture(args):
    """The paper's encoder: 12 layers, 768 hidden, 12 heads (§4.1)."""
    base_clear_architecture(args)


@register_model_architecture("clear_roberta", "clear_roberta_large")
def clear_roberta_large_architecture(args):
    base_clear_architecture(args)
    roberta_large_architecture(args)


@register_model_architecture("clear_roberta", "clear_roberta_small")
def clear_roberta_small_architecture(args):
    """6 layers x 384, 12 heads, 1536 FFN (MiniLM-L6-sized): benchmarks and small reproductions."""
    args.encoder_layers = safe_getattr(args, "encoder_layers", 6)
    args.encoder_embed_dim = safe_getattr(args, "encoder_embed_dim", 384)
    args.encoder_ffn_embed_dim = safe_getattr(args, "encoder_ffn_embed_dim", 1536)
    args.encoder_attention_heads = safe_getattr(args, "encoder_attention_heads", 12)
    base_clear_architecture(args)


@register_model_architecture("clear_roberta", "clear_roberta_tiny")
def clear_roberta_tiny_architecture(args):
    """2 layers x 128, 2 heads: trains on 2 CPU cores in minutes (demo, tests)."""
    args.encoder_layers = safe_getattr(args, "encoder_layers", 2)
    args.encoder_embed_dim = safe_getattr(args, "encoder_embed_dim", 128)
    args.encoder_ffn_embed_dim = safe_getattr(args, "encoder_ffn_embed_dim", 512)
    args.encoder_attention_heads = safe_getattr(args, "encoder_attention_heads", 2)
    base_clear_architecture(args)
