"""Notebook syntax in cells: IPython-style magics and shell commands (``magics``,
``commands``) and ``%time``/``%timeit`` (``timing``)."""
