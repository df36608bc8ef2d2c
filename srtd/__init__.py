"""srtd: an event-driven supervisor for disaggregated LLM-serving jobs on Slurm.

The public surface is small on purpose: load a recipe, build a plan, run it.
Everything else lives in private modules of the sub-packages.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
