"""Python's built-in iterators and dict views, made again with their type and place.

The generic path rebuilds an object from its reduction, as pickle does, and for
iterators that loses some of them: an exhausted iterator over a sequence reduces
to ``iter(())`` (a tuple iterator, whatever it was: a numpy array's, a string's),
and one over a dict, a set or an OrderedDict to an iterator over a list of what it
has left, which no longer sees its container. Dict views do not reduce at all.
Here:

* an exhausted iterator is a new exhausted one of its type (``spent``);
* one over a dict (keys, values, items, reversed or not), a set or an OrderedDict
  is described by ``place``: its kind, its container and the items it has left. It
  is made again (``rebuild``) over the copied container and advanced as far; the
  copier then checks that it yields the copies of those items, one for one (a set's
  copy may order its items otherwise), else it cannot be copied and is shared;
* one over a sequence that is not exhausted keeps its reduction, which is exact;
* a dict view is a view of the copied dict.

``states/persist.py`` pickles these the same way.
"""

import array
import collections
import gc
import itertools

from .dispatch import Uncopyable, register

_OrderedDict = collections.OrderedDict


class _Nothing:
    """A sequence with no items: ``iter()`` of it is the plain sequence iterator."""

    def __getitem__(self, index):
        raise IndexError(index)


# Sequence iterators, by type: what makes an empty one (``spent`` exhausts it).
_SEQUENCES = {type(make()): make for make in (
    lambda: iter([]), lambda: reversed([]), lambda: iter(()), lambda: reversed(()),
    lambda: iter(""), lambda: iter("\xe9"), lambda: iter(b""), lambda: iter(bytearray()),
    lambda: iter(_Nothing()), lambda: iter(int, 0), lambda: iter(array.array("b")))}

# Iterators over containers: each kind, and what makes one over a container. A kind's
# first word names its container: what makes an empty one, and the classes it may be.
MAKERS = {
    "dict_keys": lambda d: iter(dict.keys(d)), "dict_values": lambda d: iter(dict.values(d)),
    "dict_items": lambda d: iter(dict.items(d)),
    "dict_keys_reversed": lambda d: reversed(dict.keys(d)),
    "dict_values_reversed": lambda d: reversed(dict.values(d)),
    "dict_items_reversed": lambda d: reversed(dict.items(d)),
    "set": lambda s: (set.__iter__ if isinstance(s, set) else frozenset.__iter__)(s),
    "odict_keys": lambda d: iter(_OrderedDict.keys(d)),
    "odict_values": lambda d: iter(_OrderedDict.values(d)),
    "odict_items": lambda d: iter(_OrderedDict.items(d)),
    "odict_keys_reversed": lambda d: reversed(_OrderedDict.keys(d)),
    "odict_values_reversed": lambda d: reversed(_OrderedDict.values(d)),
    "odict_items_reversed": lambda d: reversed(_OrderedDict.items(d)),
}
_EMPTY = {"dict": dict, "set": set, "odict": _OrderedDict}
_OVER = {"dict": dict, "set": (set, frozenset), "odict": _OrderedDict}
# Iterator type -> the kinds it can be (an OrderedDict's iterators share one type).
KINDS = {}
for _kind, _make in MAKERS.items():
    KINDS.setdefault(type(_make(_EMPTY[_kind.split("_")[0]]())), []).append(_kind)

# Dict views, by type: what makes one over a dict.
VIEWS = {type(make(_OrderedDict())): make for make in (
    dict.keys, dict.values, dict.items, _OrderedDict.keys, _OrderedDict.values,
    _OrderedDict.items)}


def spent(kind):
    """A new exhausted iterator of type ``kind`` (or of container kind ``kind``)."""
    make = _SEQUENCES[kind] if isinstance(kind, type) else (
        lambda: MAKERS[kind](_EMPTY[kind.split("_")[0]]()))
    it = make()
    for _ in it:
        pass
    return it


def exhausted(reduction):
    """True if a sequence iterator's ``__reduce__()`` is that of an exhausted one: no
    position, and one empty argument (a live one has a position, or a callable's two)."""
    return len(reduction) == 2 and len(reduction[1]) == 1 and len(reduction[1][0]) == 0


