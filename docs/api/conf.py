"""Sphinx configuration of the API reference (``make docs``; pages in ``docs/_build/api``).

The pages are built from the docstrings with autodoc, one page per public package; the
``public-names`` directive below lists every name of the package's ``__all__``, read at build
time, so a page never misses a name.  The build runs nitpicky with warnings as errors.  Names of
other libraries (numpy, pandas, Ray, scikit-learn, the standard library) are not checked: the
machine that builds has no internet for intersphinx, so they are listed in ``nitpick_ignore_regex``.

Two small hooks fit the package's docstrings:

* ``Parameters`` / ``Attributes`` sections in numpydoc layout (a title, a line of dashes, then
  ``name : text`` entries) become a rubric and a definition list.  The package writes most entries
  as ``name : description`` (no type), so napoleon's "name : type" reading would cut sentences.
* A ``raytune_fed`` reference is read as the module the docstring was written in reads it: a bare
  name (:class:`SearchSpace` in ``raytune_fed/algorithms/gp_bo.py``) is looked up among that
  module's names, and a private module's path (``raytune_fed.grid._engine.run_cells``, what a type
  hint says) is taken at the public path that exports the same object, which it links to.  A name
  that exists but has no public entry (a private helper, a TypeVar) is shown as text.  A name that
  does not exist fails the build.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from docutils.utils import get_source_line
from sphinx.errors import PycodeError
from sphinx.pycode import ModuleAnalyzer
from sphinx.util.docutils import SphinxDirective
from sphinx.util.inspect import object_description

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

project = "raytune_fed"
author = "raytune_fed contributors"
copyright = "raytune_fed contributors"
extensions = ["sphinx.ext.autodoc"]
root_doc = "index"
exclude_patterns = ["_build"]
html_theme = "alabaster"
html_static_path: list[str] = []

nitpicky = True
autodoc_default_options = {"members": True, "undoc-members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_inherit_docstrings = False  # Ray's and scikit-learn's docstrings are not ours to check
add_module_names = False

# Names outside the package: not checked (no intersphinx offline).  Our own names are never listed here.
_EXTERNAL_MODULES = (
    "numpy", "np", "numpy.typing", "npt", "pandas", "pd", "pyarrow", "ray", "sklearn", "scipy", "tenseal", "ts",
    "pymoo", "optuna", "lightgbm", "matplotlib", "skglm", "numba", "cryptography", "threadpoolctl", "boto3",
    "typing", "typing_extensions", "collections", "abc", "enum", "dataclasses", "pathlib", "os", "io", "json",
    "datetime", "concurrent", "multiprocessing", "threading", "subprocess", "socket", "ssl", "http", "urllib",
    "argparse", "logging", "contextlib", "types", "random", "selectors", "signal", "queue", "tempfile", "hashlib",
    "hmac", "secrets", "struct", "zipfile", "tarfile", "shutil", "functools", "itertools", "weakref", "asyncio",
    "socketserver", "email", "tomllib", "uuid", "time", "re", "math", "numbers", "decimal", "fractions", "csv",
    "builtins", "_io", "_thread", "_socket", "_ssl", "os.PathLike",
)
_BUILTINS = (
    "None", "int", "float", "str", "bytes", "bytearray", "bool", "dict", "list", "tuple", "set", "frozenset",
    "object", "type", "complex", "memoryview", "range", "slice", "callable", "Ellipsis", "NotImplemented",
    "Exception", "BaseException", "ValueError", "TypeError", "RuntimeError", "KeyError", "OSError", "IOError",
    "LookupError", "IndexError", "KeyboardInterrupt", "TimeoutError", "PermissionError", "FileNotFoundError",
    "FileExistsError", "ArithmeticError", "AttributeError", "NotImplementedError", "StopIteration",
    "ConnectionError", "UserWarning", "Warning", "RuntimeWarning",
)
# outside types that type hints name only under TYPE_CHECKING, so a signature shows them without a module
_HINT_ONLY = ("Path", "Trial", "TuneController")
nitpick_ignore_regex = [
    (r"py:.*", "(" + "|".join(re.escape(m) for m in _EXTERNAL_MODULES) + r")(\..+)?"),
    (r"py:.*", "(" + "|".join(_BUILTINS + _HINT_ONLY) + ")"),
]

_MISSING = object()
_DASHES = re.compile(r"^\s*-{3,}\s*$")
_ENTRY = re.compile(r"^(?P<names>[A-Za-z_*][\w*]*(?:\s*,\s*[A-Za-z_*][\w*]*)*)\s*:(?:\s+(?P<text>.*))?$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _is_type(first: str, rest: list[str]) -> bool:
    """Whether an entry is numpydoc's ``name : type`` + description (else ``name : description``)."""
    return bool(rest) and len(first) <= 40 and not first.rstrip().endswith((".", ";", ":", ","))\
        and rest[0][:1].isupper()


