"""Team mode: assignment, the history, the refusals (each a real HTTP request against a
running server), the import of existing files and the agreement report.

The results folder is the small one of test_annotate_store.py (no video needed here,
except for one frame request which answers 403 before any decoding).
"""

from __future__ import annotations

import http.client
import sqlite3
from itertools import combinations
from pathlib import Path

import pandas as pd
import pytest

from microg4m.annotate import agreement
from microg4m.annotate.team import accounts, assign, history
from microg4m.annotate.team.db import FINAL, connect, transaction
from microg4m.annotate.team.server import create_app

from team_setup import HEADER, SCREENING_HEADER, Client, history_rows, make_project, serving
from test_annotate_store import LABEL_MAP

# ---------------------------------------------------------------- assignment (pure, then stored)


def test_assignment_is_balanced_deterministic_and_pairs_vary():
    clips = [f"src_{i:03d}" for i in range(30)]
    names = ["ann", "bea", "cid", "dov"]
    plan = assign.plan(clips, names, 2)
    assert plan == assign.plan(list(reversed(clips)), names, 2)  # same inputs, same plan
    assert all(len(set(v)) == 2 for v in plan.values()) and set(plan) == set(clips)
    loads = {a: sum(a in v for v in plan.values()) for a in names}
    assert loads == {a: 15 for a in names}
    pairs = {tuple(v) for v in plan.values()}
    assert len(pairs) == len(list(combinations(names, 2)))  # every pair meets
    for n, k in ((5, 2), (3, 2), (7, 3)):
        p = assign.plan(clips[:11], names[:n] if n <= 4 else [f"a{i}" for i in range(n)], k)
        load = [sum(a in v for v in p.values()) for a in {x for v in p.values() for x in v}]
        assert max(load) - min(load) <= 1, (n, k, load)
    assert assign.plan(["c_000"], ["solo"], 2) == {"c_000": ["solo"]}  # fewer annotators than k
    # stored assignments never move: a newcomer gets only new clips, the least loaded first
    later = assign.plan(clips + ["src_030", "src_031"], names + ["eve"], 2,
                        {c: set(v) for c, v in plan.items()})
    assert set(later) == {"src_030", "src_031"} and all("eve" in v for v in later.values())
    with pytest.raises(ValueError, match="annotators_per_clip = 0"):
        assign.plan(clips, names, 0)


def test_a_disabled_annotator_is_replaced_and_raising_k_tops_up(tmp_path):
    project = make_project(tmp_path, annotators=("alice", "bob", "carol"), k=1)
    conn = project.connect()
    before = assign.assignments(conn)
    assert sorted(len(v) for v in before.values()) == [1, 1, 1]  # 3 kept clips, k = 1, one each
    assert sorted(a for v in before.values() for a in v) == ["alice", "bob", "carol"]
    alice_clip = assign.queue(conn, "alice")
    accounts.set_active(conn, "alice", False)
    project.assign(conn)
    now = project.assigned(conn)
    assert "alice" not in {a for v in now.values() for a in v}
    assert all(len(now[c]) == 1 for c in before) and now[alice_clip[0]] != ["alice"]
    conn.close()


# ---------------------------------------------------------------- the history


