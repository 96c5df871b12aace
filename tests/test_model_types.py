"""The read models say what their fields hold: no field or property of a model in console/models is
typed `Any`, and every annotation resolves.

A field read from archon's tables is `Stored` (console/models/values.py: a column's value as stored,
which a hostile file decides), a parsed JSON column is `Json`, anything the console derives has its
own type. `Any` would hide which of these a screen or command is handling. `to_json()` and the other
methods are not fields: they build the `--json` documents and are not checked here.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = sorted((ROOT / "console" / "models").glob("*.py"))

# (module, class, field or property) typed Any on purpose, with why. Empty: keep it so.
JUSTIFIED: dict[tuple[str, str, str], str] = {}


def _annotations():
    for path in MODELS:
        tree = ast.parse(path.read_text(), filename=str(path))
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            for node in cls.body:
                if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                    yield path.stem, cls.name, node.target.id, node.annotation
                elif (isinstance(node, ast.FunctionDef) and node.returns is not None
                      and any(ast.unparse(d) in ("property", "cached_property") for d in node.decorator_list)):
                    yield path.stem, cls.name, node.name, node.returns


def _names(annotation: ast.expr) -> set[str]:
    """Every name an annotation uses, string forward references included."""
    found = set()
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found |= _names(ast.parse(node.value, mode="eval").body)
    return found


def test_the_models_are_found():
    fields = list(_annotations())
    assert len(fields) > 60, fields  # the walk reads the models, not an empty directory


def test_no_model_field_is_typed_any():
    typed_any = [f"{module}.{cls}.{name}: {ast.unparse(annotation)}"
                 for module, cls, name, annotation in _annotations()
                 if "Any" in _names(annotation) and (module, cls, name) not in JUSTIFIED]
    assert not typed_any, "typed Any (give the real type, or justify it in JUSTIFIED):\n" + "\n".join(typed_any)


def test_every_justification_is_still_needed():
    found = {(module, cls, name) for module, cls, name, annotation in _annotations() if "Any" in _names(annotation)}
    assert set(JUSTIFIED) <= found


def test_every_model_annotation_resolves():
    """`from __future__ import annotations` keeps annotations as text; a misspelt type would only
    show when something asks for it. Ask for every one."""
    for path in MODELS:
        module = importlib.import_module(f"console.models.{path.stem}")
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == module.__name__ and dataclasses.is_dataclass(value):
                typing.get_type_hints(value)
                for attr in vars(value).values():
                    if isinstance(attr, property) and attr.fget is not None:
                        typing.get_type_hints(attr.fget)
