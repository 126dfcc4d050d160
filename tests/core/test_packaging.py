"""The package as shipped: the wheel, the public surface, the import cost, the doctor."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

import memoryport

ROOT = Path(__file__).resolve().parents[2]

# The public surface. Extend it on purpose (sorted), never by accident.
PUBLIC = [
    "DEFAULT_LIMITS",
    "OPERATORS",
    "AgentMemory",
    "AutoRecall",
    "BackendError",
    "CallableEmbedder",
    "CallableMemory",
    "CallableModel",
    "CallableReranker",
    "Capability",
    "ChunkOptions",
    "ContextPolicy",
    "ConversationLog",
    "CopyReport",
    "CrossEncoderReranker",
    "CurationPolicy",
    "EmbedderMismatch",
    "EmbeddingError",
    "EmbeddingPort",
    "EventSink",
    "ExtractionPolicy",
    "Fact",
    "FactExtraction",
    "GraphPort",
    "GraphitiMemory",
    "GuardOptions",
    "GuardedMemory",
    "ImportReport",
    "InvalidInput",
    "KnowledgeGraph",
    "Limits",
    "LocalEmbedder",
    "Mem0Memory",
    "MemoryEvent",
    "MemoryExtractor",
    "MemoryHit",
    "MemoryPort",
    "MemoryRecord",
    "MemoryScope",
    "MemoryTool",
    "MemoryTools",
    "MemoryUpdate",
    "MemoryportError",
    "MetadataValue",
    "MissingExtra",
    "ModelError",
    "ModelPort",
    "NewFact",
    "NewMemory",
    "OpenAIEmbedder",
    "OpenAIModel",
    "PendingWrite",
    "PostgresMemory",
    "PromptContext",
    "Related",
    "RerankerPort",
    "SQLiteGraph",
    "SQLiteMemory",
    "Scratchpad",
    "SearchMode",
    "SearchResults",
    "SentenceTransformerEmbedder",
    "SupportsCheckRecords",
    "SupportsCheckpoint",
    "SupportsClose",
    "SupportsGraph",
    "SupportsSettle",
    "SupportsStats",
    "TimeBound",
    "ToolContext",
    "ToolError",
    "ToolHistory",
    "UnsupportedCapability",
    "UsageError",
    "WalRemoved",
    "ZepMemory",
    "__version__",
    "copy_memories",
    "copy_memories_sync",
    "curated_tools",
    "find_pii",
    "graph_tools",
    "import_knowledge",
    "import_knowledge_sync",
    "loop_tools",
    "memory_tools",
    "pii_check",
    "redact_pii",
    "scope_from_context",
    "session_scope",
    "user_scope",
]

# SDKs and heavy modules that `import memoryport` must not pull in.
FORBIDDEN = ("mem0", "zep_cloud", "graphiti_core", "kuzu", "mcp", "tokenizers", "numpy", "httpx", "pytest", "anyio")


def test_all_is_pinned_and_sorted() -> None:
    assert memoryport.__all__ == PUBLIC
    assert memoryport.__all__ == sorted(memoryport.__all__, key=lambda n: (not n.isupper(), n))
    for name in memoryport.__all__:
        assert getattr(memoryport, name) is not None, name


def test_lazy_names_resolve_and_unknown_names_raise() -> None:
    assert set(memoryport._LAZY) <= set(memoryport.__all__)
    for name in memoryport._LAZY:
        assert getattr(memoryport, name).__name__ == name
    with pytest.raises(AttributeError):
        memoryport.NoSuchThing  # noqa: B018
    assert set(memoryport.__all__) <= set(dir(memoryport))


def test_import_memoryport_imports_no_sdk() -> None:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import memoryport"],
        capture_output=True,
        text=True,
        check=True,
    )
    modules = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    loaded = sorted(m for m in modules if m.split(".")[0] in FORBIDDEN)
    assert loaded == [], f"import memoryport imported {loaded}"
    assert "memoryport" in modules


BUILD_LOG: list[str] = []


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    BUILD_LOG.append(proc.stdout + proc.stderr)
    [found] = out.glob("memoryport-*.whl")
    return found


def test_the_build_prints_no_deprecation_warning(wheel: Path) -> None:
    """`license = { text = ... }` made setuptools warn twice on every install: the SPDX string form does not."""
    [log] = BUILD_LOG
    assert "deprecat" not in log.lower(), [line for line in log.splitlines() if "eprecat" in line]
    metadata = zipfile.ZipFile(wheel).read("memoryport-0.1.0.dist-info/METADATA").decode()
    assert "License-Expression: Apache-2.0" in metadata


def test_wheel_holds_every_module_and_py_typed(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    for source in ("src/memoryport", "adapters", "contracts"):
        for path in (ROOT / source).rglob("*.py"):
            rel = path.relative_to(ROOT / source).as_posix()
            prefix = {"src/memoryport": "memoryport", "adapters": "memoryport/adapters"}.get(
                source, "memoryport/contracts"
            )
            assert f"{prefix}/{rel}" in names, f"{prefix}/{rel} missing from the wheel"
    assert "memoryport/py.typed" in names
    assert not [n for n in names if n.startswith(("tests/", "src/", "adapters/", "contracts/"))]


def test_every_module_imports_from_the_wheel(wheel: Path) -> None:
    modules = sorted(
        n[: -len(".py")].replace("/", ".").removesuffix(".__init__")
        for n in zipfile.ZipFile(wheel).namelist()
        if n.endswith(".py") and not n.endswith("__main__.py")  # importing __main__ runs the CLI
    )
    script = f"""
