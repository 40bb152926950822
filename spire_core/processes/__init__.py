"""Worker processes for ``Crawler(..., processes=N)``: one crawl on every core of a machine."""
