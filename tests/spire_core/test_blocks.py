"""Block pages: built-in vendor rules, TOML rules, bare statuses, and rule order."""

from __future__ import annotations

import cProfile
import pstats
from collections.abc import Mapping

import pytest

from spire_core.backend.http import HttpBackend
from spire_core.blocks import BlockKind, BlockRules, BlockSignal
from spire_core.errors import ConfigError
from spire_core.response import Headers, Response
from spire_core.seed import Seed
from tests.sites.server import Site


def response(status: int, headers: Mapping[str, str] | list[tuple[str, str]] | None = None, body: str = "") -> Response:
    return Response(
        url="https://shop.example/item/1", status=status, headers=Headers(headers or {}), body=body.encode()
    )


CLOUDFLARE_CHALLENGE = response(
    403,
    {
        "Server": "cloudflare",
        "CF-RAY": "8f1a2b3c4d5e6f70-LHR",
        "cf-mitigated": "challenge",
        "Content-Type": "text/html",
    },
    '<!DOCTYPE html><html lang="en-US"><head><title>Just a moment...</title></head><body>'
    "<script>(function(){window._cf_chl_opt={cvId: '3',cZone: \"shop.example\"};"
    "var cpo=document.createElement('script');cpo.src='/cdn-cgi/challenge-platform/h/g/orchestrate/chl_page/v1';"
    "}());</script></body></html>",
)
CLOUDFLARE_UAM = response(
    503,
    {"Server": "cloudflare", "CF-RAY": "8f1a2b3c4d5e6f71-CDG"},
    "<html><head><title>Just a moment...</title></head><body>Checking your browser</body></html>",
)
CLOUDFLARE_BLOCK = response(
    403,
    {"Server": "cloudflare", "CF-RAY": "8f1a2b3c4d5e6f72-AMS"},
    '<!DOCTYPE html><title>Attention Required! | Cloudflare</title><div class="cf-error-details">'
    "<h1>Sorry, you have been blocked</h1><h2>You are unable to access shop.example</h2></div>",
)
CLOUDFLARE_1020 = response(403, {"Server": "cloudflare", "Content-Type": "text/plain"}, "error code: 1020")
AKAMAI = response(
    403,
    {"Server": "AkamaiGHost", "Mime-Version": "1.0", "Content-Type": "text/html"},
    "<HTML><HEAD>\n<TITLE>Access Denied</TITLE>\n</HEAD><BODY>\n<H1>Access Denied</H1>\n \n"
    'You don\'t have permission to access "http&#58;&#47;&#47;shop&#46;example&#47;item&#47;1" on this server.<P>\n'
    "Reference&#32;&#35;18&#46;2d351ab8&#46;1700000000&#46;1a2b3c4d\n</BODY>\n</HTML>\n",
)
DATADOME = response(
    403,
    [("X-DataDome", "protected"), ("X-DD-B", "1"), ("Set-Cookie", "datadome=AbC123; Max-Age=31536000; Path=/")],
    "<html><head><title>shop.example</title></head><body><script data-cfasync=\"false\">var dd={'rt':'c',"
    "'cid':'AHrlqAAAAAMA','hsh':'0A1B2C','t':'fe','host':'geo.captcha-delivery.com'}</script>"
    '<script data-cfasync="false" src="https://ct.captcha-delivery.com/c.js"></script></body></html>',
)
PERIMETERX = response(
    403,
    {"Content-Type": "text/html"},
    "<html><head><title>Access to this page has been denied</title></head><body>"
    "<script>window._pxAppId = 'PXabc123';window._pxJsClientSrc = '/abc123/init.js';</script>"
    '<div id="px-captcha"></div><p>Press &amp; Hold to confirm you are a human (and not a bot).</p></body></html>',
)
IMPERVA_BLOCK = response(
    403,
    {"X-Iinfo": "12-3456789-0 0NNN RT(1700000000000 0) q(0 -1 -1 -1) r(0 -1)", "X-CDN": "Imperva"},
    '<html style="height:100%"><head><META NAME="ROBOTS" CONTENT="NOINDEX, NOFOLLOW"></head><body>'
    "Request unsuccessful. Incapsula incident ID: 123000450012345678-901234567890123456</body></html>",
)
IMPERVA_CHALLENGE = response(
    200,
    {"X-Iinfo": "7-1234567-1234568 NNNN CT(0 0 0) RT(1700000000000 1) q(0 0 0 -1) r(0 0)", "X-CDN": "Imperva"},
    '<html style="height:100%"><head><META NAME="ROBOTS" CONTENT="NOINDEX, NOFOLLOW"></head>'
    '<body style="margin:0px;height:100%"><iframe id="main-iframe" '
    'src="/_Incapsula_Resource?CWUDNSAI=24&xinfo=5-12345678-0%200NNN%20RT&incident_id=0-123&edet=12&cinfo=04000000" '
    'frameborder=0 width="100%" height="100%">Request unsuccessful.</iframe></body></html>',
)
AWS_WAF = response(405, {"x-amzn-waf-action": "captcha", "Content-Type": "text/html"}, "<html>captcha</html>")


