"""matplotlib figures in states: copied without touching pyplot.

Imported by the copier the first time it meets a matplotlib type (matplotlib
is never a dependency). A Figure copies the way pickle rebuilds it, through its
``__getstate__``, except for one entry: a figure that pyplot manages says so
(``_restore_to_pylab``), and unpickling such a figure registers it with pyplot
as a new current figure. Every copy of a state would then add a figure to
pyplot's registry, never freed, and ``plt.plot`` would draw on it. The copy
leaves it out: a copied figure belongs to no pyplot registry, as a figure
that a Jupyter cell showed and closed.

A ``cbook.Grouper`` (figures keep their aligned labels in two) maps each
joined object to one set they share; its ``__getstate__`` gives each object a
set of its own, so pickle forgets which objects were joined. The copy takes
its attributes as they are: the copier keeps shared sets shared.

Compared (``values``), a figure is what it shows: two are equal if they render
to the same PNG. Their insides hold caches and counters that a copy or a save
does not keep (cached inverse transforms, dead weak references to parents, the
next callback id), so no structural comparison could call a copy equal. A copy
of each is rendered, never the stored figure, which other cells may be copying.
An artist in a figure (an Axes, a line) is equal to another if their figures are.
"""

import io

from matplotlib.artist import Artist
from matplotlib.cbook import Grouper
from matplotlib.figure import Figure

from ..cell import call_user, drop_tracebacks
from ..copying.names import copy_names
from ..copying.dispatch import register
from ..values import NotCompared, register_comparer


def copy_figure(copier, figure):
    func, args, state, *rest = figure.__reduce_ex__(4)
    if isinstance(state, dict) and "_restore_to_pylab" in state:
        state = {key: value for key, value in state.items() if key != "_restore_to_pylab"}
    return copier.reconstruct(figure, func, args, state, *rest)


register(Figure, copy_figure, subclasses=True)


def copy_grouper(copier, grouper):
    new = object.__new__(type(grouper))
    copier.memo[id(grouper)] = new
    copier.inside_object += 1  # a part that fails is the whole Grouper's failure
    try:
        new.__dict__.update((yield vars(grouper)))
    finally:
        copier.inside_object -= 1
    return new


register(Grouper, copy_grouper, subclasses=True)


def equal_figures(a, b, budget):
    """Pairs for ``values.equal``: none if the two figures render alike, else None."""
    mine, theirs = _rendered(a, budget), _rendered(b, budget)
    return () if mine == theirs else None


def _rendered(figure, budget):
    """The PNG of a copy of ``figure`` at its own size and resolution, made once a diff."""
    kept = budget.kept.get(("png", id(figure)))
    if kept is None:
        image = io.BytesIO()
        _, failed = call_user(_render_copy, figure, image)
        if failed is not None:
            drop_tracebacks(failed)
            raise NotCompared(f"a figure could not be rendered ({type(failed).__name__})")
        budget.spend(data=image.tell())
        kept = budget.kept["png", id(figure)] = (figure, image.getvalue())  # keeps its id
    return kept[1]


def _render_copy(figure, image):
    copied = {}
    copy_names({"figure": figure}, ["figure"], copied)
    copied["figure"].savefig(image, format="png", dpi=figure.dpi)


def equal_artists(a, b, budget):
    """An artist (an Axes, a line) is equal to another if their figures are."""
    mine, theirs = a.get_figure(), b.get_figure()
    if mine is None or theirs is None:
        raise NotCompared("a matplotlib artist outside any figure")
    return [(mine, theirs)]


register_comparer(Figure, equal_figures, subclasses=True)
register_comparer(Artist, equal_artists, subclasses=True)
