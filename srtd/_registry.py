"""A table of named rows: the one place a name (an engine, a frontend, a kind) is compared."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from typing import ClassVar, Generic, TypeVar


def unknown_name(what: str, name: str, known: Iterable[str]) -> str:
    """The one wording of a name no table knows: the closest known name, then all of them."""
    names = list(known)
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.75)
    hint = f"; did you mean {close[0]!r}? known:" if close else "; known:"
    return f"unknown {what} {name!r}{hint} {', '.join(names)}"


class Row:
    """A registry row: a class whose name the registry sets."""

    name: ClassVar[str] = ""


R = TypeVar("R", bound=Row)


class Registry(Generic[R]):
    """Rows registered by name with a class decorator; each class is instantiated once."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._rows: dict[str, R] = {}

    def register(self, name: str) -> Callable[[type[R]], type[R]]:
        def decorate(cls: type[R]) -> type[R]:
            if name in self._rows:
                raise ValueError(f"{self.what} {name!r} is registered twice")
            cls.name = name
            self._rows[name] = cls()
            return cls

        return decorate

    def get(self, name: str) -> R | None:
        return self._rows.get(name)

    def unknown(self, name: str) -> str:
        """What to say of a name this table does not hold."""
        return unknown_name(self.what, name, self.names())

    def names(self) -> list[str]:
        return sorted(self._rows)

    def rows(self) -> list[R]:
        """Every row, in the order they were registered."""
        return list(self._rows.values())