@pytest.mark.parametrize(
    ("page", "vendor", "kind"),
    [
        (CLOUDFLARE_CHALLENGE, "cloudflare", BlockKind.CHALLENGE),
        (CLOUDFLARE_UAM, "cloudflare", BlockKind.CHALLENGE),
        (CLOUDFLARE_BLOCK, "cloudflare", BlockKind.BLOCK),
        (CLOUDFLARE_1020, "cloudflare", BlockKind.BLOCK),
        (AKAMAI, "akamai", BlockKind.BLOCK),
        (DATADOME, "datadome", BlockKind.CAPTCHA),
        (PERIMETERX, "perimeterx", BlockKind.CAPTCHA),
        (IMPERVA_BLOCK, "imperva", BlockKind.BLOCK),
        (IMPERVA_CHALLENGE, "imperva", BlockKind.CHALLENGE),
        (AWS_WAF, "aws-waf", BlockKind.CAPTCHA),
    ],
)
def test_each_builtin_vendor_is_recognised(page: Response, vendor: str, kind: BlockKind) -> None:
    assert BlockRules.builtin().check(page) == BlockSignal(vendor, kind)


@pytest.mark.parametrize(
    "page",
    [
        response(403, {"Content-Type": "text/html"}, "<h1>Forbidden</h1>"),
        response(429, {"Retry-After": "30"}, "Too Many Requests"),
        response(503, {"Server": "nginx"}, "<title>Just a moment...</title>"),
        # Ordinary pages served through these vendors carry their scripts, but are not blocks.
        response(
            200,
            {"Server": "cloudflare"},
            "<html><body><p>Tea</p><script>(function(){window.__CF$cv$params={r:'8f1a',t:'MTcw'};"
            "a.src='/cdn-cgi/challenge-platform/scripts/jsd/main.js';})();</script></body></html>",
        ),
        response(
            200, {"X-CDN": "Imperva"}, '<p>Tea</p><script src="/_Incapsula_Resource?SWJIYLWA=719d34d31c8e"></script>'
        ),
        response(200, {"X-DataDome": "protected"}, "<p>Tea</p>"),
    ],
)
def test_ordinary_responses_and_bare_statuses_are_not_blocks(page: Response) -> None:
    assert BlockRules.builtin().check(page) is None


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_a_challenge_fetched_from_a_server_is_recognised(site: Site) -> None:
    site.page(
        "/item/1",
        CLOUDFLARE_CHALLENGE.body,
        status=403,
        headers={"Server": "cloudflare", "cf-mitigated": "challenge"},
    )
    backend = HttpBackend(timeout=5)
    try:
        fetched = await backend.fetch(Seed(site.url("/item/1")))
    finally:
        await backend.aclose()
    assert BlockRules.builtin().check(fetched) == BlockSignal("cloudflare", BlockKind.CHALLENGE)


SHOP_RULE = """
[[rule]]
vendor = "shop"
kind = "block"
status = 403
header = "x-shop-block"
value = "Yes"
"""


def test_toml_rules_match_every_condition_and_ignore_ascii_case() -> None:
    rules = BlockRules.from_toml(SHOP_RULE)
    assert rules.check(response(403, {"X-Shop-Block": "YES"})) == BlockSignal("shop", BlockKind.BLOCK)
    assert rules.check(response(200, {"X-Shop-Block": "yes"})) is None
    assert rules.check(response(403, {"X-Shop-Block": "yes please"})) is None  # value is the whole value
    assert rules.check(response(403)) is None


