"""The `srtd` command line.  Thin: each command parses, calls the library, renders."""

from srtd.cli._main import main

__all__ = ["main"]