def _entry_text(first: str, rest: list[str]) -> str:
    if _is_type(first, rest):
        return f"*{first.strip()}*: " + " ".join(rest)
    return " ".join([first.strip(), *rest]).strip()


def _numpy_sections(lines: list[str]) -> list[str]:
    """Rewrite numpydoc ``Title`` / ``-----`` sections of ``name : text`` entries as rubric + definition list."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if i + 1 < len(lines) and line.strip() and _DASHES.match(lines[i + 1]) \
                and _indent(lines[i + 1]) == _indent(line):
            base = _indent(line)
            out += [" " * base + ".. rubric:: " + line.strip(), ""]
            i += 2
            entries: list[tuple[str, str, list[str]]] = []
            while i < len(lines):
                current = lines[i]
                if not current.strip():
                    # a blank line ends the section unless another entry follows
                    j = i + 1
                    while j < len(lines) and not lines[j].strip():
                        j += 1
                    if j < len(lines) and _indent(lines[j]) == base and _ENTRY.match(lines[j].strip()):
                        i = j
                        continue
                    break
                match = _ENTRY.match(current.strip())
                if _indent(current) != base or match is None:
                    break
                rest: list[str] = []
                i += 1
                while i < len(lines) and lines[i].strip() and _indent(lines[i]) > base:
                    rest.append(lines[i].strip())
                    i += 1
                entries.append((match["names"], match["text"] or "", rest))
            for names, first, rest in entries:
                out.append(" " * base + ", ".join(f"``{n.strip()}``" for n in names.split(",")))
                out.append(" " * (base + 4) + (_entry_text(first, rest) or "(as named)"))
            out.append("")
            continue
        out.append(line)
        i += 1
    return out


def _process_docstring(app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    lines[:] = _numpy_sections(lines)


# ---------------------------------------------------------------- one page per package, from its __all__
class PublicNames(SphinxDirective):
    """``.. public-names:: raytune_fed.grid``: the module's docstring, then every name of its ``__all__``
    (classes, functions, constants, modules), read when the pages are built, so a page never misses a name."""

    required_arguments = 1

    def run(self) -> list[Any]:
        modname = self.arguments[0]
        module = importlib.import_module(modname)
        groups: dict[str, list[str]] = {"Classes": [], "Functions": [], "Constants and types": [], "Modules": []}
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if inspect.ismodule(obj):
                groups["Modules"].append(f".. automodule:: {obj.__name__}")
            elif isinstance(obj, type):
                groups["Classes"].append(f".. autoclass:: {modname}.{name}")
            elif inspect.isroutine(obj):
                groups["Functions"].append(f".. autofunction:: {modname}.{name}")
            else:
                groups["Constants and types"].append(_data_block(module, name, obj))
        text = [f".. automodule:: {modname}", "   :no-members:", ""]
        for title, blocks in groups.items():
            if blocks:
                text += [f".. rubric:: {title}", ""]
                for block in blocks:
                    text += [*block.splitlines(), ""]
        node = nodes.section()
        node.document = self.state.document
        self.state.nested_parse(StringList(text, source=f"<public names of {modname}>"), self.content_offset, node)
        return list(node.children)


def _data_doc(module: Any, name: str, obj: Any) -> list[str]:
    """The ``#:`` comment of a constant, read in the module that assigns it (the package's submodules)."""
    for modname in sorted(sys.modules):
        if not modname.startswith("raytune_fed") or getattr(sys.modules[modname], name, _MISSING) is not obj:
            continue
        try:
            analyzer = ModuleAnalyzer.for_module(modname)
            analyzer.analyze()
        except PycodeError:
            continue
        doc = analyzer.attr_docs.get(("", name))
        if doc:
            return [line for line in doc if line.strip()]
    return []


