"""The copier: a namespace deep-copied so the copy behaves like an independent process
(``names.copy_names``), its type table (``dispatch``) and Python's own types' handlers."""
