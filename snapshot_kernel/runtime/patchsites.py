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
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ("setattr", "delattr") and len(node.args) >= 2:
            chain, name = _chain(node.args[0]), node.args[1]
            if chain and isinstance(name, ast.Constant) and isinstance(name.value, str):
                found.add((chain, name.value))
    return tuple(sorted(((imported[chain[0]],) + chain[1:] if chain[0] in imported else chain,
                         name) for chain, name in found))


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
    ``setattr``/``delattr`` call can patch there."""
    if "setattr" not in code and "delattr" not in code:
        return ()
    try:
        return targets(ast.parse(code, mode="eval"))
    except (SyntaxError, ValueError):
        return ()
