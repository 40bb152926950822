"""``Robots.allows`` answers for any path a handler can build, lone surrogates included."""

from __future__ import annotations

from spire_core.robots import Robots


def test_a_path_with_a_lone_surrogate_is_answered_not_refused() -> None:
    rules = Robots.parse("User-agent: *\nDisallow: /private\n")
    assert rules.allows("/\ud800")
    assert not rules.allows("/private/\udfff")
    assert rules.allows("http://a.example/x\ud800y")
