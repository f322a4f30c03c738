"""spattn: exact sparse attention that counts the data it moves.

``spattn.torch`` is the PyTorch op (``spattn.torch.attention``, ``spattn.torch.Mask``,
``spattn.torch.plan``); it is imported on first use, so ``import spattn`` needs no torch.
"""

import importlib

__all__ = ["torch"]


def __getattr__(name):
    if name in __all__:
        return importlib.import_module("." + name, __name__)
    raise AttributeError(f"module 'spattn' has no attribute {name!r}")
