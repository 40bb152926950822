"""Reading HTML: readable text, page directives, canonical link, meta tags and title."""

from __future__ import annotations

import httpx
from parsel import Selector

from spire.markdown import to_markdown
from spire_core import html, nesting
from spire_core.html import Directives

# -- text -----------------------------------------------------------------------------------------


def test_each_heading_paragraph_list_item_and_table_cell_is_a_line() -> None:
    page = """<html><body>
      <h1>Title</h1><p>First <b>bold</b> paragraph.</p>
      <ul><li>one</li><li>two</li></ul>
      <table><tr><th>Name</th><td>Price</td></tr><tr><td>Tea</td><td>3</td></tr></table>
      <div>in a div<span> and a span</span></div>
    </body></html>"""
    assert html.text(page).split("\n") == [
        "Title",
        "First bold paragraph.",
        "one",
        "two",
        "Name",
        "Price",
        "Tea",
        "3",
        "in a div and a span",
    ]


def test_br_breaks_a_line() -> None:
    assert html.text("<p>12 High Street<br>Townsville<br/>AB1 2CD</p>") == "12 High Street\nTownsville\nAB1 2CD"


def test_runs_of_whitespace_collapse_to_one_space() -> None:
    page = "<p>  lots \n\t of   <em> space </em>  here  </p><p>\n</p>"
    assert html.text(page) == "lots of space here"


def test_pre_keeps_its_lines_and_indentation() -> None:
    page = "<p>Code:</p><pre>\ndef f():\n    return  1\n\n    # done\n</pre><p>after</p>"
    assert html.text(page) == "Code:\ndef f():\n    return  1\n\n    # done\nafter"


def test_entities_are_decoded() -> None:
    assert html.text("<p>Fish &amp; chips &lt;3 &eacute;t&#233; &#x2014; &quot;ok&quot;</p>") == (
        'Fish & chips <3 été — "ok"'
    )


def test_head_script_style_noscript_template_svg_and_textarea_are_left_out() -> None:
    page = """<html><head><title>T</title><meta name="x" content="y"><style>h1{}</style></head><body>
      <p>kept</p><script>var hidden = 1;</script><style>.a{}</style><noscript>enable js</noscript>
      <template><p>template</p></template><svg><text>svg text</text><title>svg title</title></svg>
      <textarea>typed</textarea><!-- a comment --><p>also kept</p></body></html>"""
    assert html.text(page) == "kept\nalso kept"


def test_text_reads_bytes_by_their_charset_and_a_selector() -> None:
    latin1 = '<html><head><meta charset="iso-8859-1"></head><body><p>caf\xe9</p></body></html>'.encode("latin-1")
    assert html.text(latin1) == "café"
    declared = '<?xml version="1.0" encoding="iso-8859-1"?><html><body><p>été</p></body></html>'
    assert html.text(declared) == "été"
    assert html.text(Selector(text="<p>a</p><p>b</p>")) == "a\nb"
    assert html.text("") == ""


# -- directives -----------------------------------------------------------------------------------


def test_meta_robots_noindex_and_nofollow() -> None:
    rules = Directives.read('<meta name="robots" content="noindex, nofollow">')
    assert (rules.index, rules.follow, rules.ai) == (False, False, True)
    assert Directives.read('<meta name="ROBOTS" content="NOFOLLOW">') == Directives(follow=False)
    assert Directives.read("<p>no rules</p>") == Directives()


def test_none_clears_index_and_follow() -> None:
    assert Directives.read('<meta name="robots" content="none">') == Directives(index=False, follow=False)


def test_a_meta_named_for_the_agent_applies_to_that_agent_only() -> None:
    page = '<meta name="ExampleBot" content="noindex"><meta name="otherbot" content="nofollow">'
    assert Directives.read(page, None, "examplebot") == Directives(index=False)
    assert Directives.read(page, None, "EXAMPLEBOT/1.0") == Directives(index=False)
    assert Directives.read(page) == Directives()


def test_x_robots_tag_headers_apply() -> None:
    headers = httpx.Headers([("X-Robots-Tag", "noindex"), ("x-robots-tag", "nofollow, noarchive")])
    assert Directives.read("<p>x</p>", headers) == Directives(index=False, follow=False)
    assert Directives.read(None, {"X-Robots-Tag": "none"}) == Directives(index=False, follow=False)
    assert Directives.read(None, [("x-robots-tag", "noai")]).ai is False