def test_history_is_append_only_and_replays_to_the_current_values(tmp_path):
    conn = connect(tmp_path / "t.sqlite")
    conn.execute("INSERT INTO users VALUES ('ann', 'annotator', 'x', 1, 'now')")
    with transaction(conn):
        assert history.put(conn, "ann", "ann", "actions", "c_000", "r", 1, [12]) == 1
        assert history.put(conn, "ann", "ann", "actions", "c_000", "r", 1, [12]) is None  # same value: no row
        history.put(conn, "ann", "ann", "actions", "c_000", "r", 1, [12, 14])
        history.put(conn, "ann", "ann", "exclusion", "c_001", "m", 0, "blurry")
        history.put(conn, "ann", "ann", "actions", "c_000", "r", 1, [])
    rows = history.rows(conn)
    assert [(r["before"], r["after"]) for r in rows] == [(None, "[12]"), ("[12]", "[12,14]"), (None, '"blurry"'),
                                                         ("[12,14]", None)]
    assert history.replay(conn) == history.current(conn) == {
        ("ann", "exclusion", "c_001", 0): history.Value("blurry", "m")}
    for sql in ("UPDATE changes SET after = '[1]' WHERE seq = 1", "DELETE FROM changes WHERE seq = 1"):
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute(sql)
    # a row whose 'before' is not what came before it is found by the replay
    conn.execute("INSERT INTO changes (at, who, layer, kind, clip_id, clip_type, person_id, before, after) "
                 "VALUES ('now', 'ann', 'ann', 'actions', 'c_000', 'r', 1, '[99]', '[1]')")
    with pytest.raises(history.HistoryError, match="history row 5: before='\\[99\\]'"):
        history.replay(conn)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    conn.close()


# ---------------------------------------------------------------- refusals over HTTP


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("team")
    project = make_project(tmp, annotators=("alice", "bob", "carol"), k=2)
    with serving(create_app(project, {"127.0.0.1", "localhost"})) as port:
        users = {n: Client(port).login(n) for n in ("alice", "bob", "judy")}
        users["anon"] = Client(port)
        conn = project.connect()
        mine = assign.queue(conn, "alice")
        other = sorted(set(project.results.clips()) - set(mine) - {"film_001"})[0]
        conn.close()
        yield project, users, mine[0], other


def body(clip, annotator=None, **kw):
    out = {"clip_id": clip, "person_id": 1, "action": 12, "op": "add", **kw}
    if annotator:
        out["annotator"] = annotator
    return out


def snapshot(project) -> tuple:
    files = tuple(Path(p).read_bytes() for p in project.files.paths())
    return len(history_rows(project)), files


