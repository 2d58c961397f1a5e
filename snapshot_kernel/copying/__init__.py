"""The copier: a namespace deep-copied so the copy behaves like an independent process
(``copier.copy_names``), its type table (``dispatch``) and Python's own types' handlers."""
