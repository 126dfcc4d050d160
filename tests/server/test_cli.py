"""``memoryport keys`` and ``memoryport serve`` from the shell."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from memoryport.cli import main
from tests.postgres.support import Server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_keys_create_list_revoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "memory.db"
    assert main(["keys", "create", "--db", str(db), "--user", "ann", "--label", "laptop"]) == 0
    secret = capsys.readouterr().out.strip()
    assert secret.startswith("mpk_")
    keys_file = tmp_path / "memory.db.keys"
    assert stat.S_IMODE(keys_file.stat().st_mode) == 0o600
    assert secret.encode() not in keys_file.read_bytes()  # only a digest is kept
    assert main(["keys", "create", "--db", str(db), "--admin"]) == 0
    capsys.readouterr()
    assert main(["keys", "list", "--db", str(db)]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(r["user"], r["admin"], r["label"]) for r in rows] == [("ann", False, "laptop"), (None, True, "")]
    assert secret not in json.dumps(rows)
    key_id = secret.split("_")[1]
    assert rows[0]["id"] == key_id
    assert main(["keys", "revoke", "--db", str(db), key_id]) == 0
    assert main(["keys", "revoke", "--db", str(db), key_id]) == 2  # no longer active
    capsys.readouterr()
    assert main(["keys", "list", "--db", str(db)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1
    assert main(["keys", "list", "--db", str(db), "--all"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2


@pytest.mark.parametrize(
    "argv",
    [
        ["keys", "create", "--user", "ann"],  # no file named
        ["keys", "create", "--keys", "K", "--user", "ann", "--admin"],
        ["keys", "create", "--keys", "K"],
        ["keys", "create", "--keys", "K", "--user", "a\u0001b"],
        ["keys", "create", "--keys", "K", "--user", "ann", "--rate-per-minute", "0"],
        ["keys", "list", "--keys", "missing.keys"],
        ["keys", "create", "--db", "postgresql://app@db/app", "--user", "ann"],  # a DSN has no PATH.keys
        ["serve", "--db", "postgresql://app@db/app"],
        ["keys"],
        ["serve"],
    ],
)
def test_keys_and_serve_mistakes_are_one_line(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MEMORYPORT_DB", raising=False)
    monkeypatch.delenv("MEMORYPORT_KEYS", raising=False)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_serve_runs_answers_and_stops_on_sigterm(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> None:
    if backend == "postgres":
        pg: Server = request.getfixturevalue("pg")
        db = pg.app_dsn
    else:
        db = str(tmp_path / "memory.db")
    keys = ["--keys", str(tmp_path / "k.keys")]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    made = subprocess.run(
        [sys.executable, "-m", "memoryport.cli", "keys", "create", *keys, "--user", "ann"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    secret = made.stdout.strip()
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "memoryport.cli", "serve", "--db", db, *keys, "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "memoryport serve did not come up"
            time.sleep(0.1)
        headers = {"Authorization": f"Bearer {secret}"}
        r = httpx.post(f"{url}/v1/memories", json={"memories": [{"text": "Ann plays the oboe"}]}, headers=headers)
        assert r.status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode in (0, -signal.SIGTERM), err  # uvicorn re-raises the signal after a clean stop
    assert "Application shutdown complete" in err
    assert "oboe" not in out + err  # the logs carry no content
    assert '"route": "/v1/memories"' in err  # ...but one line per request
    if backend == "postgres":
        assert "serving postgresql://" in out


def test_a_dsn_is_printed_without_its_password() -> None:
    from memoryport.cli.serve import _without_password

    assert _without_password("postgresql://app:s3cret@db:5432/app") == "postgresql://app:***@db:5432/app"
    assert _without_password("postgresql://app@db/app") == "postgresql://app@db/app"
    assert _without_password("memory.db") == "memory.db"