def test_an_x_robots_tag_naming_an_agent_applies_only_to_it() -> None:
    headers = httpx.Headers([("X-Robots-Tag", "examplebot: noindex, nofollow"), ("X-Robots-Tag", "otherbot: noai")])
    assert Directives.read(None, headers, "ExampleBot") == Directives(index=False, follow=False)
    assert Directives.read(None, headers, "otherbot") == Directives(ai=False, image_ai=False)
    assert Directives.read(None, headers) == Directives()


def test_noai_and_noimageai() -> None:
    assert Directives.read('<meta name="robots" content="noai, noimageai">') == Directives(ai=False, image_ai=False)
    assert Directives.read('<meta name="robots" content="noimageai">') == Directives(image_ai=False)


def test_other_directives_are_read_and_ignored() -> None:
    page = '<meta name="robots" content="noarchive, max-snippet:-1, max-image-preview:large, index, follow">'
    headers = {"X-Robots-Tag": "unavailable_after: 25 Jun 2030 15:00:00 PST, nosnippet"}
    assert Directives.read(page, headers, "examplebot") == Directives()


def test_the_restrictive_directive_wins_a_conflict() -> None:
    page = '<meta name="robots" content="index, follow"><meta name="robots" content="noindex">'
    assert Directives.read(page).index is False


# -- canonical, meta, title -----------------------------------------------------------------------


def test_canonical_is_the_first_canonical_link_as_written() -> None:
    page = """<head><link rel="stylesheet" href="/s.css"><link rel="Canonical" href=" ../item/1?b=2&amp;a=1 ">
      <link rel="canonical" href="https://other.example/"></head>"""
    assert html.canonical(page) == "../item/1?b=2&a=1"
    assert html.canonical('<link rel="canonical"><link rel="alternate canonical" href="/x">') == "/x"
    assert html.canonical("<p>none</p>") is None


def test_meta_reads_a_named_or_property_tag_without_case() -> None:
    page = """<head><meta name="Description" content="A shop."><meta property="og:title" content="Shop">
      <meta name="description" content="second"><meta name="empty"></head>"""
    assert html.meta(page, "description") == "A shop."
    assert html.meta(page, "OG:TITLE") == "Shop"
    assert html.meta(page, "empty") is None
    assert html.meta(page, "keywords") is None
    assert html.metas(page) == {"description": "A shop.", "og:title": "Shop"}


def test_title_is_the_page_title_with_whitespace_collapsed() -> None:
    page = (
        "<html><head><title>\n  The   Shop &amp; Co\n</title></head><body><svg><title>icon</title></svg></body></html>"
    )
    assert html.title(page) == "The Shop & Co"
    assert html.title("<body><svg><title>icon</title></svg></body>") is None
    assert html.title(Selector(text="<title>From a selector</title>")) == "From a selector"


def test_thousands_of_nested_elements_are_read_without_recursion() -> None:
    page = "<html><body>" + "<font>" * 1500 + "deep text" + "</body></html>"
    assert html.text(page) == "deep text"
    assert html.text(page.encode()) == "deep text"


def test_deep_trees_and_huge_text_nodes_are_parsed_whole() -> None:
    tree = html.parse("<div>" * 1000 + "<p>bottom</p>")
    assert max(len(list(element.iterancestors())) for element in tree.iter()) > 1000
    big = "x" * (11 * 1024 * 1024)
    assert len(html.text(f"<p>{big}</p>")) == len(big)
    assert len(html.text(f"<p>{big}</p>".encode())) == len(big)
    assert len(
        html.selector(f"<p>{big}</p>".encode(), "utf-8", "http://example.com/").css("p::text").get() or ""
    ) == len(big)


def test_a_lone_bom_is_an_empty_document_in_every_encoding() -> None:
    for body, encoding in [(b"\xef\xbb\xbf", "utf-8"), (b"\xef\xbb\xbf\r\n", "utf-8"), (b"\xff\xfe", "utf-16le")]:
        assert html.text(html.selector(body, encoding, "http://a.example/")) == ""


def nested(depth: int) -> bytes:
    return ("<div>" * depth + "x" + "</div>" * depth).encode()


