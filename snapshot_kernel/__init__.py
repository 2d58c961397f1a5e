"""snapshot-kernel: a branchable Python execution server. See README.md.

Cells can import what they use of it: ``from snapshot_kernel import checkpoint``.
"""

from .checkpoints import checkpoint, checkpoint_every, progress

__all__ = ["checkpoint", "checkpoint_every", "progress"]