def place(it):
    """``(kind, container, left)`` of an iterator over a dict, set or OrderedDict:
    ``container`` None if it is exhausted, else the list of the items it has left.
    Uncopyable if it cannot be made again (its container changed size under it)."""
    kinds = KINDS[type(it)]
    over = _container(it, _OVER[kinds[0].split("_")[0]])
    if over is None:
        return kinds[0], None, []
    try:
        left = it.__reduce__()[1][0]  # what a copy of it would yield: it is not advanced
    except RuntimeError as exc:  # its container changed size: advancing it fails
        raise Uncopyable(f"a {type(it).__name__} that cannot go on ({exc})") from None
    done = len(over) - len(left)
    found = [kind for kind in kinds if _yields(rebuild(kind, over, done), left, _same)]
    if len(found) > 1 and left:
        raise Uncopyable("an OrderedDict iterator whose keys, values or items cannot be "
                         "told apart")
    if not found:
        raise Uncopyable(f"a {type(it).__name__} whose place cannot be found again")
    return found[0], over, left


def _container(it, classes):
    """What ``it`` iterates (the one of its referents that is a ``classes``), or None."""
    return next((each for each in gc.get_referents(it) if isinstance(each, classes)), None)


def rebuild(kind, over, done):
    """An iterator of ``kind`` over ``over``, advanced past ``done`` items."""
    it = MAKERS[kind](over)
    collections.deque(itertools.islice(it, done), maxlen=0)
    return it


def yields(it, left, copy_of):
    """True if ``it`` will yield the ``copy_of`` each of ``left`` (item tuples part for
    part), and nothing else. Reads a twin of ``it``, not ``it``."""
    return _yields(it.__reduce__()[1][0], left, copy_of)


def _yields(items, left, copy_of):
    if not isinstance(items, list):
        items = list(items)
    if len(items) != len(left):
        return False
    for new, old in zip(items, left):
        if type(old) is tuple and type(new) is tuple and len(old) == len(new) == 2:
            if copy_of(old[0]) is not new[0] or copy_of(old[1]) is not new[1]:
                return False
        elif copy_of(old) is not new:
            return False
    return True


def _same(obj):
    return obj


# -- pickling (``states/persist``): pickles name the functions below, so they must not move --

def reduction(it):
    """What pickle rebuilds ``it`` from, or None where its own reduction is exact;
    ValueError if it cannot be made again."""
    if type(it) in _SEQUENCES:
        return (spent_named, (type(it).__name__,)) if exhausted(it.__reduce__()) else None
    if type(it) in VIEWS:
        return view_named, (type(it).__name__, _container(it, dict))
    try:
        kind, over, left = place(it)
    except Uncopyable as exc:
        raise ValueError(str(exc)) from None
    if over is None:
        return spent_named, (kind,)
    return made_again, (kind, over, len(over) - len(left), left)


def spent_named(name):
    """``spent`` of the sequence iterator type, or the container kind, ``name``."""
    return spent(_SEQUENCE_NAMES.get(name, name))


def made_again(kind, over, done, left):
    """``rebuild``, if it then yields ``left``; else an iterator over the list ``left``: a
    set of strings that a new process (another hash seed) orders otherwise."""
    it = rebuild(kind, over, done)
    return it if yields(it, left, _same) else iter(left)


def view_named(name, over):
    """A view of type ``name`` of the dict ``over``."""
    return _VIEW_NAMES[name](over)


_SEQUENCE_NAMES = {cls.__name__: cls for cls in _SEQUENCES}
_VIEW_NAMES = {cls.__name__: make for cls, make in VIEWS.items()}
TYPES = frozenset(_SEQUENCES) | frozenset(KINDS) | frozenset(VIEWS)  # what ``reduction`` takes


# -- the copier's handlers ----------------------------------------------------------------

def copy_sequence_iterator(copier, it):
    """By its reduction, which is exact, unless it is exhausted: then a new exhausted one."""
    reduction = it.__reduce__()
    if exhausted(reduction):
        return spent(type(it))
    return copier.reconstruct(it, *reduction)


def copy_container_iterator(copier, it):
    """Over the copied container, as far on, if it then yields the copies of what it had left."""
    kind, over, left = place(it)
    if over is None:
        return spent(kind)
    new = rebuild(kind, (yield over), len(over) - len(left))
    if not yields(new, left, copier.lookup):
        raise Uncopyable(f"a {type(it).__name__} over a container whose copy orders its items "
                         "otherwise")
    return new


def copy_view(copier, view):
    """A view of the copied dict."""
    return VIEWS[type(view)]((yield _container(view, dict)))


for _type in _SEQUENCES:
    register(_type, copy_sequence_iterator)
for _type in KINDS:
    register(_type, copy_container_iterator)
for _type in VIEWS:
    register(_type, copy_view)
