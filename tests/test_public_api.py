"""The exported surface of each package is exactly its sorted ``__all__``."""

from __future__ import annotations

import importlib

import pytest

PACKAGES = [
    "spire",
    "spire_core",
    "spire_core.frontier",
    "spire_core.backend",
    "spire_core.backend.browser",
    "spire_core.dataset",
    "spire_core.session",
    "spire.report",
    "spire.site",
    "spire.testing",
]


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_sorted_and_complete(name: str) -> None:
    module = importlib.import_module(name)
    exported = module.__all__
    assert exported == sorted(exported)
    # dir(), not vars(): a name imported on first use (spire_core.lazy) is in neither until then.
    public = {attr for attr in dir(module) if not attr.startswith("_")}
    submodules = {attr for attr in public if type(getattr(module, attr)).__name__ == "module"}
    assert set(exported) == public - submodules - {"annotations"}


def test_spire_re_exports_the_core_names_users_need() -> None:
    import spire
    import spire_core

    for name in ("Crawler", "Seed", "HostLimits", "Dataset", "Retry", "Stop", "SkipTag", "PauseTag"):
        assert getattr(spire, name) is getattr(spire_core, name)


def test_the_packages_ship_py_typed() -> None:
    from importlib.resources import files

    assert files("spire").joinpath("py.typed").is_file()
    assert files("spire_core").joinpath("py.typed").is_file()