def test_toml_rules_may_match_part_of_a_header_or_the_body_and_several_statuses() -> None:
    rules = BlockRules.from_toml(
        """
[[rule]]
vendor = "waf"
kind = "captcha"
status = [403, 429]
header = "set-cookie"
contains = "WAF_SESSION="

[[rule]]
vendor = "shop"
kind = "challenge"
body = "Please verify you are human"
"""
    )
    assert rules.check(response(429, {"Set-Cookie": "waf_session=1; Path=/"})) == BlockSignal("waf", BlockKind.CAPTCHA)
    assert rules.check(response(200, {}, "<p>please VERIFY you are human</p>")) == BlockSignal(
        "shop", BlockKind.CHALLENGE
    )
    assert rules.check(response(200, {}, "<p>Welcome</p>")) is None


@pytest.mark.parametrize(
    "text",
    [
        "[[rule]\nvendor = 'x'",  # not TOML
        "[[rule]]\nvendor = 'x'\nkind = 'banned'\nstatus = 403",  # unknown kind
        "[[rule]]\nkind = 'block'\nstatus = 403",  # no vendor
        "[[rule]]\nvendor = 'x'\nkind = 'block'",  # no condition: would match everything
        "[[rule]]\nvendor = 'x'\nkind = 'block'\nstatus = '403'",  # status not a number
        "[[rule]]\nvendor = 'x'\nkind = 'block'\nstatus = 1000",
        "[[rule]]\nvendor = 'x'\nkind = 'block'\nvalue = '1'",  # a value needs a header
        "[[rule]]\nvendor = 'x'\nkind = 'block'\nstatus = 403\ncolour = 'red'",  # unknown key
        "[rules]\nvendor = 'x'",  # not [[rule]]
    ],
)
def test_bad_toml_rules_raise_config_error(text: str) -> None:
    with pytest.raises(ConfigError):
        BlockRules.from_toml(text)


def test_statuses_make_bare_statuses_blocks() -> None:
    rules = BlockRules.statuses([403, 429])
    assert rules.check(response(403)) == BlockSignal("status", BlockKind.BLOCK)
    assert rules.check(response(429)) == BlockSignal("status", BlockKind.BLOCK)
    assert rules.check(response(404)) is None
    with pytest.raises(ConfigError):
        BlockRules.statuses([42])


def test_rules_match_in_order() -> None:
    vendors_first = BlockRules.builtin()
    vendors_first.extend(BlockRules.statuses([403]))
    assert vendors_first.check(CLOUDFLARE_CHALLENGE) == BlockSignal("cloudflare", BlockKind.CHALLENGE)
    assert vendors_first.check(response(403)) == BlockSignal("status", BlockKind.BLOCK)
    statuses_first = BlockRules.statuses([403])
    statuses_first.extend(BlockRules.builtin())
    assert statuses_first.check(CLOUDFLARE_CHALLENGE) == BlockSignal("status", BlockKind.BLOCK)


def test_builtin_gives_a_copy_that_extend_does_not_share() -> None:
    extended = BlockRules.builtin()
    extended.extend(BlockRules.statuses([403]))
    assert extended.check(response(403)) is not None
    assert BlockRules.builtin().check(response(403)) is None
    assert len(extended) == len(BlockRules.builtin()) + 1


def test_extend_applies_to_statuses_already_checked() -> None:
    rules = BlockRules.builtin()
    assert rules.check(response(403)) is None
    rules.extend(BlockRules.statuses([403]))
    assert rules.check(response(403)) == BlockSignal("status", BlockKind.BLOCK)


def test_an_ordinary_page_is_ruled_out_in_a_dozen_calls_not_a_header_lookup_per_rule() -> None:
    """The check runs on every page: an ordinary one lacks every rule's header and marker, which is
    seen from one read of its header names and one lowered copy of the start of its body."""
    page = response(
        200,
        {"Server": "nginx", "Content-Type": "text/html", "Content-Length": "6000", "Date": "Mon, 01 Jan 2024"},
        "<p>Tea</p>" * 600,
    )
    rules = BlockRules.builtin()
    assert rules.check(page) is None  # the first check of a status plans it
    profile = cProfile.Profile()
    profile.enable()
    signal = rules.check(page)
    profile.disable()
    assert signal is None
    calls: int = pstats.Stats(profile).total_calls  # type: ignore[attr-defined]
    assert calls <= 15, calls
