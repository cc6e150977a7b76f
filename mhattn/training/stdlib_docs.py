"""Print the docstrings of the standard-library modules named on the command line (the deep model's corpus, part 2).

Run by :func:`mhattn.training.textdata.stdlib_docstrings` in a fresh interpreter (``python -I``) that imports only
the standard library: other libraries may replace standard functions when imported (``torch.package`` replaces
``inspect.getfile``), and a replaced function's docstring would change the text. Uses only the standard library.

Order: each module (sorted by name) gives its own docstring, then those of its public classes and functions
defined in it (sorted by name), each class followed by its public methods' (sorted). Joined by blank lines.
"""

import importlib
import inspect
import sys


def public_docs(mod):
    """Docstrings of ``mod``'s public classes and functions defined in it, and of those classes' public methods."""
    docs = []
    for name in sorted(vars(mod)):
        obj = vars(mod)[name]
        if name.startswith("_") or not (inspect.isclass(obj) or inspect.isfunction(obj)) or obj.__module__ != mod.__name__:
            continue
        docs.append(inspect.getdoc(obj) or "")
        if inspect.isclass(obj):
            docs += [inspect.cleandoc(f.__doc__) for m, f in sorted(vars(obj).items())
                     if not m.startswith("_") and inspect.isfunction(f) and f.__doc__]  # fmt: skip
    return [d for d in docs if d]


def docstrings(names):
    parts = []
    for name in sorted(names):
        mod = importlib.import_module(name)
        parts += [inspect.getdoc(mod) or "", *public_docs(mod)]
    return "\n\n".join(p for p in parts if p)


if __name__ == "__main__":
    sys.stdout.buffer.write(docstrings(sys.argv[1:]).encode("utf-8"))