def _data_block(module: Any, name: str, obj: Any) -> str:
    lines = [f".. py:data:: {name}", f"   :module: {module.__name__}"]
    value = object_description(obj)
    if len(value) <= 100:
        lines.append(f"   :value: {value}")
    lines.append("")
    lines += ["   " + line for line in _data_doc(module, name, obj)]
    return "\n".join(lines)


# ---------------------------------------------------------------- resolving names as their module reads them
_DOCSTRING_OF = re.compile(r"docstring of (?P<name>[\w.]+)")


def _import_dotted(name: str) -> Any:
    """The object at a dotted path (a module and attributes), or None."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def _documented(env: Any) -> dict[str, list[str]]:
    """Last name component -> the documented ``raytune_fed`` names that end in it."""
    cache = getattr(env, "_raytune_fed_documented", None)
    if cache is None:
        cache = {}
        for fullname, entry in env.get_domain("py").objects.items():
            if not entry.aliased and fullname.startswith("raytune_fed"):
                cache.setdefault(fullname.rsplit(".", 1)[-1], []).append(fullname)
        env._raytune_fed_documented = cache
    return cache


def _lookup(base: Any, dotted: str) -> Any:
    obj = base
    for attr in dotted.split("."):
        obj = getattr(obj, attr, _MISSING)
        if obj is _MISSING:
            break
    return obj


def _meant(node: Any) -> Any:
    """The live object a reference means: a ``raytune_fed`` path as written (a private module's name included),
    else the name read in the module whose docstring holds the reference; ``_MISSING`` when neither has it."""
    target = node["reftarget"].lstrip("~.")
    if target.startswith("raytune_fed."):
        obj = _import_dotted(target)
        if obj is not None:
            return obj
    source = get_source_line(node)[0] or ""
    match = _DOCSTRING_OF.search(source)
    if match is None:
        return _MISSING
    documented = _import_dotted(match["name"])
    module = inspect.getmodule(documented) if documented is not None else None
    if module is None:  # a module attribute's docstring: its module
        module = inspect.getmodule(_import_dotted(match["name"].rsplit(".", 1)[0]))
    return _MISSING if module is None else _lookup(module, target)


def _ours(obj: Any, target: str) -> bool:
    module = getattr(obj, "__module__", None) if not inspect.ismodule(obj) else obj.__name__
    return target.startswith("raytune_fed.") or (isinstance(module, str) and module.startswith("raytune_fed"))


def _missing_reference(app: Any, env: Any, node: Any, contnode: Any) -> Any:
    """Resolve a ``raytune_fed`` reference Sphinx's own search missed (see the module docstring)."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip("~.")
    names = _documented(env).get(target.rsplit(".", 1)[-1], [])
    obj = _meant(node)
    if obj is not _MISSING:
        same = [name for name in names if _import_dotted(name) is obj]
    else:  # not a name of that module at run time (a TYPE_CHECKING import): one documented name ending so
        same = [name for name in names if name.endswith("." + target)]
        same = same if len(same) == 1 else []
    if same:
        return env.get_domain("py").resolve_xref(env, node["refdoc"], app.builder, "obj", sorted(same)[0],
                                                 node.copy(), contnode)
    if obj is not _MISSING and (_ours(obj, target) or "." not in target):
        # it exists but is private (a helper, a TypeVar, a private module): no page to link, shown as text
        return contnode
    return None


def _process_signature(app: Any, what: str, name: str, obj: Any, options: Any, signature: str | None,
                       return_annotation: str | None) -> tuple[str | None, str | None] | None:
    """A dataclass field's ``default_factory`` shows as ``<factory>``, which Sphinx cannot parse: write ``...``."""
    if signature and "<factory>" in signature:
        return signature.replace("<factory>", "..."), return_annotation
    return None


def _skip_member(app: Any, what: str, name: str, obj: Any, skip: bool, options: Any) -> bool | None:
    """Members a class gets from another library (scikit-learn's generated ``set_*_request``) are not ours."""
    if what == "class" and (inspect.isfunction(obj) or inspect.ismethod(obj)):
        module = getattr(obj, "__module__", None)
        if isinstance(module, str) and not module.startswith("raytune_fed"):
            return True
    return None


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("public-names", PublicNames)
    app.connect("autodoc-process-docstring", _process_docstring)
    app.connect("missing-reference", _missing_reference)
    app.connect("autodoc-process-signature", _process_signature)
    app.connect("autodoc-skip-member", _skip_member)
    return {"parallel_read_safe": True}
