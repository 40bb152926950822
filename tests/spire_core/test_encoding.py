"""Encoding sniffing as browsers do it: WHATWG labels, BOM, Content-Type, the meta prescan, detection."""

from __future__ import annotations

import pytest

from spire_core.encoding import decode, lookup, prescan, sniff_encoding
from spire_core.response import Headers, Response, decode_body


def response(body: bytes, content_type: str | None = "text/html") -> Response:
    headers = Headers({"content-type": content_type} if content_type else {})
    return Response(url="http://example.com/", status=200, headers=headers, body=body)


@pytest.mark.parametrize("label", ["ISO-8859-1", "latin1", "us-ascii", "ascii", "l1", " Windows-1252 "])
def test_latin1_and_ascii_labels_mean_windows_1252(label: str) -> None:
    body = b"\x93quoted\x94 costs \x80" + b"5"
    assert response(body, f"text/html; charset={label}").text == "\u201cquoted\u201d costs \u20ac5"
    meta = f'<meta charset="{label}">'.encode() + body
    assert response(meta, "text/html").text.endswith("\u201cquoted\u201d costs \u20ac5")


def test_a_meta_naming_utf16_means_utf8() -> None:
    for label in ("utf-16", "UTF-16LE", "utf-16be"):
        body = f'<meta charset="{label}"><p>café</p>'.encode()
        assert response(body).text == f'<meta charset="{label}"><p>café</p>'
        assert response(body).encoding == "utf-8"


def test_a_header_naming_utf16_is_utf16() -> None:
    assert response("hé".encode("utf-16-le"), "text/html; charset=utf-16").text == "hé"


@pytest.mark.parametrize(
    "label",
    ["hex", "base64", "zlib", "rot13", "rot_13", "uu", "bz2", "undefined", "idna", "punycode", "utf-7",
     "hex_codec", "base64_codec", "zip", "quopri", "unicode_escape", "x-nonsense", ""],
)  # fmt: skip
def test_charsets_that_are_not_text_encodings_are_ignored(label: str) -> None:
    body = b"<p>plain caf\xc3\xa9</p>"
    assert lookup(label) is None
    assert response(body, f"text/html; charset={label}").text == "<p>plain café</p>"
    assert decode_body(f'<meta charset="{label}">'.encode() + body).endswith("<p>plain café</p>")


def test_a_meta_inside_a_comment_is_not_obeyed() -> None:
    body = b'<!-- <meta charset="koi8-r"> --><meta charset="iso-8859-2"><p>\xb1</p>'
    assert sniff_encoding(body, None) == ("iso-8859-2", 0)
    assert response(body).text.endswith("<p>\u0105</p>")


def test_a_meta_with_an_unknown_label_does_not_stop_the_scan() -> None:
    assert prescan(b'<meta charset="x-bogus"><meta charset="windows-1251">') == "windows-1251"


def test_http_equiv_and_content_in_either_order_and_quoted_values() -> None:
    assert prescan(b'<meta http-equiv="Content-Type" content="text/html; charset=euc-jp">') == "euc-jp"
    assert prescan(b"<meta content=\"text/html; charset='shift_jis'\" http-equiv=content-type>") == "shift_jis"
    # content without http-equiv declares nothing; nor does a value missing its closing quote.
    assert prescan(b'<meta content="text/html; charset=euc-jp">') is None
    assert prescan(b'<meta http-equiv="Content-Type" content="text/html; charset=\'utf-8">') is None


def test_a_greater_than_sign_in_a_quoted_attribute_does_not_end_the_tag() -> None:
    assert prescan(b'<div title="<meta charset=koi8-r>"><meta charset="big5">') == "big5"


def test_only_the_first_1024_bytes_are_prescanned() -> None:
    late = b"<!--" + b"x" * 1100 + b'--><meta charset="windows-1251">' + "Привет".encode("cp1251")
    assert prescan(late) == "windows-1251"  # the prescan itself reads what it is given...
    assert prescan(late[:1024]) is None  # ...and sniffing gives it the first 1024 bytes, then detects


def test_x_user_defined_and_replacement_decode_without_failing() -> None:
    assert decode(b"a\x80", "x-user-defined") == "a\uf780"
    assert prescan(b'<meta charset="x-user-defined">') == "windows-1252"
    assert response(b"<p>anything</p>", "text/html; charset=iso-2022-kr").text == "\ufffd"


def test_a_bom_decides_and_utf32_is_not_a_web_encoding() -> None:
    assert sniff_encoding(b"\xff\xfeh\x00", "text/html; charset=utf-8") == ("utf-16le", 2)
    assert response(b"\xfe\xff\x00h\x00i").text == "hi"


def test_encoding_names_are_whatwg_names() -> None:
    assert response(b"plain ascii").encoding == "windows-1252"
    assert response("é".encode()).encoding == "utf-8"
    assert response(b"x", "text/html; charset=SJIS").encoding == "shift_jis"


@pytest.mark.parametrize(
    ("codec", "text"),
    [
        ("cp1251", "Привет, как дела? Это тестовая страница на русском языке. "),
        ("shift_jis", "日本語のテキストです。これはテストページです。"),
        ("euc_kr", "안녕하세요. 이것은 한국어로 된 시험 페이지입니다. "),
    ],
)
def test_an_undeclared_page_is_detected_and_named_by_its_whatwg_name(codec: str, text: str) -> None:
    body = (text * 10).encode(codec)
    found = response(body, None)
    assert found.text == text * 10
    assert lookup(found.encoding) == found.encoding
