"""Knowledge import over a generated tree: every format, re-runs touch only what changed, erasure."""

from __future__ import annotations

import itertools
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks.pdfgen import make_pdf
from memoryport import (
    CallableEmbedder,
    CallableMemory,
    InvalidInput,
    MemoryRecord,
    MemoryScope,
    MissingExtra,
    SQLiteMemory,
    UnsupportedCapability,
)
from memoryport.cli import main
from memoryport.knowledge import ChunkOptions, import_knowledge, import_knowledge_sync

pytestmark = pytest.mark.anyio

ANN = MemoryScope(user_id="ann")
BEN = MemoryScope(user_id="ben")


class Counting:
    """An embedder that counts the texts it embeds (a bag of hashed words)."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.texts.extend(texts)
        out = np.zeros((len(texts), 32), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, hash(w) % 32] += 1.0
            out[i, 0] += 1e-3
        return out


def build_tree(root: Path) -> None:
    (root / "guides" / "deep").mkdir(parents=True)
    (root / "web").mkdir()
    (root / "guides" / "intro.md").write_text(
        "# Handbook\n\n## Tea\n\nAnn brews green tea at 80 degrees.\n\n- cups: two\n- pot: clay\n\n"
        "## Coffee\n\nThe espresso machine is in the kitchen.\n\n"
        "```\ncode block stays whole\n\nwith a blank line\n```\n",
        encoding="utf-8",
    )
    (root / "guides" / "deep" / "notes.txt").write_text(
        "The lighthouse keeper logs the weather.\n\nStorms come from the west in autumn.\n", encoding="utf-8"
    )
    (root / "web" / "page.html").write_text(
        "<html><head><title>x</title><style>.a{color:red}</style></head><body><h1>Orchard</h1>"
        "<p>The orchard grows <b>quinces</b> and pears.</p><script>alert('no')</script>"
        "<h2>Harvest</h2><ul><li>September picking</li><li>October pressing</li></ul></body></html>",
        encoding="utf-8",
    )
    make_pdf(root / "guides" / "manual.pdf", [["The turbine spins clockwise."], ["Page two covers maintenance."]])
    (root / "stale.md").write_text("# Stale\n\nThis file will be deleted.\n", encoding="utf-8")
    (root / ".hidden.md").write_text("never imported\n", encoding="utf-8")
    (root / "image.png").write_bytes(b"\x89PNG not a document")


def by_source(records: list[MemoryRecord]) -> dict[str, list[MemoryRecord]]:
    out: dict[str, list[MemoryRecord]] = {}
    for r in records:
        out.setdefault(str(r.metadata["source"]), []).append(r)
    return out


async def test_tree_every_format_then_only_what_changed(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    build_tree(root)
    counter = Counting()
    memory = SQLiteMemory(tmp_path / "m.db", embedder=CallableEmbedder(counter, dim=32, name="count"))
    await memory.add([MemoryRecord(scope=ANN, text="Ann likes green tea in the morning")])
    counter.texts.clear()
    seen: list[tuple[int, int, str]] = []

    first = await import_knowledge(memory, root, scope=ANN, progress=lambda d, t, p: seen.append((d, t, p)))
    assert sorted(first.added) == [
        "guides/deep/notes.txt",
        "guides/intro.md",
        "guides/manual.pdf",
        "stale.md",
        "web/page.html",
    ]
    assert first.failed == [] and first.changed == [] and first.removed == []
    assert [d for d, _, _ in seen] == [1, 2, 3, 4, 5] and {t for _, t, _ in seen} == {5}
    records = [r for r in await memory.export(ANN) if r.metadata.get("kind") == "knowledge"]
    assert first.chunks_added == len(records) == len(counter.texts)
    files = by_source(records)
    intro = sorted(files["guides/intro.md"], key=lambda r: r.metadata["chunk"])
    assert [r.metadata["section"] for r in intro] == ["Handbook > Tea", "Handbook > Coffee"]
    assert intro[0].text.startswith("# Handbook\n\n## Tea\n\nAnn brews")
    assert "code block stays whole\n\nwith a blank line" in intro[1].text
    assert {r.metadata["chunks"] for r in intro} == {2}
    assert intro[0].metadata["offset"] == 0 and intro[1].metadata["offset"] > 0
    html = " ".join(r.text for r in files["web/page.html"])
    assert "quinces" in html and "alert" not in html and "color" not in html and "October pressing" in html
    pdf = sorted(files["guides/manual.pdf"], key=lambda r: r.metadata["chunk"])
    assert [r.metadata["page"] for r in pdf] == [1, 2]
    assert "turbine spins clockwise" in pdf[0].text and pdf[0].metadata["format"] == "pdf"
    assert all(r.scope == ANN and r.metadata["collection"] == "kb" and len(r.metadata["sha256"]) == 64 for r in records)

    # Recall includes or leaves out knowledge with ordinary filters.
    only = await memory.search("green tea", scope=ANN, k=10, filters={"kind": "knowledge"})
    assert only and all(h.record.metadata.get("kind") == "knowledge" for h in only)
    without = await memory.search("green tea", scope=ANN, k=10, filters={"kind": {"$ne": "knowledge"}})
    assert [h.record.text for h in without] == ["Ann likes green tea in the morning"]

    # Second run with nothing changed: nothing written, nothing embedded.
    counter.texts.clear()
    again = await import_knowledge(memory, root, scope=ANN)
    assert again.unchanged == sorted(first.added) and again.files_touched == 0
    assert counter.texts == [] and again.chunks_added == again.chunks_removed == 0

    # Change one section of intro.md, add a file, delete a file, corrupt the PDF.
    (root / "guides" / "intro.md").write_text(
        (root / "guides" / "intro.md").read_text().replace("in the kitchen", "in the hall"), encoding="utf-8"
    )
    (root / "guides" / "deep" / "new.md").write_text("# New\n\nA fresh page about kites.\n", encoding="utf-8")
    (root / "stale.md").unlink()
    (root / "guides" / "manual.pdf").write_bytes(b"%PDF-1.4\n1 0 obj garbage\n%%EOF")
    counter.texts.clear()
    third = await import_knowledge(memory, root, scope=ANN)
    assert third.changed == ["guides/intro.md"]
    assert third.added == ["guides/deep/new.md"]
    assert third.removed == ["stale.md"]
    assert [p for p, _ in third.failed] == ["guides/manual.pdf"] and "PDF" in third.failed[0][1]
    assert sorted(third.unchanged) == ["guides/deep/notes.txt", "web/page.html"]
    # Only the edited chunk and the new file's chunk were embedded; the Tea chunk kept its record.
    assert len(counter.texts) == third.chunks_added == 2
    assert any("in the hall" in t for t in counter.texts) and any("kites" in t for t in counter.texts)
    assert third.chunks_updated == 1
    after = by_source([r for r in await memory.export(ANN) if r.metadata.get("kind") == "knowledge"])
    assert "stale.md" not in after
    assert {r.id for r in after["guides/intro.md"]} & {r.id for r in intro} == {intro[0].id}
    assert len(after["guides/manual.pdf"]) == 2  # a failed file keeps its earlier chunks
    assert len({r.metadata["sha256"] for r in after["guides/intro.md"]}) == 1
    assert await memory.count(ANN, filters={"kind": "knowledge", "source": "guides/intro.md"}) == 2

    # Erasing the user removes every chunk (and the conversational memory).
    await memory.delete(scope=ANN)
    assert await memory.export(ANN) == []
    await memory.aclose()


async def test_scope_from_the_host_and_other_users_untouched(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    build_tree(root)
    memory = SQLiteMemory(tmp_path / "m.db")
    await import_knowledge(memory, root, scope=ANN)
    (root / "stale.md").unlink()
    report = await import_knowledge(memory, root, scope=BEN)
    assert report.removed == [] and len(report.added) == 4
    ann = by_source(await memory.export(ANN))
    assert "stale.md" in ann  # Ben's import never deletes Ann's chunks
    assert all(r.scope == BEN for r in await memory.export(BEN))
    await memory.delete(scope=BEN)
    assert await memory.export(BEN) == [] and by_source(await memory.export(ANN)).keys() == ann.keys()
    await memory.aclose()


async def test_collections_and_single_file(tmp_path: Path) -> None:
    memory = SQLiteMemory(tmp_path / "m.db")
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "x.md").write_text("alpha text\n")
    (b / "y.md").write_text("beta text\n")
    await import_knowledge(memory, a, scope=ANN, collection="docs")
    await import_knowledge(memory, b, scope=ANN, collection="other")
    assert sorted(by_source(await memory.export(ANN))) == ["x.md", "y.md"]
    # The same collection mirrors the folder: x.md is not in b.
    report = await import_knowledge(memory, b, scope=ANN, collection="docs")
    assert report.removed == ["x.md"] and report.added == ["y.md"]
    # One file: only that file's chunks are compared; nothing else is removed.
    (b / "z.txt").write_text("zeta\n")
    one = await import_knowledge(memory, b / "z.txt", scope=ANN, collection="docs")
    assert one.added == ["z.txt"] and one.removed == []
    assert sorted(r.metadata["source"] for r in await memory.export(ANN)) == ["y.md", "y.md", "z.txt"]
    await memory.aclose()


async def test_bad_files_are_reported_and_skipped(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    (root / "good.md").write_text("fine text\n")
    (root / "latin1.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))
    (root / "nul.txt").write_bytes(b"abc\x00def")
    (root / "broken.pdf").write_bytes(b"not a pdf at all")
    (root / "empty.md").write_text("   \n\n")
    locked = root / "locked.md"
    locked.write_text("secret\n")
    locked.chmod(0)
    memory = SQLiteMemory(tmp_path / "m.db")
    try:
        report = await import_knowledge(memory, root, scope=ANN)
    finally:
        locked.chmod(0o600)
    reasons = dict(report.failed)
    assert "latin1.txt" in reasons and "UTF-8" in reasons["latin1.txt"]
    assert "nul.txt" in reasons and "broken.pdf" in reasons
    if os.geteuid() != 0:  # root reads a mode-0 file anyway
        assert "cannot read" in reasons["locked.md"]
    assert report.added[0] == "good.md" and report.empty == ["empty.md"]
    await memory.aclose()


def test_chunk_sizes_and_overlap(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    sentences = [f"Sentence number {i} talks about topic {i}." for i in range(80)]
    long_para = " ".join(sentences)
    (root / "long.md").write_text("# Long\n\n" + long_para + "\n\nShort closing paragraph.\n")
    memory = SQLiteMemory(tmp_path / "m.db")
    import_knowledge_sync(memory, root, scope=ANN, options=ChunkOptions(max_chars=300, overlap=60))
    chunks = sorted(memory.export_sync(ANN), key=lambda r: r.metadata["chunk"])
    assert all(len(c.text) <= 300 for c in chunks)
    assert len(chunks) > 10
    # Pieces of the long paragraph share text; every sentence is somewhere; no piece starts mid-word.
    body = [c.text for c in chunks]
    for left, right in itertools.pairwise(body[1:-1]):
        assert " ".join(right.split()[:3]) in left
    joined = " ".join(body)
    assert all(s in joined for s in sentences)
    assert chunks[-1].text == "Short closing paragraph." or chunks[-1].text.endswith("Short closing paragraph.")
    memory.close()


def test_options_are_checked(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as err:
        ChunkOptions(max_chars=10)
    assert err.value.field == "max_chars"
    with pytest.raises(InvalidInput) as err:
        ChunkOptions(max_chars=200, overlap=150)
    assert err.value.field == "overlap"
    memory = SQLiteMemory(tmp_path / "m.db")
    with pytest.raises(InvalidInput) as err:
        import_knowledge_sync(memory, tmp_path / "missing", scope=ANN)
    assert err.value.field == "path"
    memory.close()


async def test_a_backend_without_export_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("text\n")
    stored: list[MemoryRecord] = []
    memory = CallableMemory(add=lambda records: [stored.append(r) or "x" for r in records], search=lambda **_: [])
    with pytest.raises(UnsupportedCapability) as err:
        await import_knowledge(memory, tmp_path, scope=ANN)
    assert err.value.capability in ("metadata", "export", "delete")
    assert stored == []


async def test_pdf_without_the_extra_names_the_install_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_pdf(tmp_path / "a.pdf", [["hello"]])
    monkeypatch.setitem(sys.modules, "pypdf", None)
    memory = SQLiteMemory(tmp_path / "m.db")
    with pytest.raises(MissingExtra) as err:
        await import_knowledge(memory, tmp_path, scope=ANN)
    assert 'pip install "memoryport[pdf]"' in str(err.value)
    assert await memory.export(ANN) == []
    await memory.aclose()


def test_cli_import_report_and_rerun(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "kb"
    build_tree(root)
    (root / "bad.txt").write_bytes(b"\xff\xfe\xfa")
    db = str(tmp_path / "m.db")
    assert main(["import", str(root), "--db", db, "--user", "ann", "--progress"]) == 1
    out, err = capsys.readouterr()
    assert "added     guides/intro.md" in out and "5 added" in out
    assert "skipped bad.txt" in err and "5/6" in err  # the failure and the bar
    assert main(["import", str(root), "--db", db, "--user", "ann", "--json", "--no-progress"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["added"] == [] and len(report["unchanged"]) == 5 and report["chunks_added"] == 0
    assert main(["search", "--db", db, "--user", "ben", "quinces"]) in (0, 2)
    assert "no memories match" in capsys.readouterr().out
    assert main(["search", "--db", db, "--user", "ann", "--filter", "kind=knowledge", "quinces"]) == 0
    assert "quinces" in capsys.readouterr().out
    assert main(["import", str(root), "--db", db]) == 2
    assert "--user" in capsys.readouterr().err
    assert main(["import", str(root), "--db", db, "--user", "ann", "--max-chars", "5"]) == 2
    assert "--max-chars" in capsys.readouterr().err


@pytest.mark.parametrize("with_update", [True, False], ids=["update", "no-update"])
async def test_any_guarded_store_and_one_without_update(tmp_path: Path, with_update: bool) -> None:
    from memoryport import Capability, GuardedMemory
    from tests.core.dictstore import ALL, DictStore

    caps = ALL if with_update else ALL - {Capability.UPDATE}
    memory = GuardedMemory(DictStore(caps))
    root = tmp_path / "kb"
    build_tree(root)
    first = await import_knowledge(memory, root, scope=ANN)
    assert len(first.added) == 5
    before = {r.id for r in await memory.export(ANN)}
    intro = root / "guides" / "intro.md"
    intro.write_text(intro.read_text().split("## Coffee")[0])  # the Tea section alone, unchanged
    (root / "stale.md").unlink()
    second = await import_knowledge(memory, root, scope=ANN)
    assert second.changed == ["guides/intro.md"] and second.removed == ["stale.md"]
    after = by_source(await memory.export(ANN))
    assert len(after["guides/intro.md"]) == 1 and "stale.md" not in after
    kept = {r.id for r in after["guides/intro.md"]} & before
    # With update the unchanged Tea chunk keeps its record; without, the file is deleted and re-added.
    assert (second.chunks_added, len(kept)) == ((0, 1) if with_update else (1, 0))
    third = await import_knowledge(memory, root, scope=ANN)
    assert third.files_touched == 0
