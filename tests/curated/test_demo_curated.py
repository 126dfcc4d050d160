"""`memoryport demo` shows curated memory: dedup, a reminder and a dry-run forget."""

from __future__ import annotations

import json

import pytest

from memoryport.cli import main


def test_demo_shows_dedup_a_reminder_and_a_dry_run_forget(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--no-color"]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    section = out.split("── Curated memory: dedup, a reminder, a dry-run forget")[1].split("── What the host saw")[0]
    results = [json.loads(line.split("tool  ← ", 1)[1]) for line in section.splitlines() if "tool  ← {" in line]
    first, again, reminder, upcoming, forget = results
    assert first["action"] == "added"
    assert again["action"] == "updated" and again["id"] == first["id"]
    assert reminder["action"] == "added"
    assert [d["id"] for d in upcoming["due"]] == [reminder["id"]] and upcoming["due"][0]["kind"] == "reminder"
    assert [m["id"] for m in forget["would_forget"]] == [first["id"]]
    assert forget["forgotten"] == 0 and forget["approved"] is False
    assert "nothing was deleted" in section
