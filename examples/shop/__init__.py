"""The example bookshop that spire's examples crawl.

``site.py`` generates the catalogue and renders its pages; ``server.py`` serves them on 127.0.0.1.
"""
