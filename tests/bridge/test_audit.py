"""The audit log: a hash chain the store keeps as it writes, `audit --verify` finding the first broken link, and
`audit` reading the log filtered as a table, JSON lines or CSV while it stays untouched."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import time
from pathlib import Path

import anyio
import pytest

from bridge.cli.entry import main
from bridge.door.forms import Form
from bridge.door.model import Actor, ConversationKey, Interaction, Kind, Outcome, ServerLabel, Status
from bridge.storage import AuditRow, open_store
from bridge.storage import audit as chain

ADA = Actor("slack", "U1", "Ada")
BOB = Actor("matrix", "@bob:example.org", "Bob")


def interaction(n: int, kind: Kind, server: str, requester: Actor) -> Interaction:
    return Interaction(id=f"i{n}", kind=kind, server=ServerLabel(server, server.title()),
                       conversation=ConversationKey("slack", "T1", "C1", "1.0"), requester=requester,
                       approvers=frozenset(), message="?", form=Form(), expires_at=time.time() + 60)


def fill(path: Path) -> None:
    anyio.run(_fill, path)


async def _fill(path: Path) -> None:
    store = await open_store(path)
    try:
        for n, kind, server, who, outcome in [(1, Kind.FORM, "github", ADA, Outcome(Status.ACCEPTED, {}, ADA)),
                                              (2, Kind.TOOL, "ops", BOB, Outcome(Status.DECLINED, None, BOB))]:
            await store.save_interaction(interaction(n, kind, server, who))
            assert await store.claim(interaction(n, kind, server, who), outcome)
        await store.audit(interaction(3, Kind.SAMPLING, "github", BOB),
                          Outcome(Status.EXPIRED, reason="nobody answered"))
        await store.audit(interaction(4, Kind.URL, "ops", ADA), Outcome(Status.ACCEPTED, None, ADA),
                          detail="=cmd|calc")
    finally:
        await store.aclose()


async def _rows(path: Path) -> list[AuditRow]:
    store = await open_store(path)
    try:
        return await store.audit_rows()
    finally:
        await store.aclose()


def verify(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["audit", "--store", str(path), "--verify"])
    out, err = capsys.readouterr()
    return code, out + err


def test_each_row_links_to_the_one_before(tmp_path: Path) -> None:
    fill(tmp_path / "s.db")
    rows = anyio.run(_rows, tmp_path / "s.db")
    assert [r.outcome for r in rows] == ["accepted", "declined", "expired", "accepted"]
    previous = chain.GENESIS
    for row in rows:
        assert row.hash == chain.link(previous, [getattr(row, f) for f in chain.FIELDS])
        previous = row.hash


def test_verify_finds_an_edited_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.db"
    fill(db)
    assert verify(db, capsys)[0] == 0
    with sqlite3.connect(db) as raw:
        raw.execute("UPDATE audit SET outcome = 'accepted' WHERE id = 2")  # someone rewrites a decline
    code, text = verify(db, capsys)
    assert code == 1
    assert "BROKEN at row 2 (id 2)" in text and "the 1 rows before it are intact" in text


def test_verify_finds_a_removed_row_and_a_forged_hash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.db"
    fill(db)
    with sqlite3.connect(db) as raw:
        raw.execute("DELETE FROM audit WHERE id = 2")
    assert "BROKEN at row 2 (id 3)" in verify(db, capsys)[1]
    fill(tmp_path / "t.db")
    with sqlite3.connect(tmp_path / "t.db") as raw:
        # An edit with its own hash recomputed still breaks the next row's link.
        values = list(raw.execute(f"SELECT {', '.join(chain.FIELDS)} FROM audit WHERE id = 2").fetchone())
        values[5] = "accepted"
        previous = raw.execute("SELECT hash FROM audit WHERE id = 1").fetchone()[0]
        raw.execute("UPDATE audit SET outcome = 'accepted', hash = ? WHERE id = 2", (chain.link(previous, values),))
    assert "BROKEN at row 3 (id 3)" in verify(tmp_path / "t.db", capsys)[1]


def test_a_store_from_before_the_chain_is_linked_when_opened(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             ) -> None:
    db = tmp_path / "old.db"
    with sqlite3.connect(db) as raw:
        raw.execute("CREATE TABLE audit (id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, interaction_id TEXT"
                    " NOT NULL, kind TEXT NOT NULL, server TEXT NOT NULL, conversation TEXT NOT NULL, outcome TEXT NOT"
                    " NULL, actor TEXT, actor_name TEXT, requester TEXT, detail TEXT NOT NULL DEFAULT '')")
        raw.execute("INSERT INTO audit (at, interaction_id, kind, server, conversation, outcome) VALUES "
                    "(1.5, 'old', 'form', 'x', 'c', 'accepted')")
    assert main(["audit", "--store", str(db), "--verify"]) == 2
    assert "written before the audit chain existed" in capsys.readouterr().err
    anyio.run(_rows, db)  # opened once by a bridge
    fill(db)
    code, text = verify(db, capsys)
    assert code == 0 and text.startswith("OK: 5 rows")


def test_filters_and_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.db"
    fill(db)
    before = db.read_bytes()
    config = tmp_path / "bridge.yaml"
    config.write_text("store: ${STATE}/s.db\nchat: {slack: {bot_token: '${UNSET_TOKEN}'}}\n")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("STATE", str(tmp_path))  # only store: is read; the unset token does not matter
        assert main(["audit", "-c", str(config), "--server", "github", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(e["interaction"], e["kind"], e["outcome"], e["by_name"]) for e in lines] == [
        ("i1", "form", "accepted", "Ada"), ("i3", "sampling", "expired", None)]
    assert main(["audit", "--store", str(db), "--who", "bob", "--kind", "tool"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["time", "server", "kind", "outcome", "decided", "by", "asked", "by", "conversation",
                                "detail"]
    assert len(table) == 2 and " ops " in table[1] and "declined" in table[1]
    assert main(["audit", "--store", str(db), "--csv", "--since", "1h"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 4 and rows[3]["detail"] == "'=cmd|calc"  # no formula for a spreadsheet to run
    assert main(["audit", "--store", str(db), "--since", "2999-01-01"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1  # the header only
    assert db.read_bytes() == before  # reading never writes


def test_bad_audit_arguments_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--store", str(tmp_path / "none.db")]) == 2
    assert "does not exist" in capsys.readouterr().err
    fill(tmp_path / "s.db")
    assert main(["audit", "--store", str(tmp_path / "s.db"), "--since", "last tuesday"]) == 2
    assert "--since: 'last tuesday' is neither a duration" in capsys.readouterr().err
    assert main(["audit", "--store", str(tmp_path / "s.db"), "--kind", "poll"]) == 2
    assert "--kind: must be one of form, url" in capsys.readouterr().err
