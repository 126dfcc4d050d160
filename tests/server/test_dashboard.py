"""The dashboard over real HTTP, without a browser: sign-in, CSRF, who may see what."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from memoryport import GuardedMemory
from tests.core.dictstore import DictStore

from .support import Live, live_server


@contextmanager
def _signed_in(live: Live, who: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, follow_redirects=False, timeout=30) as client:
        r = client.post("/ui/login", data={"key": live.secrets[who]})
        assert r.status_code == 303 and r.headers["location"] == "/ui/?done=in"
        cookie = r.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie and "path=/ui" in cookie
        yield client


def _csrf(html: str) -> str:
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert match, "no form token on the page"
    return match.group(1)


@pytest.fixture(scope="module")
def ben_id(live: Live) -> str:
    with live.client("ben") as ben:
        r = ben.post(
            "/v1/memories", json={"memories": [{"text": "Ben's diary: met Zoe", "metadata": {"kind": "note"}}]}
        )
        return str(r.json()["ids"][0])


def test_signing_in_and_out(live: Live) -> None:
    with httpx.Client(base_url=live.url, follow_redirects=False) as anonymous:
        r = anonymous.get("/ui/")
        assert r.status_code == 303 and r.headers["location"] == "/ui/login"
        page = anonymous.get("/ui/login")
        assert page.status_code == 200 and 'type="password"' in page.text
        assert "default-src 'none'" in page.headers["content-security-policy"]
        for bad in ("", "mpk_nope", live.secrets["revoked"]):
            r = anonymous.post("/ui/login", data={"key": bad})
            assert r.status_code == 401 and "set-cookie" not in r.headers
        r = anonymous.post("/ui/login", data={"key": live.secrets["ann"]}, headers={"Origin": "https://evil.example"})
        assert r.status_code == 403 and "set-cookie" not in r.headers
    with _signed_in(live, "ann") as ann:
        home = ann.get("/ui/")
        assert home.status_code == 200 and "Memories of <strong>ann</strong>" in home.text
        assert ann.post("/ui/logout", data={"csrf": "0" * 32}).status_code == 403  # a forged sign-out
        r = ann.post("/ui/logout", data={"csrf": _csrf(home.text)})
        assert r.status_code == 303 and 'mp_key=""' in r.headers["set-cookie"]


def test_forms_need_the_token_and_the_same_origin(live: Live, ben_id: str) -> None:
    with live.client("ann") as api:
        [mine] = api.post("/v1/memories", json={"memories": [{"text": "Ann's note"}]}).json()["ids"]
    with _signed_in(live, "ann") as ann:
        token = _csrf(ann.get("/ui/").text)
        assert ann.post(f"/ui/memories/{mine}/delete", data={}).status_code == 403
        assert ann.post(f"/ui/memories/{mine}/delete", data={"csrf": "f" * 32}).status_code == 403
        r = ann.post(f"/ui/memories/{mine}/delete", data={"csrf": token}, headers={"Origin": "https://evil.example"})
        assert r.status_code == 403
        assert ann.post("/ui/erase", data={"confirm": "ann"}).status_code == 403
        with live.client("ann") as api:
            assert api.get(f"/v1/memories/{mine}").status_code == 200  # nothing happened
        r = ann.post(f"/ui/memories/{mine}/delete", data={"csrf": token}, headers={"Origin": live.url})
        assert r.status_code == 303
    with live.client("ann") as api:
        assert api.get(f"/v1/memories/{mine}").status_code == 404


def test_an_ordinary_key_never_reaches_bens_memory(live: Live, ben_id: str) -> None:
    with _signed_in(live, "ann") as ann:
        token = _csrf(ann.get("/ui/").text)
        for path in (
            f"/ui/memories/{ben_id}",
            f"/ui/memories/{ben_id}?user=ben",
            "/ui/?user=ben",
            "/ui/?q=diary",
            "/ui/?user=ben&q=diary",
            "/ui/export?user=ben",
            "/ui/stats?user=ben",
            "/ui/erase?user=ben",
            "/ui/export",
        ):
            r = ann.get(path)
            assert "Zoe" not in r.text and ben_id not in r.text, path
            if "user=ben" in path:
                assert r.status_code == 403, path
        assert ann.get(f"/ui/memories/{ben_id}").status_code == 404
        for path, data in (
            (f"/ui/memories/{ben_id}/delete", {}),
            (f"/ui/memories/{ben_id}", {"text": "x"}),
            (f"/ui/memories/{ben_id}/delete", {"user": "ben"}),
            ("/ui/erase", {"confirm": "ben", "user": "ben"}),
        ):
            r = ann.post(path, data={"csrf": token, **data})
            assert r.status_code in (403, 404) and "Zoe" not in r.text
    with live.client("ben") as ben:
        assert ben.get(f"/v1/memories/{ben_id}").json()["text"] == "Ben's diary: met Zoe"


def test_an_admin_chooses_the_user(live: Live, ben_id: str) -> None:
    with _signed_in(live, "admin") as admin:
        r = admin.get("/ui/")
        assert r.status_code == 200 and "Choose a user" in r.text
        r = admin.get("/ui/?user=ben")
        assert "Ben&#x27;s diary: met Zoe" in r.text and "admin</span>" in r.text
        assert f"/ui/memories/{ben_id}?user=ben" in r.text  # links keep the user
        assert admin.get(f"/ui/memories/{ben_id}?user=ann").status_code == 404


def test_erase_needs_the_typed_user_id(tmp_path: Path) -> None:
    with live_server(tmp_path) as live:
        with live.client("ann") as api:
            api.post("/v1/memories", json={"memories": [{"text": "one"}, {"text": "two"}]})
        with _signed_in(live, "ann") as ann:
            page = ann.get("/ui/erase")
            assert "all <strong>2</strong> memories" in page.text
            token = _csrf(page.text)
            r = ann.post("/ui/erase", data={"csrf": token, "confirm": "ANN"})
            assert r.status_code == 422 and "Nothing was erased" in r.text
            assert ann.post("/ui/erase", data={"csrf": token, "confirm": "ann"}).status_code == 303
        with live.client("ann") as api, live.client("ben") as ben:
            assert api.get("/v1/stats").json()["total"] == 0
            assert ben.get("/v1/stats").status_code == 200


def test_edit_through_the_form(tmp_path: Path) -> None:
    with live_server(tmp_path, memory=GuardedMemory(DictStore())) as live:
        with live.client("ann") as api:
            [mine] = api.post(
                "/v1/memories", json={"memories": [{"text": "Ann likes tea", "metadata": {"kind": "fact"}}]}
            ).json()["ids"]
        with _signed_in(live, "ann") as ann:
            page = ann.get(f"/ui/memories/{mine}")
            token = _csrf(page.text)
            form = {"csrf": token, "text": "Ann likes coffee", "metadata": '{"kind": "preference"}', "expires_at": ""}
            r = ann.post(f"/ui/memories/{mine}", data=form)
            assert r.status_code == 303
            bad = ann.post(f"/ui/memories/{mine}", data={**form, "metadata": "[1]"})
            assert bad.status_code == 422 and "JSON object" in bad.text
            bad = ann.post(f"/ui/memories/{mine}", data={**form, "text": "   "})
            assert bad.status_code == 422 and "Not saved: text" in bad.text
        with live.client("ann") as api:
            now = api.get(f"/v1/memories/{mine}").json()
        assert now["text"] == "Ann likes coffee" and now["metadata"] == {"kind": "preference"}
        assert now["updated_at"] is not None


def test_stored_markup_is_shown_as_text(tmp_path: Path) -> None:
    evil = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    with live_server(tmp_path) as live:
        with live.client("ann") as api:
            [mine] = api.post(
                "/v1/memories",
                json={
                    "memories": [
                        {"text": evil, "metadata": {"kind": "<b>k</b>", "<i>key</i>": '"><svg onload=alert(1)>'}}
                    ]
                },
            ).json()["ids"]
        with _signed_in(live, "ann") as ann:
            for path in ("/ui/", "/ui/?q=script", f"/ui/memories/{mine}", "/ui/stats"):
                html = ann.get(path).text
                assert "<script>" not in html and "<img" not in html and "<svg onload" not in html, path
                assert "<b>k</b>" not in html and "<i>key</i>" not in html, path
            assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in ann.get("/ui/").text
