"""The meta prescan reads tags as the HTML standard's "get an attribute" does, on the edge cases too.

The prescan passes over text, comments and other tags in one regular expression and reads each
``<meta>`` attribute by attribute; these cases pin down that both read exactly the bytes the
standard's byte-by-byte algorithm reads.
"""

from __future__ import annotations

import pytest

from spire_core.encoding import prescan, sniff_encoding


@pytest.mark.parametrize(
    ("data", "declared"),
    [
        # "<!-->" and "<!--->" are whole comments: the meta right after them counts.
        (b'<!--><meta charset="koi8-r">', "koi8-r"),
        (b'<!---><meta charset="koi8-r">-->', "koi8-r"),
        (b'<!-- <meta charset="big5"> --><meta charset="koi8-r">', "koi8-r"),
        # A quoted value may hold ">" and "<meta": it neither ends the tag nor declares anything.
        (b'<div title="a>b" data-x=\'<meta charset=big5>\'><meta charset="koi8-r">', "koi8-r"),
        (b'</p x="<meta charset=big5>"><meta charset=koi8-r>', "koi8-r"),
        # A quote that closes late swallows what looks like a meta.
        (b'<div title="unclosed><meta charset="koi8-r">', None),
        # Spaces around "=", a "/" between attributes, names that start with "=".
        (b"<p a = b c=\"d\"/><META\tCHARSET = 'windows-1251'>", "windows-1251"),
        (b"<div =x ==y><meta charset=koi8-r>", "koi8-r"),
        (b"<metax charset=big5><meta/charset=koi8-r>", "koi8-r"),
        (b"<meta><meta charset=koi8-r>", "koi8-r"),
        # "<?", "<!" and a "<" that starts no tag.
        (b"<? <meta charset=big5> ?><meta charset=koi8-r>", "koi8-r"),
        (b"<!DOCTYPE html><meta charset=koi8-r>", "koi8-r"),
        (b"< meta charset=big5><3 <meta charset=koi8-r>", "koi8-r"),
        # Data cut short inside a tag declares nothing.
        (b"<meta charset=koi8-r", None),
        (b'<div a="x', None),
        (b"<div a =", None),
        (b'<div a="x"', None),
        # The XHTML preamble of the PostgreSQL manual.
        (
            b'<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 '
            b'Transitional//EN" "http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd"><html '
            b'xmlns="http://www.w3.org/1999/xhtml"><head><meta http-equiv="Content-Type" '
            b'content="text/html; charset=ISO-8859-2" /><title>SELECT</title>',
            "iso-8859-2",
        ),
        (b"<html><head><title>no meta here</title></head>", None),
    ],
)
def test_the_prescan_reads_tags_as_the_standard_does(data: bytes, declared: str | None) -> None:
    assert prescan(data) == declared


def test_a_page_without_meta_is_detected_not_prescanned() -> None:
    assert sniff_encoding(b"<html><p>caf\xc3\xa9</p></html>", "text/html") == ("utf-8", 0)