MINE, OTHER = "{mine}", "{other}"
CASES = [
    # not logged in
    ("anon", "GET", "/api/state", None, True, 401, "not logged in"),
    ("anon", "POST", "/api/actions", body(MINE), False, 401, "not logged in"),
    ("anon", "GET", f"/clip/{MINE}/frame/1.jpg", None, True, 401, "not logged in"),
    ("anon", "GET", f"/clip/{MINE}/frames", None, True, 401, "not logged in"),
    ("anon", "GET", "/api/adjudication", None, True, 401, "not logged in"),
    ("anon", "GET", "/", None, True, 302, "/login"),
    ("anon", "GET", "/adjudicate", None, True, 302, "/login"),
    # a missing or forged CSRF token
    ("alice", "POST", "/api/actions", body(MINE), None, 403, "missing CSRF token"),
    ("alice", "POST", "/api/actions", body(MINE), "forged-token", 403, "does not match this session"),
    ("alice", "POST", "/api/actions", body(MINE), "bob", 403, "does not match this session"),  # bob's own token
    ("alice", "POST", "/api/screening", {"clip_id": MINE, "excluded": True}, None, 403, "missing CSRF token"),
    ("judy", "POST", "/api/final", {"clip_id": MINE, "excluded": True}, "forged", 403, "does not match"),
    ("alice", "POST", "/logout", {}, None, 403, "missing CSRF token"),
    # another annotator's labels, a clip outside one's queue
    ("alice", "POST", "/api/actions", body(MINE, "bob"), True, 403, "only their own labels, not those of 'bob'"),
    ("alice", "POST", "/api/screening", {"clip_id": MINE, "excluded": True, "annotator": "bob"}, True, 403,
     "only their own labels"),
    ("alice", "GET", f"/api/clips/{MINE}?annotator=bob", None, True, 403, "only their own labels"),
    ("alice", "GET", "/api/state?annotator=bob", None, True, 403, "only their own labels"),
    ("alice", "POST", "/api/actions", body(OTHER), True, 403, f"clip {OTHER} is not in alice's queue"),
    ("alice", "GET", f"/api/clips/{OTHER}", None, True, 403, "is not in alice's queue"),
    ("alice", "GET", f"/clip/{OTHER}/frame/1.jpg", None, True, 403, "is not in alice's queue"),
    ("alice", "GET", f"/clip/{OTHER}/frames", None, True, 403, "is not in alice's queue"),
    ("alice", "POST", "/api/final", {"clip_id": MINE, "excluded": True}, True, 403, "is for adjudicators"),
    # an annotator on the adjudication view, an adjudicator on an annotator's
    ("alice", "GET", "/adjudicate", None, True, 403, "/adjudicate is for adjudicators; alice is an annotator"),
    ("alice", "GET", "/api/adjudication", None, True, 403, "is for adjudicators"),
    ("alice", "GET", f"/api/adjudication/{MINE}", None, True, 403, "is for adjudicators"),
    ("alice", "POST", "/api/report", {}, True, 403, "is for adjudicators"),
    ("alice", "GET", f"/api/history/{MINE}", None, True, 403, "is for adjudicators"),
    ("judy", "POST", "/api/actions", body(MINE), True, 403, "is for annotators"),
    # a foreign Host (DNS rebinding) or Origin
    ("alice", "GET", "/api/state", None, {"Host": "evil.example"}, 403, "Host 'evil.example' is not an address"),
    ("anon", "GET", "/login", None, {"Host": "evil.example:80"}, 403, "is not an address"),
    ("alice", "POST", "/api/actions", body(MINE), {"Origin": "http://evil.example"}, 403, "Origin"),
    # paths outside the results folder and bad values
    ("alice", "POST", "/api/actions", body("../../etc/passwd"), True, 404, "unknown clip"),
    ("judy", "GET", "/api/adjudication/..%2F..%2Fetc%2Fpasswd", None, True, 404, "no such page"),
    ("judy", "GET", "/clip/..%2F..%2Fetc%2Fpasswd.mp4", None, True, 404, "no such page"),
    ("judy", "POST", "/api/final", {"clip_id": "dancer_000", "excluded": False, "actions": {"1": [2]}}, True, 422,
     "unknown action id 2"),
    ("judy", "POST", "/api/final", {"clip_id": "dancer_000", "excluded": False, "actions": {"7": [12]}}, True, 404,
     "person 7 has no box"),
    # a digit that is no ASCII digit ("²".isdigit() is True; int("²") raised a ValueError: 500)
    ("judy", "POST", "/api/final", {"clip_id": "dancer_000", "excluded": False, "actions": {"²": [14]}}, True, 400,
     "person_id must be an integer, got '²'"),
    ("alice", "POST", "/api/actions", body(MINE, action=12, op="toggle"), True, 400, "op must be"),
]


@pytest.mark.parametrize("who, method, path, data, csrf, status, message", CASES,
                         ids=[f"{c[0]}-{c[1]}-{c[2][:30]}-{c[5]}" for c in CASES])
def test_refused_and_nothing_written(served, who, method, path, data, csrf, status, message):
    project, users, mine, other = served
    fill = lambda x: x.replace(MINE, mine).replace(OTHER, other) if isinstance(x, str) else x  # noqa: E731
    path, message = fill(path), fill(message)
    if isinstance(data, dict):
        data = {k: fill(v) for k, v in data.items()}
    client = users[who]
    headers = csrf if isinstance(csrf, dict) else {}
    token = users[csrf].csrf if isinstance(csrf, str) and csrf in users else csrf
    before = snapshot(project)
    if method == "POST":
        got, payload, resp = client.post(path, data, csrf=True if isinstance(csrf, dict) else token,
                                         headers=headers)
    else:
        got, payload, resp = client.request("GET", path, headers=headers)
    assert got == status, (got, payload)
    if status == 302:
        assert resp.getheader("Location") == message
    else:
        assert message in payload["error"], payload
    assert snapshot(project) == before