import importlib, json, sys
done, missing = [], []
for name in {modules!r}:
    try:
        module = importlib.import_module(name)
    except ImportError as exc:  # an adapter whose SDK extra is absent must say so
        if type(exc).__name__ != "MissingExtra":
            raise
        missing.append(name)
        continue
    assert module.__file__.startswith({str(wheel)!r}), (name, module.__file__)
    done.append(name)
print(json.dumps({{"done": done, "missing": missing}}))
"""
    # -S skips site-packages' .pth files, so the editable install of this checkout cannot shadow the wheel.
    purelib = sysconfig.get_paths()["purelib"]
    proc = subprocess.run(
        [sys.executable, "-S", "-c", script],
        env={"PYTHONPATH": f"{wheel}:{purelib}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "memoryport" in result["done"] and "memoryport.contracts" in result["done"]
    assert len(result["done"]) + len(result["missing"]) == len(modules)


def test_doctor_reports_python_sqlite_and_extras() -> None:
    from memoryport.cli import main
    from memoryport.cli.doctor import EXTRAS, report

    text = report()
    lines = text.splitlines()
    assert lines[0] == f"memoryport {memoryport.__version__}"
    assert lines[1].startswith(f"python     {sys.version.split()[0]}")
    assert any(line.startswith("sqlite3 ") and "fts5=" in line and "fts5 secure-delete=" in line for line in lines)
    import importlib.metadata

    pytest_line = next(line for line in lines if line.strip().startswith("contracts"))
    assert f"pytest {importlib.metadata.version('pytest')}" in pytest_line
    assert len([line for line in lines if line.startswith("  ")]) == len(EXTRAS)
    proc = subprocess.run(
        [sys.executable, "-m", "memoryport.cli", "doctor"], capture_output=True, text=True, check=True, timeout=60
    )
    assert proc.stdout.strip() == text
    assert main(["doctor"]) == 0


def test_doctor_reports_an_extra_with_a_missing_part_as_incomplete(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only anyio of the contracts extra is not the extra: pytest and hypothesis are named as missing."""
    from memoryport.cli import doctor

    real = doctor._version
    monkeypatch.setattr(doctor, "_version", lambda d: None if d in ("pytest", "hypothesis") else real(d))
    line = next(line for line in doctor.report().splitlines() if line.strip().startswith("contracts"))
    assert "incomplete: missing pytest, hypothesis" in line and "anyio" in line


def test_doctor_says_whether_the_default_model_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    from memoryport.cli import doctor
    from memoryport.embedders import local

    monkeypatch.setattr(local, "default_model_path", lambda: None)
    last = doctor.report().splitlines()[-1]
    assert last == "default model (LocalEmbedder()): not installed; install with: " + local.INSTALL_MODEL
    monkeypatch.setattr(local, "default_model_path", lambda: Path("/models/minilm"))
    assert doctor.report().splitlines()[-1] == "default model (LocalEmbedder()): all-MiniLM-L6-v2 at /models/minilm"


def test_contracts_without_pytest_name_the_extra() -> None:
    script = (
        "import sys; sys.modules['pytest'] = None\n"
        "try:\n    import memoryport.contracts\n"
        "except ImportError as exc:\n    print(type(exc).__name__, exc)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60)
    assert proc.stdout.startswith("MissingExtra ")
    assert 'pip install "memoryport[contracts]"' in proc.stdout
