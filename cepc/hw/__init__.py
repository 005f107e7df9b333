"""hw stage of cepc."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def refusing(component) -> Iterator[None]:
    """Around a component's checks of its arguments: if one raises ValueError, the component, made by
    then (Amaranth's ``MustUse`` makes it before ``__init__`` runs) but never to be elaborated, is
    silenced, so that it does not warn ``UnusedElaboratable`` when the collector meets it."""
    try:
        yield
    except ValueError:
        component._MustUse__silence = True
        raise
