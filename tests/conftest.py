"""Project-wide test settings: no third-party telemetry, no hub downloads."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

# Set before any SDK is imported: mem0 reads these at import time.
os.environ.setdefault("MEM0_TELEMETRY", "False")
os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# The agent frameworks' tracing (LangSmith, the OpenAI Agents SDK) never exports from tests.
os.environ.setdefault("LANGSMITH_TRACING", "false")
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
if "MEM0_DIR" not in os.environ:
    # mem0 keeps its history database here; removed when the test process ends.
    _mem0_dir = tempfile.mkdtemp(prefix="memoryport-mem0-")
    os.environ["MEM0_DIR"] = _mem0_dir
    atexit.register(shutil.rmtree, _mem0_dir, ignore_errors=True)

# The contract suite's summary table at the end of the run.
pytest_plugins = ["memoryport.contracts"]
