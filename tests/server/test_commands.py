"""``idee-agent cleanup`` and ``idee-agent serve`` (several workers sharing the SQLite file)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from datetime import timedelta

import httpx
import pytest
import typer
from sqlalchemy import update
from typer.testing import CliRunner

from idee_notebook_agent.config import reset_settings
from idee_notebook_agent.server.commands import register
from idee_notebook_agent.server.store import ConversationRow, Store, utcnow


@pytest.fixture
def cli(tmp_path, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'db.sqlite3'}")
    monkeypatch.setenv("IDEE_DATA_DIR", str(tmp_path / "data"))
    reset_settings()
    app = typer.Typer()
    register(app)
    yield app
    reset_settings()


def seed(tmp_path) -> tuple[str, str, str]:
    store = Store(f"sqlite:///{tmp_path / 'db.sqlite3'}")
    ids = (
        "a0000000-0000-4000-8000-000000000001",
        "a0000000-0000-4000-8000-000000000002",
        "a0000000-0000-4000-8000-000000000003",
    )
    for cid in ids:
        store.create(cid, title=f"t-{cid[-1]}")
    with store.engine.begin() as conn:
        conn.execute(
            update(ConversationRow)
            .where(ConversationRow.id == ids[0])
            .values(updated_at=utcnow() - timedelta(hours=30))
        )
        conn.execute(
            update(ConversationRow)
            .where(ConversationRow.id == ids[1])
            .values(updated_at=utcnow() - timedelta(hours=5))
        )
    store.close()
    return ids


def test_cleanup_dry_run_then_real(cli, tmp_path):
    old, mid, new = seed(tmp_path)
    runner = CliRunner()
    r = runner.invoke(cli, ["cleanup", "--dry-run"])
    assert r.exit_code == 0, r.output
    assert "Se borrarían 1" in r.output and old in r.output
    r = runner.invoke(cli, ["cleanup", "--hours", "4"])
    assert r.exit_code == 0, r.output
    assert "Borradas 2" in r.output and old in r.output and mid in r.output
    store = Store(f"sqlite:///{tmp_path / 'db.sqlite3'}")
    assert store.get(old) is None and store.get(mid) is None and store.get(new) is not None
    store.close()
    r = runner.invoke(cli, ["cleanup", "--hours", "-1"])
    assert r.exit_code == 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_serve_with_two_workers_shares_one_database(tmp_path):
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "IDEE_DATA_DIR": str(tmp_path / "data"),
        "PYTHONPATH": os.getcwd(),
    }
    code = (
        "import typer; from idee_notebook_agent.server.commands import register; "
        "app = typer.Typer(); register(app); app()"
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            code,
            "serve",
            "--port",
            str(port),
            "--workers",
            "2",
            "--log-level",
            "warning",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            try:
                if httpx.get(f"{base}/api/providers/", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.2)
        created = [httpx.post(f"{base}/api/conversations/", json={}).json()["id"] for _ in range(6)]
        for cid in created:  # new connections: the requests spread over both workers
            assert httpx.get(f"{base}/api/conversations/{cid}/").status_code == 200
        assert httpx.get(f"{base}/api/conversations/").json()["count"] == 6
    finally:
        proc.terminate()
        proc.wait(timeout=20)