def test_cut_at_max_depth_tells_a_tree_libxml2_cut_from_one_it_kept_whole() -> None:
    def libxml2(body: bytes) -> Selector:
        return Selector(body=body, encoding="utf-8", type="html")  # as libxml2 parses it, not flattened

    assert not html.cut_at_max_depth(libxml2(nested(2000)))
    assert html.cut_at_max_depth(libxml2(nested(3000)))
    assert html.cut_at_max_depth(nested(3000))  # markup is read as libxml2 parses it
    assert "x" not in libxml2(nested(3000)).xpath("string()").get()  # libxml2 keeps none of it
    for depth in (2000, 2044, 2045, 2046, 3000):  # the count of tags in the body tells as the tree does
        body = nested(depth)
        page = libxml2(body)
        assert html.cut_at_max_depth(page, body) == html.cut_at_max_depth(page), depth


def test_text_nested_past_the_parsers_limit_is_whole_in_text_selectors_and_markdown() -> None:
    levels = 3000
    words = [f"w{level}" for level in range(levels)]
    page = "<p>top</p>" + "".join(f"<div>{word}" for word in words) + "</div>" * levels + "<p>after</p>"
    expected = ["top", *words, "after"]
    assert html.text(page).split() == expected  # before: cut after 2,046 of the words, "after" lost too
    selected, deep = html.read_page(page.encode(), "utf-8", "http://a.example/")
    assert deep
    assert html.text(selected).split() == expected
    assert html.selector(page.encode(), "utf-8", "http://a.example/").css("div::text").getall() == words
    assert to_markdown(page).split() == expected
    assert not html.read_page(nested(2000), "utf-8", "http://a.example/")[1]  # within the limit: parsed as it is


def test_flattening_keeps_entities_comments_scripts_and_the_tags_above_its_depth() -> None:
    deep = "<b>" * (nesting.FLAT_DEPTH + 10) + "deep&amp;down" + "</b>" * (nesting.FLAT_DEPTH + 10)
    markup = f"<!DOCTYPE html><p class=a>&lt;x&gt;<!-- note --><script>if (a < b) {{}}</script><br/>{deep}</p>"
    flat = nesting.flattened(markup)
    assert flat.startswith("<!DOCTYPE html><p class=a>&lt;x&gt;<!-- note --><script>if (a < b) {}</script><br/>")
    assert flat.count("<b>") == nesting.FLAT_DEPTH - 1  # the p is one level
    assert flat.count("</b>") == nesting.FLAT_DEPTH - 1
    assert flat.endswith("deep&amp;down" + "</b>" * (nesting.FLAT_DEPTH - 1) + "</p>")
    blocks = nesting.flattened("<div>" * (nesting.FLAT_DEPTH + 2) + "a</div>b", blocks={"div"})
    assert blocks.endswith("<div><br><br>a<br>b")  # a block left out still ends a line: its words stay apart


def test_main_text_leaves_out_the_frame_of_the_page() -> None:
    page = """<html><head><title>Prices</title><script>var token = "a81f";</script></head><body>
    <header><a href="/">Home</a></header><nav><a href="/a">A</a></nav>
    <div class="site-footer">Generated at 10:42</div><div id="Sidebar">Latest: x</div>
    <p>The <b>blue</b> kettle costs 12 euros.</p><p hidden>draft</p><div role="navigation">menu</div>
    <div style="display: none">hidden</div><form><input value="q"></form>
    <footer>(c) 2026, served at 10:42</footer></body></html>"""
    assert html.main_text(page) == "Prices The blue kettle costs 12 euros."


def test_main_text_is_the_main_element_when_there_is_one_with_its_own_header() -> None:
    page = """<html><head><title>T</title></head><body><nav>menu</nav><p>outside</p>
    <main><header>Chapter 2</header><p>inside</p><footer>by Ann</footer><aside>ad</aside></main></body></html>"""
    assert html.main_text(page) == "T Chapter 2 inside by Ann"


def test_main_text_sees_a_changed_word_of_the_content_and_no_change_of_the_frame() -> None:
    def page(price: str, clock: str) -> str:
        return f"<title>K</title><body><p>costs {price}</p><footer>at {clock}</footer></body>"

    assert html.main_text(page("12", "10:42")) == html.main_text(page("12", "10:43"))
    assert html.main_text(page("12", "10:42")) != html.main_text(page("13", "10:42"))