def test_raw_paths_outside_the_results_folder(served):
    """Sent as is (no client-side normalising), logged in as the adjudicator (who may read any clip)."""
    project, users, *_ = served
    port, cookie = users["judy"].port, users["judy"].cookie
    for path in ("/clip/../../etc/passwd", "/clip/../../../../etc/passwd.mp4", "/static/../../../etc/passwd",
                 "/clip/dancer_000/frame/../../../../etc/passwd", "/../" + str(project.db_path)):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", path, headers={"Cookie": cookie})
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        assert 400 <= resp.status < 500, (path, resp.status)
        assert b"root:" not in data and b"SQLite" not in data


def test_login_logout_and_passwords(served):
    project, users, mine, _ = served
    port = users["alice"].port
    for name, pw in (("alice", "wrong-password"), ("nobody", "secret-of-nobody")):
        c = Client(port)
        status, page, _ = c.request("GET", "/login")
        import re

        token = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
        c.cookie = f"__Host-microg4m-login={token}"
        status, page, resp = c.request("POST", "/login", form={"csrf": token, "name": name, "password": pw})
        assert status == 401 and "Wrong name or password" in page
        assert not any("microg4m-team=" in h for h in resp.headers.get_all("Set-Cookie"))  # no session
        # without the login form's token (another site's form): refused
        c.cookie = None
        status, page, _ = c.request("POST", "/login", form={"csrf": token, "name": "alice",
                                                             "password": "secret-of-alice"})
        assert status == 403 and "expired or came from elsewhere" in page
    # the cookie is Secure, HttpOnly, SameSite=Strict, __Host- (no Domain)
    c = Client(port)
    status, page, resp = c.request("GET", "/login")
    assert {"Secure", "HttpOnly", "SameSite=Strict", "Path=/"} <= {x.strip() for x in
                                                                   resp.getheader("Set-Cookie").split(";")}
    assert resp.getheader("X-Frame-Options") == "DENY"  # not in another site's frame
    carol = Client(port).login("carol")
    assert carol.request("GET", "/api/state")[0] == 200
    assert carol.post("/logout", {})[0] == 200
    assert carol.request("GET", "/api/state")[0] == 401  # the session is gone on the server
    # a new password or a disabled account ends the sessions
    bob = Client(port).login("bob")
    conn = project.connect()
    accounts.set_password(conn, "bob", "another-secret")
    assert bob.request("GET", "/api/state")[0] == 401
    bob = Client(port).login("bob", "another-secret")
    accounts.set_active(conn, "bob", False)
    assert bob.request("GET", "/api/state")[0] == 401
    accounts.set_active(conn, "bob", True)
    accounts.set_password(conn, "bob", "secret-of-bob")
    users["bob"].login("bob")
    raw = project.db_path.read_bytes() + Path(f"{project.db_path}-wal").read_bytes()
    assert b"secret-of-" not in raw and b"scrypt:" in raw  # only salted hashes are stored
    rows = {r["name"]: r["password"] for r in conn.execute("SELECT name, password FROM users")}
    assert len(set(rows.values())) == len(rows)
    conn.close()
    with pytest.raises(ValueError, match="password too short"):
        accounts.add_user(project.connect(), "dave", "annotator", "short")


def test_an_annotator_changes_only_their_own_layer(served):
    project, users, mine, _ = served
    alice = users["alice"]
    status, out, _ = alice.post("/api/actions", body(mine, action=14))
    assert status == 200 and out["actions"] == [14] and out["change"] == 1  # alice's first change
    row = [r for r in history_rows(project) if r["layer"] == "alice"][0]
    assert (row["who"], row["layer"], row["clip_id"], row["person_id"], row["before"], row["after"]) == (
        "alice", "alice", mine, 1, None, "[14]")
    assert alice.request("GET", f"/api/clips/{mine}")[1]["actions"]["1"] == [14]
    conn = project.connect()
    other = next(n for n in assign.annotators_of(conn, mine) if n != "alice")
    conn.close()
    assert Client(alice.port).login(other).request("GET", f"/api/clips/{mine}")[1]["actions"]["1"] == []


