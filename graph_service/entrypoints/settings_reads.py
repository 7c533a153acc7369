"""Which ``Settings`` fields a command reads, found in the source of the code it runs, so that its
``--help`` lists them with no hand-kept list to fall behind its builders.

Only the entry points and the builders that turn settings into clients import
``graph_service.settings`` (the "protected" import contract in pyproject.toml), so every read is in
a module that imports it. From a command's entry function, this follows each function, method and
class of those modules that the code names, whether it calls it or hands it on
(``_run(build_fanout, settings)``, ``functools.partial(client_options, settings)``); a class named
brings all its methods. It collects the fields read from a ``Settings``: ``settings.x``,
``self.settings.x``, ``p.x`` for a parameter ``p: Settings``, and what a ``Settings`` property or
method used that way reads (``settings.table(...)``, ``settings.check_serving()``). A read in a
branch counts whether the branch runs or not (``SG_KAFKA_SSL_CAFILE`` only with TLS): the list is
what the command may read. ``Settings.from_env`` and ``validate`` read every field to parse and
check it, not to use it, and are not followed.

Nothing is imported to do this (the source is parsed), so ``--help`` of a command starts no client.
"""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass, field, fields
from functools import cache
from pathlib import Path

from graph_service.settings import Settings

__all__ = ["settings_read_by"]

SETTINGS_MODULE = "graph_service.settings"
ROOTS = frozenset({"graph_service", "socialgraph_devstack"})
"""The packages whose modules may import the settings (the rest of the project may not)."""
FIELDS = frozenset(f.name for f in fields(Settings))
NOT_FOLLOWED = frozenset({"from_env", "validate"})
"""``Settings`` methods that read every field to parse or check it."""

Function = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass
class _Module:
    name: str
    tree: ast.Module
    aliases: dict[str, str] = field(default_factory=dict)
    """Each name an import binds (anywhere in the module) -> the dotted name it stands for."""
    defs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef] = field(default_factory=dict)
    """Top-level functions and classes (``f``, ``C``) and methods (``C.m``)."""


@cache
def _package_dir(root: str) -> Path | None:
    spec = importlib.util.find_spec(root)  # a top-level name: found, not imported
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _source_file(module: str) -> Path | None:
    root, *rest = module.split(".")
    base = _package_dir(root) if root in ROOTS else None
    if base is None:
        return None
    path = base.joinpath(*rest)
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@cache
def _module(name: str) -> _Module | None:
    """The parsed module, if it is one of the project's and may see settings (imports them)."""
    path = _source_file(name)
    if path is None:
        return None
    source = path.read_text("utf-8")
    if name != SETTINGS_MODULE and SETTINGS_MODULE not in source:
        return None
    parsed = _Module(name, ast.parse(source))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(parsed.tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package up
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([base] if base else [])])
            for alias in node.names:
                parsed.aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.partition(".")[0]
                parsed.aliases[local] = alias.name if alias.asname else local
    for node in parsed.tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            parsed.defs[node.name] = node
        if isinstance(node, ast.ClassDef):
            for member in node.body:
                if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef):
                    parsed.defs[f"{node.name}.{member.name}"] = member
    return parsed


def _resolve(dotted: str, depth: int = 0) -> tuple[_Module, str] | None:
    """The module and the definition (``f``, ``C`` or ``C.m``) a dotted name stands for, if it is
    one of the modules followed; a name one module re-exports is followed to its definition."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = _module(".".join(parts[:cut]))
        if module is None:
            continue
        symbol = parts[cut:]
        for length in (2, 1):
            name = ".".join(symbol[:length])
            if len(symbol) >= length and name in module.defs:
                return module, name
        if symbol[0] in module.aliases and depth < 8:
            return _resolve(".".join([module.aliases[symbol[0]], *symbol[1:]]), depth + 1)
        return None
    return None


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


def _names_settings(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    return any(
        (isinstance(n, ast.Name) and n.id == "Settings")
        or (isinstance(n, ast.Attribute) and n.attr == "Settings")
        or (isinstance(n, ast.Constant) and n.value == "Settings")
        for n in ast.walk(annotation)
    )


def _settings_names(function: Function, module: _Module, cls: str | None) -> set[str]:
    """The local names that hold a ``Settings`` in ``function`` (and the functions nested in it)."""
    names = {"settings"}
    if module.name == SETTINGS_MODULE and cls == "Settings":
        names.add("self")
    for node in ast.walk(function):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            arguments = node.args
            every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
            names |= {a.arg for a in every if _names_settings(a.annotation)}
    return names


def _holds_settings(node: ast.expr, names: set[str]) -> bool:
    """``settings``, a parameter typed ``Settings``, or ``<anything>.settings``."""
    if isinstance(node, ast.Name):
        return node.id in names
    return isinstance(node, ast.Attribute) and node.attr == "settings"


@dataclass
class _Walk:
    reads: set[str] = field(default_factory=set)
    seen: set[tuple[str, str]] = field(default_factory=set)

    def definition(self, module: _Module, name: str) -> None:
        if (module.name, name) in self.seen:
            return
        self.seen.add((module.name, name))
        node = module.defs[name]
        if isinstance(node, ast.ClassDef):
            if module.name == SETTINGS_MODULE:
                return  # its methods only as they are used (``settings.table``), never all of them
            for member in node.body:
                if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef):
                    self.definition(module, f"{node.name}.{member.name}")
            return
        cls = name.partition(".")[0] if "." in name else None
        self.function(node, module, cls)

    def function(self, function: Function, module: _Module, cls: str | None) -> None:
        names = _settings_names(function, module, cls)
        settings = _module(SETTINGS_MODULE)
        for node in ast.walk(function):
            if isinstance(node, ast.Attribute) and _holds_settings(node.value, names):
                if node.attr in FIELDS:
                    self.reads.add(node.attr)
                elif (
                    settings is not None and node.attr not in NOT_FOLLOWED and f"Settings.{node.attr}" in settings.defs
                ):
                    self.definition(settings, f"Settings.{node.attr}")
                continue
            dotted = _dotted(node) if isinstance(node, ast.Name | ast.Attribute) else None
            if dotted is None:
                continue
            head, _, rest = dotted.partition(".")
            if head == "self" and cls is not None and rest:
                target = f"{module.name}.{cls}.{rest}"
            elif head in module.aliases:
                target = ".".join([module.aliases[head], *([rest] if rest else [])])
            else:
                target = f"{module.name}.{dotted}"
            found = _resolve(target)
            if found is not None and found[0].name != SETTINGS_MODULE:
                self.definition(*found)


@cache
def settings_read_by(*entries: str) -> tuple[str, ...]:
    """The fields (in ``Settings`` order) that the functions named ``entries`` (dotted:
    ``graph_service.entrypoints.cli._serve``) read, and everything they name, as the module says."""
    walk = _Walk()
    for entry in entries:
        found = _resolve(entry)
        if found is None:
            raise ValueError(f"no function {entry} in a module that imports {SETTINGS_MODULE}")
        walk.definition(*found)
    return tuple(f.name for f in fields(Settings) if f.name in walk.reads)
