"""Loads spattn's PyTorch ops (TORCH_LIBRARY(spattn), built next to this file) once."""

import os

import torch

_LIBRARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libspattn_torch.so")
if not os.path.exists(_LIBRARY):
    raise ImportError(
        f"spattn: {_LIBRARY} is missing; build it with CMake (it is built when Torch is found) "
        "and import spattn from the build tree (PYTHONPATH=build/python) or from the installed prefix"
    )
torch.ops.load_library(_LIBRARY)

ops = torch.ops.spattn
MaskClass = torch.classes.spattn.Mask
