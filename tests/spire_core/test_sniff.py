"""Sniffing HTML by the MIME Sniffing Standard's HTML patterns."""

from __future__ import annotations

import pytest

from spire_core.sniff import sniffs_as_html


@pytest.mark.parametrize(
    "body",
    [
        b"<!DOCTYPE html><html><body>hi</body></html>",
        b"<!doctype HTML>",
        b" \t\r\n\x0c<html lang=en>",
        b"<HTML>",
        b"<head>",
        b"<script>alert(1)</script>",
        b"<iframe src=x>",
        b"<h1>Title</h1>",
        b"<div class=a>",
        b"<font size=2>",
        b"<table>",
        b"<a href=/>",
        b"<style>",
        b"<title>Shop</title>",
        b"<b>bold</b>",
        b"<body>",
        b"<br>",
        b"<p>para",
        b"<!-- a comment -->",
        b"<!-->",
    ],
)
def test_bodies_that_start_like_html(body: bytes) -> None:
    assert sniffs_as_html(body)


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"   ",
        b"hello <html>",
        b"<html5>",  # "5" does not end a tag
        b"<html\t>",  # only a space or ">" does
        b"<html",  # nothing after the tag
        b"<!DOCTYPE htmlx>",
        b"<!---->",
        b"<hr>",  # not one of the patterns
        b"<span>text</span>",
        b"<?xml version='1.0'?><html>",
        b'{"html": true}',
        b"\xef\xbb\xbf<html>",  # a byte-order mark is not whitespace
        b"%PDF-1.7",
        b" " * 1445 + b"<html>",  # past the resource header
    ],
)
def test_bodies_that_do_not(body: bytes) -> None:
    assert not sniffs_as_html(body)
