"""fairseq's NaN report ("NaN detected in output of ...") works for every module.

When gradients are NaN/Inf, fairseq's trainer re-runs the step under ``NanDetector``, which
registers a forward hook and an old-style ``register_backward_hook`` on every module. Under
current torch the old-style hook cannot attach to a module whose output is a dict holding no
tensor directly (fairseq's ``TransformerEncoder`` returns lists, so every RoBERTa): the
post-mortem dies with ``StopIteration`` and prints no report. Full backward hooks are no cure:
they wrap outputs in views that fairseq's decoders modify in place (transformer_lm), and fconv
already holds old-style hooks, which torch refuses to mix with full ones.

Here the backward check rides on the forward hook instead: it registers a gradient hook on
each tensor the module outputs, which reports the gradient of that output through fairseq's
own ``bhook_fn`` (same message, same "first one only" rule). Tensor hooks need nothing of the
output's structure and change no tensor, so they work for transformer, fconv, lstm,
transformer_lm and RoBERTa alike. Outside a fairseq-clear run (scope.py) fairseq's own hooks.
"""

from . import _patching, scope

#: the fairseq release this fix was written and tested against
WRITTEN_FOR = "0.12.3.1"


def _tensors(x):
    import torch

    if torch.is_tensor(x):
        yield x
    elif isinstance(x, dict):
        for v in x.values():
            yield from _tensors(v)
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _tensors(v)


def add_hooks(detector, module) -> None:
    """fairseq's forward hook, and the backward check as gradient hooks on the module's outputs."""
    import torch

    def on_output(mod, inp, output):
        if detector.forward:
            detector.fhook_fn(mod, inp, output)
        if detector.backward and torch.is_grad_enabled():
            for t in _tensors(output):
                if t.requires_grad:
                    detector.bhooks.append(t.register_hook(lambda grad, m=mod: detector.bhook_fn(m, None, grad)))

    if detector.forward or detector.backward:
        detector.fhooks.append(module.register_forward_hook(on_output))


def install():
    from fairseq.nan_detector import NanDetector

    def make(fairseq_add_hooks):
        def patched(self, module):
            if not scope.active():
                return fairseq_add_hooks(self, module)
            return add_hooks(self, module)

        return patched

    _patching.replace(NanDetector, "add_hooks", make)
