"""``python -m memoryport ...``: the same command line as ``memoryport ...`` (MCP host configurations use this form)."""

from memoryport.cli import main

raise SystemExit(main())
