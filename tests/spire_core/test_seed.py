"""Seeds: validation and unique keys."""

from __future__ import annotations

import pytest

from spire_core.errors import InvalidUrl
from spire_core.seed import Seed


def test_unique_key_is_the_canonical_url_for_a_get() -> None:
    assert Seed("http://Example.com/a?b=1&a=2#x").unique_key == "http://example.com/a?a=2&b=1"


def test_unique_key_adds_method_and_body_hash_for_other_methods() -> None:
    a = Seed("http://example.com/form", method="post", body=b"q=1")
    b = Seed("http://example.com/form", method="POST", body=b"q=2")
    assert a.method == "POST"
    assert a.unique_key.startswith("POST http://example.com/form ")
    assert a.unique_key != b.unique_key


def test_the_request_goes_out_as_written() -> None:
    assert Seed("http://example.com/b?z=1&a=2").url == "http://example.com/b?z=1&a=2"


def test_a_given_unique_key_is_kept_but_the_url_still_checked() -> None:
    assert Seed("http://example.com/", unique_key="mine").unique_key == "mine"
    with pytest.raises(InvalidUrl):
        Seed("nope", unique_key="mine")


def test_seeds_are_immutable_and_children_go_one_level_deeper() -> None:
    parent = Seed("http://example.com/", depth=2)
    with pytest.raises(AttributeError):
        parent.url = "http://other.example/"  # type: ignore[misc]
    child = parent.child("http://example.com/next", tag="t")
    assert (child.depth, child.tag, child.unique_key) == (3, "t", "http://example.com/next")
    assert parent.retried().attempt == 1
