"""The sandbox of the server process: what its cells may read, write, reach and signal
(Landlock, seccomp, no new privileges), applied before the process starts a thread."""
