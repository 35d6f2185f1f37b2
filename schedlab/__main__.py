"""`python -m schedlab` works like the `schedlab` command."""

from schedlab.cli import main

raise SystemExit(main())
