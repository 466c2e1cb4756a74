"""Logins that cannot be guessed at: throttling per account and per client address, a log
line for each refused login, locks the administrator sees and lifts, and passwords that
are long and not common.

The team app on the production server, behind a "proxy" on 127.0.0.1 (``trusted_proxy``),
so that each request can come from its own client address (``X-Forwarded-For``).
"""

from __future__ import annotations

import logging
import re
import time

import pytest

from microg4m.annotate.team import accounts
from microg4m.annotate.team.server import create_app

from team_setup import Client, make_project, password, serving

LIMITS = {"account_failures": 3, "address_failures": 5, "window_seconds": 600, "lock_seconds": 5.0}


@pytest.fixture
def team(tmp_path):
    project = make_project(tmp_path, annotators=("alice", "bob", "carol"), adjudicators=(), login=LIMITS)
    with serving(create_app(project, {"127.0.0.1", "localhost"}), trusted_proxy="127.0.0.1") as port:
        yield project, port


def attempt(port: int, name: str, pw: str, addr: str) -> tuple[int, str, object]:
    """One login through the form, from client address ``addr``: (status, page, response)."""
    c = Client(port)
    via = {"X-Forwarded-For": addr}
    _, page, resp = c.request("GET", "/login", headers=via)
    c.cookie = resp.getheader("Set-Cookie").split(";", 1)[0]
    token = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
    return c.request("POST", "/login", form={"csrf": token, "name": name, "password": pw}, headers=via)


def test_the_n_plus_first_attempt_is_refused_for_the_set_time_then_accepted(team, caplog):
    project, port = team
    caplog.set_level(logging.INFO, logger="microg4m.team")
    for i in range(LIMITS["account_failures"]):  # wrong passwords for alice, each from another address
        status, page, _ = attempt(port, "alice", f"wrong-{i}", f"10.0.0.{i + 1}")
        assert status == 401 and "Wrong name or password" in page
    t0 = time.monotonic()
    status, page, resp = attempt(port, "alice", password("alice"), "10.0.1.1")  # even the right one, now
    assert status == 429 and "Too many failed logins" in page and int(resp.getheader("Retry-After")) <= 6
    assert "__Host-microg4m-team=" not in (resp.getheader("Set-Cookie") or "")
    assert attempt(port, "bob", password("bob"), "10.0.0.1")[0] == 303  # another account is not locked
    refused = [r.getMessage() for r in caplog.records if r.name == "microg4m.team"]
    assert sum(m.startswith("login refused: 'alice' from 10.0.0.") and "wrong name or password" in m
               for m in refused) == 3
    assert any(m.startswith("LOCKED account:alice for 5 s") and "microg4m team user unlock alice" in m
               for m in refused)
    assert any(m.startswith("login refused: 'alice' from 10.0.1.1: account:alice is locked until") for m in refused)
    from microg4m.annotate.team import throttle

    conn = project.connect()
    assert list(throttle.locks(conn)) == ["account:alice"]  # what `microg4m team user list` shows
    conn.close()
    time.sleep(max(0.0, LIMITS["lock_seconds"] + 0.2 - (time.monotonic() - t0)))
    assert attempt(port, "alice", password("alice"), "10.0.1.1")[0] == 303  # the lock is over


def test_an_address_that_guesses_at_many_accounts_is_locked(team, caplog):
    project, port = team
    caplog.set_level(logging.INFO, logger="microg4m.team")
    names = ["alice", "bob", "carol", "nobody", "admin"]  # names that are no account count too
    for name in names[:LIMITS["address_failures"]]:
        assert attempt(port, name, "guess-123456", "192.0.2.7")[0] == 401
    assert attempt(port, "carol", password("carol"), "192.0.2.7")[0] == 429  # the address is locked
    assert attempt(port, "carol", password("carol"), "192.0.2.8")[0] == 303  # carol, from elsewhere, is not
    assert any(r.getMessage().startswith("LOCKED address:192.0.2.7") for r in caplog.records)
    # a flood from the locked address costs no password check: answered at once
    t0 = time.monotonic()
    for _ in range(10):
        assert attempt(port, "alice", "guess", "192.0.2.7")[0] == 429
    assert time.monotonic() - t0 < 5


def test_the_command_line_shows_and_lifts_a_lock_and_refuses_weak_passwords(tmp_path, monkeypatch, capsys):
    import io

    import yaml

    from microg4m import cli
    from microg4m.annotate.team.db import connect

    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text(yaml.safe_dump({"team": {"passwords": {"min_length": 12}}}))
    monkeypatch.chdir(tmp_path)

    def team(*args, stdin=""):
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        code = cli.main(["team", *args])
        out = capsys.readouterr()
        return code, out.out, out.err

    # the passwords, a common one, one made of the name, one too short
    for pw, why in (("12345678", "too short"), (" " * 12, "too easy to guess"), ("password1234", "too easy"),
                    ("alice1234567", "too easy"), ("qwertyuiop12", "too easy"), ("Tr0ub4dor&3", "too short"),
                    ("a\ud800-long-enough-pass", "lone surrogate")):
        code, _, err = team("user", "add", "alice", "--password-stdin", stdin=pw + "\n")
        assert code == 1 and why in err, (pw, err)
        assert pw not in err  # the password is never echoed
    assert team("user", "add", "alice", "--password-stdin", stdin="violet-kettle-drums-9\n")[0] == 0
    from microg4m.annotate.team import throttle

    conn = connect(tmp_path / "annotations" / "team.sqlite")
    limits = throttle.Limits(account_failures=1, lock_seconds=600)
    throttle.begin(conn, limits, "alice", "10.0.0.1")  # a failed login: alice is locked
    conn.close()
    code, out, _ = team("user", "list")
    assert code == 0 and re.fullmatch(r"alice\tannotator\tactive\t\S+\tlocked until \d{4}-\d\d-\d\d \S+ UTC\n", out)
    assert team("user", "unlock", "alice")[1] == "unlocked account:alice\n"
    assert "locked" not in team("user", "list")[1]
    with pytest.raises(ValueError, match="password too easy to guess"):
        accounts.check_password("alice-alice-alice", "alice")
