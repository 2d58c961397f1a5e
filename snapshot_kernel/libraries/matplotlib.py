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
"""

from matplotlib.cbook import Grouper
from matplotlib.figure import Figure

from ..copying.dispatch import register


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
