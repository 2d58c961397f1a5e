"""Where states live: namespace layers (``storage``), an execution's copy of one
(``working``), copy-on-write buffers (``cow``), and the state directory of
``--state-dir`` (``store``, ``catalogue``, ``persist``)."""
