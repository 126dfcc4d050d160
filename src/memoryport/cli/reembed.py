"""``memoryport reembed``: give every memory of a file a vector from the local model."""

from __future__ import annotations

import argparse
import asyncio
import sys

from . import _common
from ._common import CliError

__all__ = ["register", "run"]

EXAMPLES = """examples:
  memoryport reembed --db memory.db                    # re-embed with the local model (extra: local)
  memoryport reembed --db memory.db --batch-size 64
The way out of "holds vectors of embedder X": afterwards open the file with --embed.
"""


def run(args: argparse.Namespace) -> int:
    """Re-embed the file, printing progress on stderr and the total on stdout."""
    path = _common._db_path(args, create=False)
    if args.batch_size < 1:
        raise CliError("--batch-size takes a positive number")
    import memoryport
    from memoryport.adapters.sqlite import reembed_file

    try:
        embedder = memoryport.LocalEmbedder()
    except (AttributeError, ImportError) as exc:
        raise CliError(f"reembed needs the local embedder: {exc}") from None

    def progress(done: int, total: int) -> None:
        sys.stderr.write(f"re-embedded {done}/{total}\n")
        sys.stderr.flush()

    n = asyncio.run(reembed_file(path, embedder, progress=progress, batch_size=args.batch_size))
    print(f"re-embedded {n} {'memory' if n == 1 else 'memories'} with {embedder.name} (dim {embedder.dim})")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``reembed`` to the command line."""
    p = sub.add_parser(
        "reembed",
        help="re-embed every memory with the local model",
        description=(
            "Embed every memory of the file with the local model and record it as the file's embedder. "
            "The old vectors stay in use until the last batch is done; an interrupted run leaves the file as it was."
        ),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common.add_db_argument(p)
    p.add_argument("--batch-size", metavar="N", type=int, default=256, help="texts per embedding call (256)")
    p.set_defaults(run=run)
