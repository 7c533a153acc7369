"""The ``SG_*`` variables a command reads, for its ``--help``: name, default and the line that
documents the field in ``graph_service/settings.py`` (one source, so help and code cannot differ)."""

from __future__ import annotations

import ast
import inspect
import itertools
import textwrap
from collections.abc import Sequence
from dataclasses import MISSING, fields
from functools import cache

from graph_service import settings as settings_module
from graph_service.settings import Settings

__all__ = ["field_docs", "settings_epilog"]

SECRET_FIELDS = {"page_token_secret", "kafka_sasl_password"}


@cache
def field_docs() -> dict[str, str]:
    """Each ``Settings`` field's docstring (the string literal under it), joined into one line."""
    tree = ast.parse(inspect.getsource(settings_module))
    docs: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "Settings":
            body = node.body
            for statement, after in itertools.pairwise(body):
                if (
                    isinstance(statement, ast.AnnAssign)
                    and isinstance(statement.target, ast.Name)
                    and isinstance(after, ast.Expr)
                    and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)
                ):
                    docs[statement.target.id] = " ".join(after.value.value.replace("``", "").split())
    return docs


def _default(name: str) -> str:
    spec = next(f for f in fields(Settings) if f.name == name)
    value = spec.default if spec.default is not MISSING else ""
    if name in SECRET_FIELDS or value == "":
        return "(empty)"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def settings_epilog(reads: Sequence[str]) -> str:
    """The epilog listing ``reads``: ``SG_NAME (default: ...)`` and its description, indented."""
    docs = field_docs()
    known = {f.name for f in fields(Settings)}
    lines = ["environment (SG_* variables this command reads):"]
    for name in dict.fromkeys(reads):
        if name not in known:
            raise ValueError(f"not a setting: {name}")
        lines.append(f"  SG_{name.upper()} (default: {_default(name)})")
        lines += textwrap.wrap(docs.get(name, ""), width=96, initial_indent="      ", subsequent_indent="      ")
    return "\n".join(lines)
