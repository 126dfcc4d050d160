"""Project-wide test settings: no third-party telemetry, no hub downloads."""

from __future__ import annotations

import os
import tempfile

# Set before any SDK is imported: mem0 reads these at import time.
os.environ.setdefault("MEM0_TELEMETRY", "False")
os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# The agent frameworks' tracing (LangSmith, the OpenAI Agents SDK) never exports from tests.
os.environ.setdefault("LANGSMITH_TRACING", "false")
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
os.environ.setdefault("MEM0_DIR", tempfile.mkdtemp(prefix="memoryport-mem0-"))

# The contract suite's summary table at the end of the run.
pytest_plugins = ["memoryport.contracts"]
