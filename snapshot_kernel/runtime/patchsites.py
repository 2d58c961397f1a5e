"""Where a cell's code may patch a module: found in its AST when it is compiled
(``cell.compile_cell``), and watched by ``monkeypatches`` before it runs."""

import ast


def targets(tree):
    """``((chain, name), ...)`` for each place ``tree`` (a cell's AST) assigns or deletes:
    ``chain`` is the dotted names of the object (``("pd", "DataFrame")``), ``name`` the
    attribute, or the key of ``sys.modules`` (chain ``("sys", "modules", "[]")``). A
    chain whose first name the cell imports starts with that import instead:
    ``("import json", "JSONEncoder")``, ``("from os import path", "sep")``."""
    found, imported = set(), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    imported[alias.asname] = f"import {alias.name}"
                else:
                    head = alias.name.partition(".")[0]
                    imported[head] = f"import {head}"
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            for alias in node.names:
                imported[alias.asname or alias.name] = f"from {node.module} import {alias.name}"
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
            chain = _chain(node.value)
            if chain:
                found.add((chain, node.attr))
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)):
            key = node.slice
            if _chain(node.value) == ("sys", "modules") and isinstance(key, ast.Constant) \
                    and isinstance(key.value, str):
                found.add((("sys", "modules", "[]"), key.value))
        elif isinstance(node, ast.Call):
            target = _call_target(node)
            if target is not None:
                found.add(target)
    return tuple(sorted(((imported[chain[0]],) + chain[1:] if chain[0] in imported else chain,
                         name) for chain, name in found))


def _call_target(node):
    """The place a call patches: ``setattr(mod, "name", v)`` and ``delattr``, pytest's
    ``monkeypatch.setattr(mod, "name", v)`` or ``monkeypatch.setattr("mod.name", v)``,
    ``unittest.mock``'s ``patch("mod.name")`` and ``patch.object(mod, "name")`` (whose
    patches outlive the cell once ``start()`` is called); else None. A dotted string's
    chain is ``("dotted mod.Class",)``: the module is its longest imported prefix."""
    func, args = node.func, node.args
    name = func.id if isinstance(func, ast.Name) else \
        func.attr if isinstance(func, ast.Attribute) else None
    if name is None or not args:
        return None
    first, second = _text(args[0]), _text(args[1]) if len(args) > 1 else None
    if name in ("setattr", "delattr") and second is not None:
        chain = _chain(args[0])
        return (chain, second) if chain else None
    if name in ("setattr", "delattr", "patch") and first is not None and "." in first:
        path, _, attribute = first.rpartition(".")
        return ((f"dotted {path}",), attribute)
    if name == "object" and second is not None and (_chain(func.value) or ("",))[-1] == "patch":
        chain = _chain(args[0])
        return (chain, second) if chain else None
    return None


def _text(node):
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) \
        else None


def _chain(node):
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    names.append(node.id)
    return tuple(reversed(names))


def source_targets(code):
    """``targets`` of source that compiled without an AST (one expression): only a
    call can patch there (``setattr``, ``delattr``, ``patch``)."""
    if "setattr" not in code and "delattr" not in code and "patch" not in code:
        return ()
    try:
        return targets(ast.parse(code, mode="eval"))
    except (SyntaxError, ValueError):
        return ()
