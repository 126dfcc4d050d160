"""The site's navigation lists every docs page, and only pages that exist.

When a page arrives on main without a nav entry, this test names it: add it to
``nav`` in mkdocs.yml (``mkdocs build --strict`` in ``make docs`` would only
log it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _nav_pages(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [page for item in node for page in _nav_pages(item)]
    if isinstance(node, dict):
        return [page for value in node.values() for page in _nav_pages(value)]
    raise AssertionError(f"unexpected nav entry {node!r}")


def _config() -> dict[str, Any]:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert isinstance(config, dict)
    return config


def test_every_page_is_in_the_nav() -> None:
    listed = set(_nav_pages(_config()["nav"]))
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert not pages - listed, f"add these pages to nav in mkdocs.yml: {sorted(pages - listed)}"
    assert not listed - pages, f"nav lists pages that do not exist: {sorted(listed - pages)}"


def test_nav_lists_each_page_once() -> None:
    listed = _nav_pages(_config()["nav"])
    assert len(listed) == len(set(listed)), sorted(p for p in listed if listed.count(p) > 1)


def test_the_build_is_strict() -> None:
    config = _config()
    assert config["strict"] is True
    assert config["theme"]["name"] == "material"
    links = config["validation"]["links"]
    assert links["not_found"] == "warn" and links["anchors"] == "warn"  # warnings fail a strict build


def test_the_built_site_browses_from_the_disk() -> None:
    """Opening site/index.html must work: links go to page.html files, not to folders a browser lists."""
    assert _config()["use_directory_urls"] is False
