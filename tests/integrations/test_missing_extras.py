"""Each integration module, imported without its framework, raises MissingExtra with the install line."""

from __future__ import annotations

import importlib
import sys

import pytest

from memoryport import MissingExtra

CASES = [
    ("memoryport.integrations.langgraph", "langgraph", "langgraph"),
    ("memoryport.integrations.langchain", "langchain_core", "langchain"),
    ("memoryport.integrations.pydantic_ai", "pydantic_ai", "pydantic-ai"),
    ("memoryport.integrations.openai_agents", "agents", "openai-agents"),
]


@pytest.mark.parametrize(("module", "framework", "extra"), CASES)
def test_missing_framework_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, module: str, framework: str, extra: str
) -> None:
    for name in [n for n in sys.modules if n == framework or n.startswith(framework + ".")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, framework, None)  # importing it now raises ImportError
    monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(MissingExtra) as err:
        importlib.import_module(module)
    assert f'pip install "memoryport[{extra}]"' in str(err.value)
    assert err.value.extra == extra


def test_the_package_imports_no_framework() -> None:
    import subprocess

    code = (
        "import sys, memoryport, memoryport.integrations; "
        "bad = [m for m in ('langgraph', 'langchain_core', 'pydantic_ai', 'agents') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
