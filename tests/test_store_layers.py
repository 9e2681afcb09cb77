"""The store's layers form one chain with real seams: no stubs, no re-declared state.

``Repository`` stacks its layers one on another (``store/base.py`` describes the chain); each
layer may use only what it or a layer below it defines, so reading a module from the bottom
up never meets a name that is defined further up.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path

from gitmem.store.repository import Repository

STORE = Path(__file__).resolve().parent.parent / "gitmem" / "store"


def _chain() -> list[type]:
    return [cls for cls in Repository.__mro__ if cls is not object]


def _class_ast(cls: type) -> ast.ClassDef:
    node = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0]
    assert isinstance(node, ast.ClassDef)
    return node


def _assigned_on_self(node: ast.ClassDef) -> set[str]:
    names = set()
    for item in ast.walk(node):
        targets = (
            item.targets
            if isinstance(item, ast.Assign)
            else ([item.target] if isinstance(item, ast.AnnAssign) else [])
        )
        for target in targets:
            for sub in ast.walk(target):
                if (
                    isinstance(sub, ast.Attribute)
                    and isinstance(sub.value, ast.Name)
                    and sub.value.id == "self"
                ):
                    names.add(sub.attr)
    return names


def test_repository_is_one_chain_of_layers() -> None:
    chain = _chain()
    assert all(len(cls.__bases__) == 1 for cls in chain), [
        (cls.__name__, [b.__name__ for b in cls.__bases__]) for cls in chain
    ]
    assert chain[-1].__bases__ == (object,)


def test_each_layer_uses_only_what_it_or_a_layer_below_defines() -> None:
    chain = _chain()
    missing = []
    for at, cls in enumerate(chain):
        below = chain[at:]  # this class and every class under it
        known = {name for layer in below for name in vars(layer)}
        known |= {name for layer in below for name in _assigned_on_self(_class_ast(layer))}
        for item in ast.walk(_class_ast(cls)):
            if (
                isinstance(item, ast.Attribute)
                and isinstance(item.value, ast.Name)
                and item.value.id == "self"
                and item.attr not in known
                and not hasattr(object, item.attr)
            ):
                missing.append(f"{cls.__name__}: self.{item.attr}")
    assert sorted(set(missing)) == []


def test_no_stub_and_no_redeclared_state_in_the_store() -> None:
    chain = _chain()
    found = []
    for path in sorted(STORE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                stubs = [n.name for n in ast.walk(node) if isinstance(n, ast.FunctionDef)]
                found += [f"{path.name}:{node.lineno}: stub {name}" for name in stubs]
    for at, cls in enumerate(chain):
        # a bare class-level annotation declares state some other class sets
        owned_below = {
            name for layer in chain[at + 1 :] for name in _assigned_on_self(_class_ast(layer))
        }
        for item in _class_ast(cls).body:
            if (
                isinstance(item, ast.AnnAssign)
                and isinstance(item.target, ast.Name)
                and (item.value is None or item.target.id in owned_below)
            ):
                found.append(f"{cls.__name__}: {item.target.id} re-declared")
    assert found == []