# ---------------------------------------------------------------- import, hand edits, the report


def test_existing_files_are_imported_and_a_hand_edit_is_kept_aside(tmp_path):
    ann = tmp_path / "annotations"
    ann.mkdir()
    (ann / "actions.csv").write_text(HEADER + "film_000,m,1,79\ndancer_000,r,2,14\ndancer_000,r,1,12\n")
    (ann / "screening_excluded.txt").write_text("# by hand\ndancer_001  # shaky\nold_007\n")
    project = make_project(tmp_path)
    conn = project.connect()
    final = history.current(conn, FINAL)
    assert final[(FINAL, "actions", "film_000", 1)].value == [79]
    assert final[(FINAL, "resolved", "dancer_000", 0)].value == "@import"
    assert (ann / "actions.csv").read_text() == HEADER + "dancer_000,r,1,12\ndancer_000,r,2,14\nfilm_000,m,1,79\n"
    assert (ann / "screening_excluded.txt").read_text() == SCREENING_HEADER + "dancer_001  # shaky\nold_007\n"
    kept = sorted(p.name for p in ann.glob("*.bak"))
    assert len(kept) == 2 and "# by hand" in next(ann.glob("screening_excluded.txt.*.bak")).read_text()
    # an edit by hand is moved aside (not lost) the next time team mode writes the file
    (ann / "actions.csv").write_text(HEADER + "dancer_000,r,1,3\n")
    with transaction(conn):
        history.put(conn, "judy", FINAL, "actions", "film_000", "m", 1, [79, 80])
    project.files.sync(conn)
    assert "film_000,m,1,80" in (ann / "actions.csv").read_text()
    assert any(p.read_text() == HEADER + "dancer_000,r,1,3\n" for p in ann.glob("actions.csv.*.bak"))
    assert project.rebuild(conn, check=True)["differ"] == []
    conn.close()


def test_report_gives_the_figures_of_microg4m_agreement(tmp_path):
    project = make_project(tmp_path)
    conn = project.connect()
    res = project.results
    from microg4m.annotate.team import decisions

    labels = {"alice": {("dancer_000", 1): [14, 12], ("dancer_000", 2): [17], ("dancer_001", 1): [14]},
              "bob": {("dancer_000", 1): [14], ("dancer_000", 2): [17, 79], ("dancer_001", 1): [14],
                      ("film_000", 1): [3]}}  # bob's film_000 only: alice has not done it
    with transaction(conn):
        for who, items in labels.items():
            for (clip, p), acts in items.items():
                for a in acts:
                    decisions.change_action(conn, who, res.clip(clip), res.persons(clip), p, a, True)
    written = project.write_report(conn)
    out = Path(project.settings.report_dir)
    assert (out / "actions.bob.csv").read_text() == HEADER + (
        "dancer_000,r,1,14\ndancer_000,r,2,17\ndancer_000,r,2,79\ndancer_001,r,1,14\nfilm_000,m,1,3\n")
    summary = agreement.run([out / "actions.alice.csv", out / "actions.bob.csv"], tmp_path / "merged.csv",
                            label_map=LABEL_MAP, report_dir=tmp_path / "cli")
    for name in ("actions", "clips"):
        pd.testing.assert_frame_equal(pd.read_csv(out / f"agreement_{name}.tsv", sep="\t"),
                                      pd.read_csv(tmp_path / "cli" / f"agreement_{name}.tsv", sep="\t"))
    team = pd.read_csv(out / "agreement_annotators.tsv", sep="\t").set_index("annotator")
    assert team.loc["bob", ["done", "labels", "differing"]].tolist() == [3, 5, 2]
    assert summary["positive_agreement"] == 0.75  # 2·3 / (2·3 + 2)
    assert len(written) == 7 + 5  # and the text agreement files (test_team_vqa.py)
    conn.close()


