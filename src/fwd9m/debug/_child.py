"""Child process of ``fwd9m debug``: record a script run as ``__main__`` into a trace.

``python -m fwd9m.debug._child OUT LEVEL CAPTURE STEPS FRAMEWORKS MODULE TARGET [ARGS...]``
(CAPTURE/FRAMEWORKS: comma-separated or "-"; STEPS: "A,B" or "-"; MODULE: "1" for ``-m``). Exits with the
script's exit status.
"""

from __future__ import annotations

import os
import re
import sys

_IMPORT = re.compile(r"^\s*(?:import|from)\s+(torch|tensorflow|keras|tf_keras|jax)\b", re.M)


def detect_frameworks(target: str, module: bool) -> list[str]:
    """Frameworks a script imports (by reading its source): torch, tensorflow and/or
    jax; Keras counts as tensorflow (Keras 3 on the TF backend)."""
    path = target
    if module:
        import importlib.util

        spec = importlib.util.find_spec(target)
        path = spec.origin if spec and spec.origin else ""
    elif os.path.isdir(target):
        path = os.path.join(target, "__main__.py")
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return []
    found = set(_IMPORT.findall(text))
    try:  # every import statement, also `import os, torch` and imports inside functions
        import ast

        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                found.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module.split(".")[0])
    except (SyntaxError, ValueError, RecursionError):
        pass  # the script fails on its own when run; the regex result stands
    out = []
    if "torch" in found:
        out.append("torch")
    if found & {"tensorflow", "keras", "tf_keras"}:
        out.append("tensorflow")
    if "jax" in found:
        out.append("jax")
    return out


def main(argv: list[str]) -> int:
    out, level, capture, steps, frameworks, module, target, *args = argv
    from .._runtime import launch as _launch
    from . import record

    module_flag = module == "1"
    names = frameworks.split(",") if frameworks != "-" else detect_frameworks(target, module_flag)
    if not names:
        sys.stderr.write(f"fwd9m debug: {target} imports neither torch nor tensorflow/keras nor jax "
                         f"at top level; pass --framework torch|tensorflow|jax\n")
        return 2
    for n in names:
        __import__("tensorflow" if n == "tensorflow" else n)
    program = {"script": target, "argv": args, "module": module_flag}
    with record(out, framework=names, level=level,
                capture=None if capture == "-" else capture, program=program,
                steps=None if steps == "-" else tuple(int(x) for x in steps.split(","))):
        code = _launch.run_as_main(target, args, module=module_flag)
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
