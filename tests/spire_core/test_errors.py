"""The error tree: every error class is drawn in the module's docstring, each with its own category."""

from __future__ import annotations

import spire_core.errors as errors


def classes() -> list[type[errors.SpireError]]:
    found = [getattr(errors, name) for name in errors.__all__]
    return [cls for cls in found if isinstance(cls, type) and issubclass(cls, errors.SpireError)]


def test_every_error_is_in_the_docstring_tree() -> None:
    doc = errors.__doc__ or ""
    for cls in classes():
        assert f" {cls.__name__} " in doc, cls.__name__


def test_each_error_has_its_own_category() -> None:
    categories = [cls.category for cls in classes()]
    assert len(categories) == len(set(categories))


def test_every_error_carries_url_attempts_and_proxy() -> None:
    error = errors.ProxyError("refused", url="http://127.0.0.1:1/", proxy="http://u:***@127.0.0.1:3128")
    assert (error.url, error.attempts, error.proxy) == ("http://127.0.0.1:1/", 1, "http://u:***@127.0.0.1:3128")
    assert error.transient
    assert errors.HttpStatusError(503).transient
    assert not errors.HttpStatusError(404).transient
    assert not errors.ProtocolError("bad chunk").transient


def test_every_spire_error_class_is_in_the_tree_the_errors_module_draws() -> None:
    import importlib
    import pkgutil

    import spire
    import spire_core
    from spire_core import errors

    for package in (spire_core, spire):
        for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not module.name.endswith("__main__"):
                importlib.import_module(module.name)

    def subclasses(cls: type) -> list[type]:
        found = []
        for sub in cls.__subclasses__():
            found += [sub, *subclasses(sub)]
        return found

    tree = errors.__doc__ or ""
    missing = [
        f"{cls.__module__}.{cls.__name__}"
        for cls in subclasses(errors.SpireError)
        if cls.__module__.startswith(("spire.", "spire_core.")) and f" {cls.__name__} " not in tree
    ]
    assert missing == []
