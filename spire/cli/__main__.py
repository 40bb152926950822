"""``python -m spire.cli``: the ``spire`` command."""

from spire.cli import main

raise SystemExit(main())
