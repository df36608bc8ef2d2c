"""`$SRTCTL_SOURCE_DIR` in srtd: on its own, so `srtd run` of a saved plan can export it
without loading the recipe models `srtd.context` is built on."""

from __future__ import annotations

import os

SOURCE_DIR_VAR = "SRTCTL_SOURCE_DIR"


def source_dir() -> str:
    """What srt-slurm's `$SRTCTL_SOURCE_DIR` is in srtd: the directory srtd runs in.

    srtctl's batch script exports its checkout (the directory `srtctl apply` ran in, whose
    `configs/` and `examples/` recipes name) and every step inherits it.  srtd's checkout
    is the user's: the directory srtd was started in, which `srtd submit` makes the job's
    working directory too.  A value already in srtd's environment is kept.
    """
    return os.path.abspath(os.environ.get(SOURCE_DIR_VAR) or os.getcwd())
