"""Knowledge import throughput: files/s and chunks/s over a generated tree, keyword-only and embedded.

    python -m benchmarks.knowledge_bench [--files 3000] [--embed-files 60]

The tree: nested folders of Markdown (70%), text (15%) and HTML (15%) files of
2-8 sections of 1-4 paragraphs each, plus a few PDFs (one per 100 files, written
by hand like tests/knowledge/pdfgen.py). Measured in one run, side by side:

- first import, keyword-only (SQLiteMemory without an embedder);
- re-run with nothing changed (hashing only);
- re-run after editing 5% of the files;
- first import with the local embedder (LocalEmbedder, all-MiniLM-L6-v2 on
  numpy; extra ``local``) over the first ``--embed-files`` files.

Prints a Markdown table (docs/knowledge.md carries one run's numbers).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from pathlib import Path

from memoryport import MemoryScope, SQLiteMemory
from memoryport.knowledge import ImportReport, import_knowledge

WORDS = [
    "alpha",
    "river",
    "stone",
    "garden",
    "lamp",
    "orbit",
    "copper",
    "meadow",
    "signal",
    "harbor",
    "winter",
    "ledger",
    "pilot",
    "forest",
    "canvas",
    "engine",
    "violet",
    "market",
    "bridge",
    "candle",
    "quartz",
    "falcon",
    "timber",
    "island",
    "lantern",
    "summit",
    "velvet",
    "anchor",
]


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 18))).capitalize() + "."


def _para(rng: random.Random) -> str:
    return " ".join(_sentence(rng) for _ in range(rng.randint(2, 6)))


def _pdf(path: Path, pages: list[str]) -> None:
    from benchmarks.pdfgen import make_pdf

    make_pdf(path, [[p[i : i + 80] for i in range(0, len(p), 80)] for p in pages])


def build(root: Path, n: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    for i in range(n):
        folder = root / f"area{i % 7}" / f"topic{i % 23}"
        folder.mkdir(parents=True, exist_ok=True)
        sections = [
            (f"Section {s} {rng.choice(WORDS)}", [_para(rng) for _ in range(rng.randint(1, 4))])
            for s in range(rng.randint(2, 8))
        ]
        if i % 100 == 99:
            _pdf(folder / f"doc{i}.pdf", ["\n\n".join(ps) for _, ps in sections[:3]])
        elif i % 20 < 14:
            body = "\n\n".join(f"## {h}\n\n" + "\n\n".join(ps) for h, ps in sections)
            (folder / f"doc{i}.md").write_text(f"# Document {i}\n\n{body}\n", encoding="utf-8")
        elif i % 20 < 17:
            (folder / f"doc{i}.txt").write_text("\n\n".join(p for _, ps in sections for p in ps), encoding="utf-8")
        else:
            body = "".join(f"<h2>{h}</h2>" + "".join(f"<p>{p}</p>" for p in ps) for h, ps in sections)
            (folder / f"doc{i}.html").write_text(f"<html><body><h1>Doc {i}</h1>{body}</body></html>", "utf-8")


def edit(root: Path, share: float) -> int:
    files = sorted(p for p in root.rglob("*") if p.suffix in (".md", ".txt"))
    chosen = files[:: max(1, int(1 / share))]
    for p in chosen:
        p.write_text(p.read_text(encoding="utf-8") + "\n\nAn added closing paragraph.\n", encoding="utf-8")
    return len(chosen)


async def timed(memory: SQLiteMemory, root: Path, scope: MemoryScope) -> tuple[ImportReport, float]:
    t = time.perf_counter()
    report = await import_knowledge(memory, root, scope=scope)
    return report, time.perf_counter() - t


class _Rows(list[str]):
    """The table's rows, also written to stderr as they come (a long run can be read while it goes)."""

    def __init__(self, rows: list[str]) -> None:
        super().__init__()
        for r in rows:
            self.append(r)

    def append(self, row: str) -> None:
        super().append(row)
        print(row, file=sys.stderr, flush=True)


def _rate(x: float) -> str:
    return f"{x:,.0f}" if x >= 10 else f"{x:.2f}"


def row(label: str, files: int, report: ImportReport, secs: float) -> str:
    chunks = report.chunks_added + report.chunks_updated
    return (
        f"| {label} | {files:,} | {report.chunks_added:,} | {secs:.1f} | {_rate(files / secs)} | "
        f"{_rate(chunks / secs)} |"
    )


async def main(n_files: int, n_embed: int) -> str:
    with tempfile.TemporaryDirectory(prefix="memoryport-knowledge-") as tmp:
        return await _run(Path(tmp), n_files, n_embed)


async def _run(tmp: Path, n_files: int, n_embed: int) -> str:
    root = tmp / "tree"
    build(root, n_files)
    scope = MemoryScope(user_id="bench")
    rows = _Rows(
        [
            "| run | files | chunks written | seconds | files/s | chunks/s |",
            "|---|---:|---:|---:|---:|---:|",
        ]
    )
    memory = SQLiteMemory(tmp / "kw.db")
    first, secs = await timed(memory, root, scope)
    assert not first.failed, first.failed
    rows.append(row("first import, keyword-only", n_files, first, secs))
    again, secs = await timed(memory, root, scope)
    assert again.files_touched == 0
    rows.append(row("re-run, nothing changed", n_files, again, secs))
    edited = edit(root, 0.05)
    third, secs = await timed(memory, root, scope)
    assert len(third.changed) == edited
    rows.append(row(f"re-run, {edited} files edited", n_files, third, secs))
    await memory.aclose()
    if n_embed:
        try:
            from memoryport import LocalEmbedder

            embedder = LocalEmbedder()
        except ImportError as exc:
            rows.append(f"| with the local embedder | skipped: {exc} | | | | |")
        else:
            sub = tmp / "sub"
            build(sub, n_embed, seed=11)
            emb = SQLiteMemory(tmp / "emb.db", embedder=embedder)
            report, secs = await timed(emb, sub, scope)
            rows.append(row("first import, local embedder (MiniLM, numpy)", n_embed, report, secs))
            await emb.aclose()
    return "\n".join(rows)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=3000)
    parser.add_argument("--embed-files", type=int, default=60)
    a = parser.parse_args()
    print(asyncio.run(main(a.files, a.embed_files)))
