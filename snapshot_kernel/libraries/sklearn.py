"""scikit-learn's fitted trees in states: a copy that holds what its origin holds is it.

Imported by the copier the first time it meets a type of ``sklearn.tree._tree``
(scikit-learn is never a dependency, and a process that never imported that module is not
made to). A fitted tree model (a decision tree, each of a forest's or a boosting's
estimators) keeps its nodes in a ``sklearn.tree._tree.Tree``, whose memory is C memory
the Tree owns. It copies through its reduce value, which holds new arrays each time (and
views of that memory), so a copy of it is never made of the very objects its stored
origin is made of, and without this check a cell that only read a forest stored all its
trees again, and saved them again (``plot_forest_importances`` cell 3, in
``benchmarks/gallery.py``).

Compared by value, a Tree's reduce value is all it is: numbers, and arrays that nothing
else holds (the Tree's own memory, or made for the reduce value). So a copy whose reduce
value equals its origin's, dtypes and shapes and bytes (of each field: the padding of a
node record is whatever the memory held), is that origin. The check reads
both trees' nodes once, as the copy did.
"""

from sklearn.tree._tree import Tree

import numpy as np

from ..copying.dispatch import register, register_same

_NUMBERS = (int, float, str, bytes, bool, type(None))


def same_tree(new, origin):
    """True if the Tree ``new`` (a copy just built) is what ``origin`` is."""
    try:
        return _equal(new.__reduce__(), origin.__reduce__())
    except Exception:  # a version whose reduce raises on either: then it is a copy
        return False


def _equal(a, b):
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return (a.dtype == b.dtype and a.shape == b.shape and not a.dtype.hasobject
                and _same_bytes(a, b))
    if type(a) in (tuple, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if type(a) is dict:
        return list(a) == list(b) and all(_equal(a[key], b[key]) for key in a)
    if type(a) in _NUMBERS:
        return a == b or a != a and b != b  # (NaN is NaN)
    return a is b  # the class the reduce value rebuilds from


def _same_bytes(a, b):
    """Each field's bytes: a node record's padding is whatever the memory held."""
    if a.dtype.names is None:
        return a.tobytes() == b.tobytes()
    return all(a[name].tobytes() == b[name].tobytes() for name in a.dtype.names)


def copy_tree(copier, tree):
    """The copy of a Tree, made at once from its reduce value: its arrays are views of the
    Tree's memory, which ``__setstate__`` copies into the new Tree's, so copying them first
    would copy them twice. Storing, a Tree whose reduce value equals its origin's is that
    origin, found before a copy is made."""
    reduced = tree.__reduce__()
    if len(reduced) != 3 or type(reduced[2]) is not dict:  # a version unlike those we know
        return copier.copy_object(tree)
    cls, args, state = reduced
    if copier.storing:
        origin = copier.origins.get(id(tree))
        if type(origin) is Tree and _equal(reduced, origin.__reduce__()):
            return origin
    new = cls(*args)  # (the class count array in ``args`` is a new one: the Tree copies it)
    new.__setstate__(state)
    return new


register(Tree, copy_tree)
register_same(Tree, same_tree)
