"""Where states live: namespace layers (``storage``), copy-on-write buffers (``cow``),
and the state directory of ``--state-dir`` (``store``, ``persist``)."""
