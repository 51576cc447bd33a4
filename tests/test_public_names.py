"""Each package's ``__init__`` states its public face: a docstring saying what the
package is for, and ``__all__`` naming what people import from it, every name of which
the package gives (its own, one imported on first use, or one of its modules)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

SRC = Path(__file__).parents[1] / "src" / "kvlab"
PACKAGES = sorted(".".join(p.parent.relative_to(SRC.parent).parts)
                  for p in SRC.rglob("__init__.py"))


@pytest.mark.parametrize("name", PACKAGES)
def test_the_package_says_what_it_is_for_and_gives_every_public_name(name: str) -> None:
    package = importlib.import_module(name)
    assert (package.__doc__ or "").strip(), f"{name}: its __init__ has no docstring"
    public = getattr(package, "__all__", None)
    assert public, f"{name}: its __init__ has no __all__"
    assert len(set(public)) == len(public), f"{name}: a name twice in __all__"
    for attr in public:
        folder = SRC.parent.joinpath(*name.split("."), attr)
        if folder.is_dir() or folder.with_suffix(".py").exists():
            importlib.import_module(f"{name}.{attr}")  # a module of it: importable
        else:
            assert getattr(package, attr, None) is not None, f"{name}.{attr} is missing"


def test_a_name_it_does_not_give_is_an_attribute_error() -> None:
    drivers = importlib.import_module("kvlab.bench.drivers")
    with pytest.raises(AttributeError, match="LoadEngine"):
        _ = drivers.LoadEngine
