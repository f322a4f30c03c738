"""Runs spattn's conformance suite on an attention function and prints the table.

    python -m spattn.conformance module:function

``function(q, k, v, mask)`` takes float32 tensors (batch, heads, seqlen, head_dim) and a
spattn.torch.Mask (or a list of one per head) and returns the output; it is differentiated with
autograd. Exits 0 when every case passes, 1 otherwise, 2 on a bad argument.
"""

import importlib
import sys

from .testing import conformance, format_table


def load(target: str):
    module_name, _, function_name = target.partition(":")
    if not module_name or not function_name:
        raise ValueError(f"expected module:function, got {target!r}")
    function = getattr(importlib.import_module(module_name), function_name, None)
    if not callable(function):
        raise ValueError(f"{target}: {function_name!r} is not a function of {module_name}")
    return function


def main(argv) -> int:
    if len(argv) != 1:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        function = load(argv[0])
    except (ImportError, ValueError) as error:
        print(f"spattn.conformance: {error}", file=sys.stderr)
        return 2
    results = conformance(function)
    print(format_table(results))
    return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