# ---------------------------------------------------------------- the command line


def test_command_line_manages_accounts_and_writes_the_report(tmp_path, monkeypatch, capsys):
    import io
    import json

    import yaml

    from microg4m import cli
    from test_annotate_store import build_results

    build_results(tmp_path / "results")
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text(yaml.safe_dump({
        "export": {"label_map": str(LABEL_MAP)}, "team": {"report_dir": "annotations/report"}}))
    monkeypatch.chdir(tmp_path)  # the paths are the config's (and the schema's defaults), relative

    def team(*args, stdin=""):
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        code = cli.main(["team", *args])
        out = capsys.readouterr()
        return code, out.out, out.err

    assert team("rebuild")[2].startswith("microg4m team: error: team database annotations/team.sqlite not found")
    assert team("user", "add", "alice", "--password-stdin", stdin="secret-of-alice\n")[:2] == (
        0, "added annotator alice\n")
    assert team("user", "add", "judy", "--role", "adjudicator", "--password-stdin", stdin="secret-of-judy\n")[0] == 0
    for args, stdin, message in ((("add", "alice"), "secret-of-alice\n", "user alice exists already"),
                                 (("add", "a b"), "secret-of-ab\n", "user name 'a b'"),
                                 (("add", "@final"), "secret-of-x\n", "user name '@final'"),
                                 (("add", "dave"), "short\n", "password too short"),
                                 (("add", "dave"), "", "no line on stdin"),
                                 (("passwd", "nobody"), "secret-of-x\n", "no user 'nobody'"),
                                 (("disable",), "", "give the user name")):
        code, _, err = team("user", *args, "--password-stdin", stdin=stdin)
        assert code == 1 and message in err, (args, err)
    assert team("user", "passwd", "alice", "--password-stdin", stdin="a-new-secret\n")[0] == 0
    assert team("user", "disable", "alice")[0] == 0
    listed = [ln.split("\t")[:3] for ln in team("user", "list")[1].splitlines()]
    assert listed == [["alice", "annotator", "disabled"], ["judy", "adjudicator", "active"]]
    assert team("user", "enable", "alice")[0] == 0
    conn = connect(tmp_path / "annotations" / "team.sqlite")
    assert accounts.verify(conn, "alice", "a-new-secret") and not accounts.verify(conn, "alice", "secret-of-alice")
    conn.close()
    code, out, _ = team("assign")
    assert code == 0 and json.loads(out) == {"assigned": 3, "clips": {c: ["alice"] for c in
                                                                      ("dancer_000", "dancer_001", "film_000")}}
    assert json.loads(team("assign")[1])["assigned"] == 0  # nothing new
    assert json.loads(team("status")[1])["summary"]["clips_pending"] == 3
    written = json.loads(team("report")[1])["written"]
    assert "annotations/report/agreement_actions.tsv" in written
    assert (tmp_path / "annotations" / "report" / "adjudication.tsv").read_text().startswith("clip_id\tstatus\t")
    assert json.loads(team("backup", "copy.sqlite")[1]) == {"backup": "copy.sqlite", "changes": 0}
    copy = sqlite3.connect(tmp_path / "copy.sqlite")
    assert [r[0] for r in copy.execute("SELECT name FROM users ORDER BY name")] == ["alice", "judy"]
    copy.close()
    assert "copy.sqlite exists" in team("backup", "copy.sqlite")[2]
    assert "annotators_per_clip = 0" in team("assign", "--per-clip", "0")[2]
    assert "results folder nowhere not found" in team("status", "--results", "nowhere")[2]
