"""``python -m codethinker``: the command line (:mod:`codethinker.cli`)."""

from codethinker.cli import main

raise SystemExit(main())
