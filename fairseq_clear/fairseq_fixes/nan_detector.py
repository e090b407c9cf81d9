"""fairseq's ``NanDetector`` cannot attach its hooks under current torch.

It registers old-style ``register_backward_hook`` hooks on every module; current
torch cannot attach those to a module whose output is a dict holding no tensor
directly (fairseq's ``TransformerEncoder`` returns lists), so the post-mortem run
after "gradients are Nan/Inf" dies with ``StopIteration`` and the NaN report never
appears. Full backward hooks (same signature) skip such outputs instead.
"""

from ._version import check_version

#: the fairseq release this fix was written and tested against
WRITTEN_FOR = "0.12.3.1"


def patch_nan_detector():
    from fairseq import nan_detector

    cls = nan_detector.NanDetector
    if getattr(cls, "_clear_full_hooks", False):
        return

    def add_hooks(self, module):
        if self.forward:
            self.fhooks.append(module.register_forward_hook(self.fhook_fn))
        if self.backward:
            self.bhooks.append(module.register_full_backward_hook(self.bhook_fn))

    cls.add_hooks = add_hooks
    cls._clear_full_hooks = True


def apply():
    check_version(__name__, WRITTEN_FOR)
    patch_nan_detector()
