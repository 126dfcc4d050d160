"""The dashboard in real headless Chromium (Debian's chromium, driven by Playwright).

A person signs in with a key, browses, searches, edits, deletes, exports, erases
with a typed confirmation, and tries to reach another user's memory by editing
the URL. Screenshots go to a temporary folder, or to docs/img with
``MEMORYPORT_SCREENSHOTS=docs/img`` (how the docs' pictures are made).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, TypeVar

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from memoryport import Capability, GuardedMemory, MemoryRecord, MemoryScope, SQLiteMemory
from memoryport.adapters.postgres import PostgresMemory
from tests.core.dictstore import DictStore
from tests.postgres.support import Server, fresh_schema

from .support import Live, live_server

T = TypeVar("T")
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]

ANN = [
    ("Ann drinks green tea, never coffee after 4pm", "preference", 1),
    ("Ann's daughter Mia starts school in September", "fact", 2),
    ("Ann is training for the Lisbon half marathon", "goal", 3),
    ("Ann prefers window seats on trains", "preference", 3),
    ("Ann is allergic to peanuts", "fact", 5),
    ("Ann wants a reminder to renew her passport", "todo", 8),
    ("Ann's favourite author is Ursula K. Le Guin", "preference", 9),
    ("Ann works as a structural engineer in Porto", "fact", 12),
    ("Ann plays the cello on Sunday mornings", "fact", 15),
    ("Ann is learning Japanese, about 20 minutes a day", "goal", 16),
    ("Ann's bike is a green Brompton", "fact", 18),
    ("Ann likes quiet restaurants with vegetarian options", "preference", 21),
    ("Ann asked to be reminded of Mia's dentist appointment", "todo", 22),
    ("Ann's team stand-up is at 9:30 on weekdays", "fact", 25),
    ("Ann dislikes long voice messages", "preference", 26),
    ("Ann is reading The Dispossessed again", "fact", 27),
    ("Ann's sister lives in Edinburgh", "fact", 28),
    ("Ann drinks oat milk in her tea", "preference", 29),
    ("Ann plans a trip to Kyoto next spring", "goal", 0),
    ("Ann keeps her running shoes by the door", "fact", 0),
    ("Ann's car is due for a service in May", "todo", 1),
    ("Ann enjoys crosswords on Saturdays", "preference", 4),
]


def off_loop(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a blocking memory call in another thread: Playwright's sync API keeps a loop running in this one."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn, *args, **kwargs).result()


def _shots() -> Path:
    return Path(os.environ["MEMORYPORT_SCREENSHOTS"]) if os.environ.get("MEMORYPORT_SCREENSHOTS") else Path()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make setup` installs Debian's chromium (apt-get install -y chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()


def _seed(memory: GuardedMemory) -> dict[str, str]:
    now = datetime.now(timezone.utc)
    ann = MemoryScope(user_id="ann")
    records = [
        MemoryRecord(scope=ann, text=text, metadata={"kind": kind}, created_at=now - timedelta(days=d, minutes=i))
        for i, (text, kind, d) in enumerate(ANN)
    ]
    ids = off_loop(memory.add_sync, records)
    [ben] = off_loop(
        memory.add_sync,
        [
            MemoryRecord(
                scope=MemoryScope(user_id="ben"), text="Ben's bank PIN hint: the cat", metadata={"kind": "secret"}
            )
        ],
    )
    return {"ann_first": ids[0], "ben": ben}


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    target = _shots() if os.environ.get("MEMORYPORT_SCREENSHOTS") else tmp_path / "shots"
    target.mkdir(parents=True, exist_ok=True)
    return target


def _sign_in(page: Page, live: Live, who: str) -> None:
    page.goto(f"{live.url}/ui/")
    expect(page).to_have_url(f"{live.url}/ui/login")
    page.get_by_label("API key").fill(live.secrets[who])
    page.keyboard.press("Enter")  # keyboard only
    expect(page).to_have_url(f"{live.url}/ui/?done=in")


def test_a_person_uses_the_dashboard(browser: Browser, tmp_path: Path, shots: Path) -> None:
    memory = SQLiteMemory(tmp_path / "memory.db")
    ids = _seed(memory)
    with live_server(tmp_path, memory=memory) as live:
        context = browser.new_context(viewport={"width": 1100, "height": 900}, accept_downloads=True)
        page = context.new_page()
        _sign_in(page, live, "ann")
        expect(page.get_by_role("status").first).to_contain_text("Signed in")
        expect(page.get_by_role("heading", name="Memories")).to_be_visible()
        expect(page.locator("article")).to_have_count(20)  # one page
        expect(page.get_by_text("22 memories · page 1 of 2")).to_be_visible()
        page.screenshot(path=str(shots / "dashboard-memories.png"))
        page.get_by_role("link", name="Older →").click()
        expect(page.locator("article")).to_have_count(2)

        # filters: kind and time
        page.goto(f"{live.url}/ui/?kind=todo")
        expect(page.locator("article")).to_have_count(3)
        page.goto(f"{live.url}/ui/?since=3d")
        assert page.locator("article").count() == sum(1 for _, _, d in ANN if d < 3)

        # search shows scores and signals
        page.goto(f"{live.url}/ui/")
        page.get_by_label("Search").fill("tea")
        page.get_by_label("Search").press("Enter")
        cards = page.locator("article")
        expect(cards.first).to_contain_text("score")
        expect(cards.first).to_contain_text("keyword")
        texts = cards.locator("p.text").all_inner_texts()
        assert texts and all("tea" in t for t in texts)
        page.screenshot(path=str(shots / "dashboard-search.png"))

        # edit one memory
        page.goto(f"{live.url}/ui/memories/{ids['ann_first']}")
        page.get_by_label("Text").fill("Ann drinks green tea, and rooibos in the evening")
        page.get_by_label("Metadata").fill(json.dumps({"kind": "preference", "checked": True}))
        page.screenshot(path=str(shots / "dashboard-edit.png"))
        page.get_by_role("button", name="Save").click()
        expect(page.get_by_role("status").first).to_contain_text("updated")
        expect(page.get_by_label("Text")).to_have_value("Ann drinks green tea, and rooibos in the evening")
        record = off_loop(memory.get_sync, ids["ann_first"], scope=MemoryScope(user_id="ann"))
        assert record is not None and record.metadata == {"kind": "preference", "checked": True}
        assert record.updated_at is not None

        # delete one memory (from the edit page)
        page.get_by_role("button", name="Delete this memory").click()
        expect(page.get_by_role("status").first).to_contain_text("deleted")
        assert off_loop(memory.get_sync, ids["ann_first"], scope=MemoryScope(user_id="ann")) is None
        assert off_loop(memory.get_sync, ids["ben"], scope=MemoryScope(user_id="ben")) is not None
        expect(page.get_by_text("21 memories ·")).to_be_visible()

        # export download
        with page.expect_download() as download:
            page.get_by_role("link", name="Export (JSON lines)").click()
        saved = tmp_path / "export.jsonl"
        download.value.save_as(saved)
        lines = [json.loads(x) for x in saved.read_text().splitlines()]
        assert len(lines) == 21 and all("Ben" not in x["text"] for x in lines)

        # stats
        page.get_by_role("link", name="Stats").click()
        expect(page.locator("svg.chart")).to_be_visible()
        expect(page.get_by_role("row", name="fact")).to_contain_text("9")
        expect(page.get_by_text("backend sqlite")).to_be_visible()
        page.screenshot(path=str(shots / "dashboard-stats.png"), full_page=True)

        # another user's memory by editing the URL: the same "no such memory" as a missing id
        for url in (
            f"/ui/memories/{ids['ben']}",
            f"/ui/memories/{ids['ben']}?user=ben",
            "/ui/?user=ben",
            "/ui/export?user=ben",
        ):
            response = page.goto(f"{live.url}{url}")
            assert response is not None and response.status in (403, 404), url
            expect(page.locator("body")).not_to_contain_text("PIN")
        page.screenshot(path=str(shots / "dashboard-other-user.png"))

        # erase with a typed confirmation
        page.goto(f"{live.url}/ui/erase")
        expect(page.get_by_text("all 21 memories")).to_be_visible()
        page.get_by_label("Type the user id").fill("an")
        page.get_by_role("button", name="Erase everything").click()
        expect(page.get_by_role("alert")).to_contain_text("Nothing was erased")
        assert len(off_loop(memory.export_sync, MemoryScope(user_id="ann"))) == 21
        page.get_by_label("Type the user id").fill("ann")
        page.screenshot(path=str(shots / "dashboard-erase.png"))
        page.get_by_role("button", name="Erase everything").click()
        expect(page.get_by_role("status").first).to_contain_text("erased")
        expect(page.get_by_text("No memories match.")).to_be_visible()
        assert off_loop(memory.export_sync, MemoryScope(user_id="ann")) == []
        assert len(off_loop(memory.export_sync, MemoryScope(user_id="ben"))) == 1
        context.close()


def test_edit_on_postgres_and_a_backend_without_update(browser: Browser, tmp_path: Path, pg: Server) -> None:
    memory: GuardedMemory = PostgresMemory(pg.app_dsn, schema=fresh_schema(), pool_size=2)
    ids = _seed(memory)
    with live_server(tmp_path, memory=memory) as live:
        context = browser.new_context(viewport={"width": 1100, "height": 900})
        page = context.new_page()
        _sign_in(page, live, "ann")
        page.goto(f"{live.url}/ui/memories/{ids['ann_first']}")
        page.get_by_label("Text").fill("Ann drinks green tea, and rooibos in the evening")
        page.get_by_label("Metadata").fill(json.dumps({"kind": "preference", "checked": True}))
        page.get_by_role("button", name="Save").click()
        expect(page.get_by_role("status").first).to_contain_text("updated")
        expect(page.get_by_label("Text")).to_have_value("Ann drinks green tea, and rooibos in the evening")
        record = off_loop(memory.get_sync, ids["ann_first"], scope=MemoryScope(user_id="ann"))
        assert record is not None and record.metadata == {"kind": "preference", "checked": True}
        context.close()

    # A store without update: the form says so and is disabled, instead of pretending.
    store = DictStore(frozenset(Capability) - {Capability.VECTOR_SEARCH, Capability.UPDATE})
    memory = GuardedMemory(store)
    ids = _seed(memory)
    (tmp_path / "no-update").mkdir()
    with live_server(tmp_path / "no-update", memory=memory) as live:
        context = browser.new_context()
        page = context.new_page()
        _sign_in(page, live, "ann")
        page.goto(f"{live.url}/ui/memories/{ids['ann_first']}")
        expect(page.get_by_text("backend cannot update a memory")).to_be_visible()
        expect(page.get_by_role("button", name="Save")).to_be_disabled()
        expect(page.get_by_role("button", name="Delete this memory")).to_be_enabled()
        context.close()


def test_narrow_screen_keyboard_and_admin(browser: Browser, tmp_path: Path, shots: Path) -> None:
    memory = GuardedMemory(DictStore())
    ids = _seed(memory)
    with live_server(tmp_path, memory=memory) as live:
        context = browser.new_context(viewport={"width": 380, "height": 800})
        page = context.new_page()
        _sign_in(page, live, "admin")
        expect(page.get_by_role("heading", name="Choose a user")).to_be_visible()
        page.get_by_label("User id").fill("ben")
        page.keyboard.press("Enter")
        expect(page.locator("article")).to_have_count(1)
        expect(page.locator("article")).to_contain_text("PIN hint")
        # keyboard: the skip link comes first and every action is reachable with Tab
        page.keyboard.press("Tab")
        expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
        focused = set()
        for _ in range(25):
            page.keyboard.press("Tab")
            focused.add(page.evaluate("document.activeElement.textContent || document.activeElement.name"))
        assert {"Memories", "Stats", "Edit", "Delete"} <= focused
        # nothing wider than the screen
        assert page.evaluate("document.documentElement.scrollWidth") <= 380
        page.screenshot(path=str(shots / "dashboard-narrow.png"), full_page=True)
        # the admin's edit page keeps the user in every link and form
        page.get_by_role("link", name="Edit").click()
        expect(page).to_have_url(f"{live.url}/ui/memories/{ids['ben']}?user=ben")
        context.close()
