"""The process-wide patches a running cell relies on, each installed once and a no-op in
threads that run no cell: captured streams, sliced waits and interrupts, plots, ``display``."""
