"""The Python client against a real doctxd (docs/clients.md).

Run by tests/clients/run.sh, which starts doctxd on a fresh store and sets
DOCTXD_URL (that doctxd, no rate limit), DOCTXD (the binary), DOCTXD_STORE
and DOCTXD_TOKENS (to start more of them here), and the tokens T_ADMIN,
T_WRITE, T_READ.  The doctxd processes started here (a rate-limited one, a
draining one, late ones) are bounded: every wait has a deadline and a kill
at the end.
"""

from __future__ import annotations

import http.client
import http.server
import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import threading
import time
import uuid
from typing import Any, Dict, List, Optional

import pytest

from doctx import (
    BadRequest,
    Client,
    Conflict,
    DoctxError,
    Forbidden,
    NotFound,
    RateLimited,
    TooLarge,
    TransportError,
    Unauthorized,
    Unavailable,
)

URL = os.environ["DOCTXD_URL"]
DOCTXD = os.environ["DOCTXD"]
STORE = os.environ["DOCTXD_STORE"]
TOKENS = os.environ["DOCTXD_TOKENS"]
T_ADMIN = os.environ["T_ADMIN"]
T_WRITE = os.environ["T_WRITE"]
T_READ = os.environ["T_READ"]


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
def c() -> Client:
    return Client(URL, T_WRITE, timeout=20)


@pytest.fixture(scope="module")
def admin() -> Client:
    return Client(URL, T_ADMIN, timeout=20)


# ---- helpers: more doctxd processes, a proxy that loses an answer ----------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Daemon:
    """A doctxd on the suite's store, started now or after ``delay`` seconds."""

    def __init__(self, tmp: str, *args: str, port: int = 0, delay: float = 0.0):
        self.log = os.path.join(tmp, f"doctxd-{uuid.uuid4().hex[:6]}.log")
        self.argv = [DOCTXD, "--store", STORE, "--tokens", TOKENS,
                     "--listen", f"127.0.0.1:{port}", *args]
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.started = threading.Event()
        self.url = f"http://127.0.0.1:{port}"
        if delay:
            self.timer: Optional[threading.Timer] = threading.Timer(delay, self._start)
            self.timer.start()
        else:
            self.timer = None
            self._start()

    def _start(self) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=log)
        self.started.set()

    def logged(self, what: str) -> Optional[str]:
        try:
            with open(self.log, encoding="utf-8", errors="replace") as f:
                for line in f:
                    if what in line:
                        return line
        except FileNotFoundError:
            pass
        return None

    def wait_log(self, what: str, secs: float = 10.0) -> str:
        end = time.monotonic() + secs
        while time.monotonic() < end:
            line = self.logged(what)
            if line:
                return line
            if self.proc and self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise AssertionError(f"doctxd never logged {what!r}: {self.tail()}")

    def listening(self) -> str:
        assert self.started.wait(10), "doctxd was never started"
        line = self.wait_log("listening on")
        self.url = "http://" + line.strip().rsplit(" ", 1)[-1]
        return self.url

    def tail(self) -> str:
        try:
            with open(self.log, encoding="utf-8", errors="replace") as f:
                return f.read()[-600:]
        except FileNotFoundError:
            return "(no log)"

    def stop(self) -> None:
        if self.timer:
            self.timer.cancel()
            self.timer.join(5)
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@pytest.fixture
def daemons(tmp_path: Any):
    started: List[Daemon] = []

    def start(*args: str, port: int = 0, delay: float = 0.0) -> Daemon:
        d = Daemon(str(tmp_path), *args, port=port, delay=delay)
        started.append(d)
        return d

    yield start
    for d in started:
        d.stop()


class LossyProxy:
    """Forwards requests to doctxd; the first ``drop`` answers are lost on
    the way back (the connection is closed without them), as on a flaky
    network after the store has done the work."""

    def __init__(self, upstream: str, drop: int) -> None:
        host, port = upstream.split("//", 1)[1].split(":")
        self.forwarded: List[str] = []
        self.drop = drop
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def forward(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                conn = http.client.HTTPConnection(host, int(port), timeout=10)
                hdrs = {k: v for k, v in self.headers.items()
                        if k.lower() in ("authorization", "content-type")}
                conn.request(self.command, self.path, body=body, headers=hdrs)
                resp = conn.getresponse()
                data = resp.read()
                conn.close()
                proxy.forwarded.append(f"{self.command} {self.path}")
                self.close_connection = True
                if proxy.drop > 0:
                    proxy.drop -= 1
                    return  # the answer is lost: the connection just closes
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("connection", "transfer-encoding"):
                        self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            do_GET = forward
            do_POST = forward

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


# ---- every route ------------------------------------------------------------------

ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_every_route_has_a_method() -> None:
    """tests/clients/routes.json names the method of every route of
    src/server/routes.c: a route added there without a method fails here.
    The admin page's own files (/admin...) are for a browser, not a client."""
    table = json.loads((ROOT / "tests/clients/routes.json").read_text())
    routes = re.findall(r'\{"(GET|POST|PUT|PATCH|DELETE)", "([^"]+)"',
                        (ROOT / "src/server/routes.c").read_text())
    api = sorted(f"{m} {p}" for m, p in routes if not p.startswith("/admin"))
    assert api == sorted(table)
    public = {n for n in dir(Client) if not n.startswith("_")}
    assert public == set(table.values())


# ---- operations ---------------------------------------------------------------


def test_health_ready_metrics() -> None:
    assert Client(URL).health() == {"status": "ok"}
    assert Client(URL).ready() is True
    text = Client(URL, T_ADMIN).metrics()
    assert "doctxd_http_requests_total{" in text
    spec = Client(URL).openapi()
    assert spec["openapi"].startswith("3.1") and "/v1/transfers" in spec["paths"]
    stats = Client(URL, T_ADMIN).admin_stats()
    assert stats["window_s"] == 60 and "counts" in stats
    with pytest.raises(Forbidden):
        Client(URL, T_WRITE).admin_stats()


# ---- documents ----------------------------------------------------------------


def test_documents(c: Client) -> None:
    coll = uid("items")
    assert c.insert(coll, [{"_id": 1, "item": "pen", "qty": 2},
                           {"_id": 2, "item": "ink", "qty": 5}]) == {"inserted": 2, "ids": [1, 2]}
    page = c.find(coll, {"qty": {"$gte": 1}}, sort={"qty": -1}, limit=1)
    assert page["docs"] == [{"_id": 2, "item": "ink", "qty": 5}] and page["next"]
    assert c.find(coll, {"item": "pen"}, projection={"qty": 1})["docs"] == [{"_id": 1, "qty": 2}]
    assert c.count(coll, {"item": "pen"}) == 1
    assert c.count(coll) == 2
    assert c.update(coll, {"item": "pen"}, {"$inc": {"qty": 1}}) == {"matched": 1, "modified": 1}
    assert c.update(coll, {}, {"$set": {"seen": True}}, many=True)["modified"] == 2
    assert c.find_and_modify(coll, {"_id": 2, "qty": {"$gte": 5}},
                             {"$inc": {"qty": -5}}, new=True)["qty"] == 0
    with pytest.raises(Conflict) as e:
        c.find_and_modify(coll, {"_id": 2, "qty": {"$gte": 5}}, {"$inc": {"qty": -5}})
    assert e.value.code == "NOMATCH" and e.value.status == 409
    with pytest.raises(Conflict) as e:
        c.insert(coll, [{"_id": 1}])
    assert e.value.code == "DUPKEY"
    assert c.delete(coll, {"_id": 2}) == 1
    res = c.bulk(coll, [{"insertOne": {"document": {"_id": 3, "qty": 1}}},
                        {"deleteOne": {"filter": {"_id": 1}}}])
    assert [r["ok"] for r in res] == [True, True]
    assert c.aggregate(coll, [{"$group": {"_id": None, "qty": {"$sum": "$qty"}}}]) == \
        [{"_id": None, "qty": 1}]
    assert c.create_index(coll, {"item": 1}) == "item_1"
    assert [i["name"] for i in c.indexes(coll)] == ["_id_", "item_1"]
    assert c.delete(coll, {}, many=True) == 1


def test_find_pages(c: Client) -> None:
    coll = uid("paged")
    c.insert(coll, [{"_id": i, "n": i} for i in range(7)])
    seen, after, pages = [], None, 0
    while True:
        page = c.find(coll, {}, sort={"n": 1}, limit=3, after=after)
        pages += 1
        seen += [d["n"] for d in page["docs"]]
        after = page["next"]
        if not after:
            break
    assert seen == list(range(7)) and pages == 3


# ---- accounts and transfers ------------------------------------------------------


def test_accounts_and_transfers(c: Client) -> None:
    a, b = uid("alice"), uid("bob")
    assert c.create_account(a, balance=1000)["balance"] == 1000
    assert c.create_account(b)["balance"] == 0
    with pytest.raises(Conflict) as e:
        c.create_account(a)
    assert e.value.code == "DUPKEY"
    tid = uid("order")
    tx = c.transfer(a, b, 250, id=tid)
    assert (tx["_id"], tx["state"]) == (tid, "succeeded")
    assert c.get_transfer(tid)["amount"] == 250
    auto = c.transfer(a, b, 5)  # no id: the client made one
    assert auto["_id"].startswith("py-") and auto["state"] == "succeeded"
    poor = c.transfer(b, a, 10**9)
    assert poor["state"] == "failed" and poor["reason"]
    with pytest.raises(Conflict) as e:
        c.transfer(a, b, 999, id=tid)  # the same id, other parameters
    assert e.value.code == "CONFLICT"
    later = c.transfer(b, a, 5, async_=True)
    assert later["state"] == "initiated"
    canceled = c.cancel_transfer(later["_id"])
    assert (canceled["state"], canceled["reason"]) == ("failed", "canceled")
    res = c.transfer_batch([{"from": a, "to": b, "amount": 1},
                            {"from": a, "to": b, "amount": 2, "id": tid}])
    assert res[0]["status"] == 200 and res[0]["transfer"]["_id"].startswith("py-")
    assert res[1]["status"] == 409 and res[1]["code"] == "CONFLICT"
    assert c.account(a)["balance"] == 1000 - 250 - 5 - 1
    assert c.account(b)["balance"] == 256
    with pytest.raises(NotFound) as e:
        c.account(uid("nobody"))
    assert e.value.code == "NOACCOUNT"
    with pytest.raises(NotFound):
        c.get_transfer(uid("never"))


def test_list_iterators_page(c: Client) -> None:
    mine = [uid("acct") for _ in range(5)]
    for m in mine:
        c.create_account(m, balance=10)
    got = [x["_id"] for x in c.accounts(page_size=2)]
    assert set(mine) <= set(got) and len(got) == len(set(got))
    # start_after: from an id's place, on across pages
    mine.sort()
    rest = [x["_id"] for x in c.accounts(page_size=2, start_after=mine[0])]
    assert mine[0] not in rest and set(mine[1:]) <= set(rest)
    assert rest == sorted(rest)
    ids = [c.transfer(mine[0], mine[1], 1)["_id"] for _ in range(3)]
    listed = [t["_id"] for t in c.transfers(state="succeeded", page_size=2)]
    assert set(ids) <= set(listed) and len(listed) == len(set(listed)) >= 3


def test_list_iterators_keyset(c: Client) -> None:
    # A list's cursor is keyset (the last id shown): accounts created
    # meanwhile, before the iterator's place, shift nothing -- an offset
    # cursor listed an account again for each one.
    mine = [uid("ks") for _ in range(6)]
    for m in mine:
        c.create_account(m, balance=1)
    got = []
    for x in c.accounts(page_size=2):
        got.append(x["_id"])
        if len(got) % 2 == 0 and len(got) < 40:
            c.create_account("0" + uid("ks"), balance=1)
    assert set(mine) <= set(got) and len(got) == len(set(got))


# ---- locks, ledger, sync, orders, versions ---------------------------------------


def test_jobs(c: Client) -> None:
    q, j1, j2, j3 = uid("mail"), uid("j"), uid("j"), uid("j")
    first = c.add_job(q, "send", {"to": "a"}, id=j1, priority=5)
    assert (first["_id"], first["state"], first["priority"]) == (j1, "ready", 5)
    assert c.add_job(q, "send", {"to": "a"}, id=j1, priority=5)["_id"] == j1
    with pytest.raises(Conflict) as e:
        c.add_job(q, "send", {"to": "b"}, id=j1)
    assert e.value.code == "CONFLICT"
    c.add_job(q, "send", unique_key=uid("k"), id=j2)
    assert c.job(j1)["payload"] == {"to": "a"}
    stats = c.queue_stats(q)
    assert (stats["ready"], stats["total"]) == (2, 2)
    claimed = c.claim(q, n=1, lease_ms=20000, owner="py-1")
    assert [j["_id"] for j in claimed] == [j1] and claimed[0]["state"] == "running"
    ep = claimed[0]["epoch"]
    assert c.heartbeat(j1, ep, lease_ms=30000)["state"] == "running"
    with pytest.raises(Conflict) as e:
        c.heartbeat(j1, ep + 6)
    assert e.value.code == "STALE"
    prog = c.progress(j1, ep, {"pct": 40})
    assert prog["state"] == "running" and prog["progress"] == {"pct": 40} and prog["epoch"] == ep
    assert c.job(j1)["progress"] == {"pct": 40}
    with pytest.raises(Conflict) as e:
        c.progress(j1, ep + 6, 1)
    assert e.value.code == "STALE" and c.job(j1)["progress"] == {"pct": 40}
    done = c.complete(j1, ep, result={"sent": True})
    assert done["state"] == "succeeded" and c.complete(j1, ep, result={"sent": True}) == done
    ep2 = c.claim(q, n=5)[0]["epoch"]
    assert c.claim(q) == []
    failed = c.fail(j2, ep2, error="smtp down")
    assert failed["state"] == "delayed" and c.fail(j2, ep2, error="smtp down") == failed
    assert [j["_id"] for j in c.jobs(q, page_size=1)] == [j1, j2]
    assert [j["_id"] for j in c.jobs(q, state="succeeded")] == [j1]
    # every transition, once, in each job's order (jobs interleave in the
    # order they were relayed); a page from a cursor goes on
    evs = c.job_events(q)
    def of(j):
        return [e["event"] for e in evs["events"] if e["job"] == j]
    assert of(j1) == ["added", "claimed", "progress", "succeeded"]
    assert of(j2) == ["added", "claimed", "failed"]
    assert [e["cursor"] for e in evs["events"]] == list(range(1, 8))
    assert evs["cursor"] == 7
    page = c.job_events(q, after=4, limit=1)
    assert [e["cursor"] for e in page["events"]] == [5] and page["cursor"] == 5
    assert c.job_events(q, after=7, wait_ms=10) == {"events": [], "cursor": 7}
    # dead, retried by hand, canceled
    once = uid("once")
    c.add_job(once, "t", id=j3, max_attempts=1)
    ep3 = c.claim(once)[0]["epoch"]
    assert c.fail(j3, ep3, error="boom")["state"] == "dead"
    assert c.retry_job(j3)["state"] == "ready"
    with pytest.raises(Conflict) as e:
        c.retry_job(j3)
    assert e.value.code == "STATE"
    assert c.cancel_job(j3)["state"] == "canceled"
    assert c.cancel_job(j3)["state"] == "canceled"
    # a running job: the cancel is recorded, its worker ends it canceled
    cq, j4 = uid("cq"), uid("j")
    c.add_job(cq, "t", id=j4)
    ep4 = c.claim(cq, lease_ms=20000)[0]["epoch"]
    req = c.cancel_job(j4)
    assert req["state"] == "running" and "cancel_requested" in req
    with pytest.raises(Conflict) as e:
        c.heartbeat(j4, ep4)
    assert e.value.code == "STATE"
    assert c.complete(j4, ep4, result=1)["state"] == "canceled"
    with pytest.raises(NotFound):
        c.job(uid("nojob"))


def test_job_effect_once(c: Client) -> None:
    wallets, q, jid = uid("wallets"), uid("fx"), uid("f")
    c.insert(wallets, [{"_id": "w1", "n": 0}])
    c.add_job(q, "t", id=jid)
    ep = c.claim(q)[0]["epoch"]
    fx = (jid, ep, "credit", wallets, {"_id": "w1"}, {"$inc": {"n": 1}})
    assert c.effect(*fx) == {"applied": True}
    assert c.effect(*fx) == {"applied": False}
    assert c.find(wallets, {"_id": "w1"})["docs"][0]["n"] == 1
    assert c.complete(jid, ep)["state"] == "succeeded"


def test_locks_and_fences(c: Client, admin: Client) -> None:
    name, coll = uid("L"), uid("res")
    held = c.acquire(name, ttl_ms=60000, owner="w1")
    assert held["owner"] == "w1" and held["token"] >= 1
    with pytest.raises(Conflict) as e:
        c.acquire(name, owner="w2")
    assert e.value.code == "NOMATCH" and "held by w1" in e.value.detail
    assert c.lock(name)["held"] is True
    assert c.renew(name, held["token"], ttl_ms=90000)["token"] == held["token"]
    c.insert(coll, [{"_id": 1, "v": 0}])
    c.update(coll, {"_id": 1}, {"$set": {"v": 1}}, fence=f"{name}:{held['token']}")
    assert c.release(name, held["token"])["held"] is False
    with pytest.raises(Conflict):
        c.renew(name, held["token"])
    second = c.acquire(name, owner="w2", ttl_ms=60000)
    c.update(coll, {"_id": 1}, {"$set": {"v": 2}}, fence=f"{name}:{second['token']}")
    with pytest.raises(Conflict) as e:
        c.update(coll, {"_id": 1}, {"$set": {"v": 9}}, fence=f"{name}:{held['token']}")
    assert e.value.code == "FENCED"
    other = uid("L")
    c.acquire(other)
    listed = [x["name"] for x in c.locks(page_size=1)]
    assert {name, other} <= set(listed)
    assert admin.force_release(name)["held"] is False
    with pytest.raises(NotFound):
        c.lock(uid("nolock"))


def test_semaphores_and_election(c: Client) -> None:
    pool, primary = uid("pool"), uid("primary")
    a = c.acquire(pool, max=2, owner="a", ttl_ms=60000)
    b = c.acquire(pool, max=2, owner="b", ttl_ms=60000)
    assert {a["slot"], b["slot"]} == {0, 1} and b["token"] > a["token"]
    with pytest.raises(Conflict):
        c.acquire(pool, max=2, owner="c")  # both slots held
    with pytest.raises(BadRequest):
        c.acquire(pool, max=3)  # one max per name
    led = c.campaign(primary, owner="n1", ttl_ms=60000, wait_ms=1000)
    assert led["token"] >= 1
    now = c.leader(primary)
    assert now["leader"] == "n1" and now["term"] == led["token"]


def test_ledger(c: Client) -> None:
    ext, cash, fees = uid("ext"), uid("cash"), uid("fees")
    assert c.ledger_account(ext, min_balance="none")["min_balance"] is None
    c.ledger_account(cash)
    c.ledger_account(fees)
    e1 = uid("e")
    legs = [{"account": ext, "value": -1000}, {"account": cash, "value": 1000}]
    assert c.post(legs, id=e1)["state"] == "posted"
    assert c.post(legs, id=e1)["_id"] == e1  # the same id again: the same entry
    assert c.balance(cash)["balance"] == 1000
    with pytest.raises(Conflict) as e:
        c.post([{"account": cash, "value": -5000}, {"account": fees, "value": 5000}])
    assert e.value.code == "INSUFFICIENT"
    p1, p2 = uid("p"), uid("p")
    c.post([{"account": cash, "value": -100}, {"account": fees, "value": 100}], id=p1, pending=True)
    assert c.balance(cash)["available"] == 900
    assert c.post_pending(p1)["state"] == "posted"
    c.post([{"account": cash, "value": -50}, {"account": fees, "value": 50}], id=p2,
           pending=True, timeout_ms=600000)
    assert c.void(p2)["state"] == "voided"
    with pytest.raises(Conflict) as e:
        c.post_pending(p2)
    assert e.value.code == "STATE"
    assert c.reverse(p1, id=uid("r"))["reverses"] == p1
    assert c.entry(e1)["_id"] == e1
    assert c.balance(cash, at_seq=1)["balance"] == 1000
    legs_seen = list(c.statement(cash, page_size=2))
    assert len(legs_seen) == 3 and legs_seen[0]["entry"] == e1
    assert [x["entry"] for x in c.statement(cash, from_seq=2)] == [x["entry"] for x in legs_seen[1:]]
    assert len(list(c.entries(account=fees, page_size=1))) >= 2
    res = c.post_batch([{"id": uid("b"), "legs": [{"account": ext, "value": -7}, {"account": cash, "value": 7}]},
                        {"legs": [{"account": fees, "value": -99999}, {"account": cash, "value": 99999}]}])
    assert [r["status"] for r in res] == [200, 409]
    assert c.ledger_limit(fees, "none")["min_balance"] is None
    with pytest.raises(Conflict) as e:
        c.close_account(cash)  # it holds money
    assert e.value.code == "STATE"
    shut = uid("shut")
    c.ledger_account(shut)
    assert c.close_account(shut, deadline_ms=5000)["state"] == "closed"
    assert "closed_at" in c.balance(shut)


def test_ledger_assets_limits_meta_refs_partial_posts(c: Client) -> None:
    """The fields docs/ledger.md added after the first routes: an asset and
    a max balance, meta and ref (found again), balancing legs, a partial
    post of a hold."""
    src, dst, eur = uid("src"), uid("dst"), uid("eur")
    acct = c.ledger_account(src, min_balance="none", asset="USD/2")
    assert acct["asset"] == "USD/2" and acct["min_balance"] is None
    acct = c.ledger_account(dst, asset="USD/2", max_balance=500)
    assert acct["asset"] == "USD/2" and acct["max_balance"] == 500
    c.ledger_account(eur, asset="EUR/2")
    with pytest.raises(Conflict) as e:  # over the max: nothing recorded
        c.post([{"account": src, "value": -600}, {"account": dst, "value": 600}])
    assert e.value.code == "INSUFFICIENT" and dst in e.value.detail
    with pytest.raises(BadRequest):  # two assets in one entry
        c.post([{"account": src, "value": -1}, {"account": eur, "value": 1}])
    assert c.balance(dst)["balance"] == 0
    # limit: one field given, the other kept
    acct = c.ledger_limit(dst, max_balance=1000)
    assert acct["max_balance"] == 1000 and acct["min_balance"] == 0
    assert c.ledger_limit(dst, -5)["max_balance"] == 1000
    assert c.ledger_limit(dst, 0)["min_balance"] == 0
    with pytest.raises(BadRequest):
        c.ledger_limit(dst)
    # meta and ref, found again by either (and by both)
    ref, order, eid = uid("inv"), uid("o"), uid("e")
    meta = {"order": order, "lines": [1, 2]}
    ent = c.post([{"account": src, "value": -100}, {"account": dst, "value": 100}],
                 id=eid, meta=meta, ref=ref)
    assert ent["meta"] == meta and ent["ref"] == ref
    assert [x["_id"] for x in c.entries(ref=ref)] == [eid]
    assert [x["_id"] for x in c.entries(meta_filter={"order": order})] == [eid]
    assert [x["_id"] for x in c.entries(ref=ref, meta_filter={"order": "other"})] == []
    ref2 = uid("inv")
    res = c.post_batch([{"legs": [{"account": src, "value": -1}, {"account": dst, "value": 1}],
                         "meta": {"order": order}, "ref": ref2}])
    assert res[0]["status"] == 200 and res[0]["entry"]["ref"] == ref2
    assert len(list(c.entries(meta_filter={"order": order}, page_size=1))) == 2
    # a balancing pair moves what the limits allow, at most the cap
    bal = c.post([{"account": src, "value": "-max=50"}, {"account": dst, "value": "max"}])
    assert [x["value"] for x in bal["changes"]] == [-50, 50]
    # a hold posted in part: the rest released, retried with its post id
    hold, pid = uid("h"), uid("pp")
    c.post([{"account": src, "value": -300}, {"account": dst, "value": 300}], id=hold, pending=True)
    part = [{"account": src, "value": -120}, {"account": dst, "value": 120}]
    got = c.post_pending(hold, amounts=part, post_id=pid)
    assert got["state"] == "posted" and got["amounts"] == [-120, 120] and got["post_id"] == pid
    assert c.post_pending(hold, amounts=part, post_id=pid)["_id"] == hold
    with pytest.raises(Conflict) as e:
        c.post_pending(hold, amounts=[{"account": src, "value": -100},
                                      {"account": dst, "value": 100}], post_id=pid)
    assert e.value.code == "CONFLICT"
    b = c.balance(dst)
    assert b["balance"] == 100 + 1 + 50 + 120 and b["asset"] == "USD/2"


def test_retried_ledger_post_is_counted_once(c: Client) -> None:
    src, dst = uid("src"), uid("dst")
    c.ledger_account(src, min_balance="none")
    c.ledger_account(dst)
    proxy = LossyProxy(URL, drop=1)
    try:
        flaky = Client(proxy.url, T_WRITE, timeout=10, backoff=0.01)
        flaky.post([{"account": src, "value": -40}, {"account": dst, "value": 40}], id=uid("pay"))
        assert len(proxy.forwarded) == 2, proxy.forwarded
    finally:
        proxy.close()
    assert c.balance(dst)["balance"] == 40


def test_sync(c: Client, admin: Client) -> None:
    users, comments, rule = uid("users"), uid("comments"), uid("names")
    c.insert(users, [{"_id": "u1", "name": "Ann"}])
    c.insert(comments, [{"_id": "c1", "uid": "u1"}, {"_id": "c2", "uid": "u1"}])
    first = c.sync_rule(rule, users, comments, "uid", "name:uname")
    assert c.sync_rule(rule, users, comments, "uid", "name:uname") == first
    assert c.sync(rule)["_id"] == rule
    out = c.sync_update(rule, "u1", {"$set": {"name": "Bo"}})
    assert out["dependents"] == 2 and out["flag_cleared"] is True
    assert c.count(comments, {"uname": "Bo"}) == 2
    with pytest.raises(NotFound):
        c.sync(uid("nosync"))
    assert admin.sync_repair()["ok"] is True


def test_orders(c: Client) -> None:
    shop = uid("shop")
    c.create_account(shop)
    o1, o2, o3 = uid("o"), uid("o"), uid("o")
    first = c.create_order(o1, shop, 50)
    assert first["state"] == "pending" and c.create_order(o1, shop, 50) == first
    with pytest.raises(Conflict):
        c.create_order(o1, shop, 51)
    c.create_order(o2, shop, 7)
    c.create_order(o3, shop, 9)
    assert c.confirm_order(o1, owner="cb")["state"] == "success"
    res = c.confirm_orders([o1, o2, uid("nope")])
    assert [r["status"] for r in res] == [200, 200, 404]
    assert c.account(shop)["balance"] == 57  # o1 credited once
    assert c.cancel_order(o3)["state"] == "canceled"
    with pytest.raises(Conflict) as e:
        c.cancel_order(o1)
    assert e.value.code == "STATE"
    assert c.order(o1)["amount"] == 50
    assert {o1, o2} <= {x["_id"] for x in c.orders(state="success", page_size=1)}


def test_versions(c: Client, admin: Client) -> None:
    item = uid("doc")
    assert c.put_version(item, {"t": 1}, child={"a": {"x": 1}, "b": {"y": 2}}) == {"item": item, "version": 1}
    assert c.put_version(item, {"t": 2}, remove_child=["b"], expect_version=1)["version"] == 2
    with pytest.raises(Conflict) as e:
        c.put_version(item, {"t": 3}, expect_version=1)
    assert e.value.code == "CONFLICT"
    now = c.version(item)
    assert now["version"] == 2 and now["children"] == {"a": {"x": 1}}
    assert c.version(item, version=1)["children"]["b"] == {"y": 2}
    assert [v["version"] for v in c.version_history(item)] == [1, 2]
    assert admin.version_gc(keep=1, grace_ms=0)["ok"] is True


def test_txn(c: Client) -> None:
    coll = uid("stock")
    c.insert(coll, [{"_id": "w1", "n": 5}, {"_id": "w2", "n": 0}])
    move = [
        {"find_one": coll, "filter": {"_id": "w1"}, "as": "w1"},
        {"require": "w1", "filter": {"n": {"$gte": 3}}},
        {"update": coll, "filter": {"_id": "w1"}, "with": {"$inc": {"n": -3}}},
        {"update": coll, "filter": {"_id": "w2"}, "with": {"$inc": {"n": 3}}},
    ]
    tid = uid("t")
    assert c.txn(move, id=tid, lease_ms=5000, deadline_ms=5000) == {
        "outcome": "committed", "reads": {"w1": {"_id": "w1", "n": 5}}}
    assert c.txn(move, isolation="serializable") == {
        "outcome": "aborted", "reads": {"w1": {"_id": "w1", "n": 2}}}
    assert c.txn_show(tid) == {"id": tid, "outcome": "committed"}
    fenced = uid("t")
    assert c.txn_show(fenced) == {"id": fenced, "outcome": "aborted"}
    with pytest.raises(Conflict) as e:
        c.txn(move[2:], id=fenced)  # the fence: the id is spent
    assert e.value.code == "CONFLICT"
    with pytest.raises(BadRequest) as e:
        c.txn([{"upsert": coll, "filter": {}}])
    assert "step 1" in e.value.detail
    with pytest.raises(BadRequest):
        c.txn(move, deadline_ms=2**63 - 1)
    with pytest.raises(BadRequest):
        c.txn(move, isolation="linearizable")
    with pytest.raises(Forbidden):
        Client(URL, T_READ).txn(move)
    assert [d["n"] for d in c.find(coll, {}, sort={"_id": 1})["docs"]] == [2, 3]


def test_txn_answer_lost_is_not_retried(c: Client) -> None:
    """A transaction is never retried by the client (a repeat under its id
    would answer CONFLICT); its outcome is asked with txn_show."""
    coll = uid("stock")
    c.insert(coll, [{"_id": "a", "n": 1}, {"_id": "b", "n": 0}])
    tid = uid("t")
    proxy = LossyProxy(URL, drop=1)
    try:
        flaky = Client(proxy.url, T_WRITE, timeout=10, backoff=0.01)
        with pytest.raises(TransportError):
            flaky.txn([
                {"update": coll, "filter": {"_id": "a"}, "with": {"$inc": {"n": -1}}},
                {"update": coll, "filter": {"_id": "b"}, "with": {"$inc": {"n": 1}}},
            ], id=tid)
        assert len(proxy.forwarded) == 1, proxy.forwarded
    finally:
        proxy.close()
    assert c.txn_show(tid) == {"id": tid, "outcome": "committed"}
    assert [d["n"] for d in c.find(coll, {}, sort={"_id": 1})["docs"]] == [0, 1]


# ---- retries -------------------------------------------------------------------


def test_retried_transfer_is_counted_once(c: Client) -> None:
    a, b = uid("payer"), uid("payee")
    c.create_account(a, balance=100)
    c.create_account(b)
    proxy = LossyProxy(URL, drop=1)
    try:
        flaky = Client(proxy.url, T_WRITE, timeout=10, backoff=0.01)
        tx = flaky.transfer(a, b, 30)  # answer lost once, retried, same id
        assert len(proxy.forwarded) == 2, proxy.forwarded
        assert tx["state"] == "succeeded"
    finally:
        proxy.close()
    assert c.account(a)["balance"] == 70 and c.account(b)["balance"] == 30
    assert c.get_transfer(tx["_id"])["amount"] == 30


def test_write_without_client_id_is_not_retried(c: Client) -> None:
    coll = uid("once")
    proxy = LossyProxy(URL, drop=1)
    try:
        flaky = Client(proxy.url, T_WRITE, timeout=10, backoff=0.01)
        with pytest.raises(TransportError):
            flaky.insert(coll, [{"n": 1}])  # no _id: a retry would insert twice
        assert len(proxy.forwarded) == 1, proxy.forwarded
    finally:
        proxy.close()
    assert c.count(coll) == 1  # it did happen, once; the client could not know


def test_retry_until_doctxd_listens(daemons: Any) -> None:
    port = free_port()
    late = daemons("--rate", "0", port=port, delay=0.5)
    t0 = time.monotonic()
    # Retries enough for a doctxd that starts slowly on a loaded machine.
    assert Client(late.url, timeout=30, retries=20, backoff=0.05).health() == {"status": "ok"}
    assert time.monotonic() - t0 >= 0.4  # it was not up at the first try
    late.stop()


def test_non_idempotent_call_is_not_retried_when_refused(daemons: Any) -> None:
    port = free_port()
    coll = uid("refused")
    late = daemons("--rate", "0", port=port, delay=0.5)
    t0 = time.monotonic()
    # A retry would wait at least 2 s (half the first backoff) and then
    # find doctxd up: the call fails well before, and nothing was written.
    # (A bound of 0.4 s failed on a loaded machine.)
    with pytest.raises(TransportError) as e:
        Client(late.url, T_WRITE, timeout=30, backoff=4, max_backoff=8).update(
            coll, {"_id": 1}, {"$inc": {"n": 1}}, upsert=True)
    assert e.value.status == 0 and e.value.code == "CONNECTION"
    assert time.monotonic() - t0 < 1.5  # it failed at once, no retry
    late.listening()
    assert Client(late.url, T_WRITE, timeout=10).count(coll) == 0


# ---- errors, each from a real answer ------------------------------------------------


def test_bad_request(c: Client) -> None:
    with pytest.raises(BadRequest) as e:
        c.update(uid("x"), {}, {"$frobnicate": {"a": 1}})
    assert e.value.status == 400 and e.value.detail and e.value.title
    with pytest.raises(BadRequest) as e:
        c.transfer("a", "a", 1)
    assert "same account" in e.value.detail
    with pytest.raises(DoctxError) as e:
        c.find(uid("x"), {}, after="bm90LWEtY3Vyc29y")
    assert e.value.status == 400


def test_unauthorized_and_forbidden() -> None:
    with pytest.raises(Unauthorized) as e:
        Client(URL, "not-a-known-token-at-all").account("x")
    assert e.value.code == "UNAUTHORIZED"
    with pytest.raises(Unauthorized):
        Client(URL).count("x")
    with pytest.raises(Forbidden) as e:
        Client(URL, T_READ).insert("x", [{"a": 1}])
    assert e.value.code == "FORBIDDEN" and e.value.status == 403
    with pytest.raises(Forbidden):
        Client(URL, T_WRITE).audit()


def test_too_large(c: Client) -> None:
    with pytest.raises(TooLarge) as e:
        c.insert(uid("big"), [{"blob": "x" * (1 << 20)}])
    assert e.value.code == "TOOLARGE" and e.value.status == 413


def test_rate_limited_then_retried_after(daemons: Any) -> None:
    slow = daemons("--rate", "1", "--burst", "1")
    url = slow.listening()
    once = Client(url, T_READ, retries=0)
    with pytest.raises(NotFound):
        once.account("nobody")  # takes the one token in the bucket
    # The next call finds the bucket empty -- unless a loaded machine took
    # a second between the two, and the bucket refilled: up to 5 calls.
    for _ in range(5):
        try:
            once.account("nobody")
        except RateLimited as limited:
            e = limited
            break
        except NotFound:
            continue
    else:
        pytest.fail("5 calls in a row at --rate 1 --burst 1, none rate limited")
    assert e.code == "RATELIMIT" and e.retry_after is not None
    assert e.retry_after >= 1
    t0 = time.monotonic()
    with pytest.raises(NotFound):  # retried after Retry-After, then answered
        Client(url, T_READ, retries=3, timeout=5).account("nobody")
    assert time.monotonic() - t0 >= 0.5


def test_unavailable_while_draining(daemons: Any) -> None:
    d = daemons("--drain-ms", "8000")
    url = d.listening()
    host, port = url.split("//")[1].split(":")
    # A request still sending its body keeps the drain waiting.
    slow = socket.create_connection((host, int(port)), timeout=5)
    try:
        slow.sendall(b"POST /v1/c/x/count HTTP/1.1\r\nHost: x\r\n"
                     b"Authorization: Bearer " + T_READ.encode() +
                     b"\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 20\r\n\r\n{")
        time.sleep(0.2)
        assert d.proc is not None
        d.proc.send_signal(signal.SIGTERM)
        d.wait_log("draining")
        with pytest.raises(Unavailable) as e:
            Client(url, T_READ, retries=0).account("x")
        assert e.value.code == "DRAINING" and e.value.status == 503
        assert e.value.retry_after == 1
        assert Client(url).ready() is False
    finally:
        slow.close()
    assert d.proc.wait(10) == 0


# ---- admin (last: the audit sees everything above) ------------------------------------


def test_audit_and_recover(admin: Client) -> None:
    report = admin.audit()
    assert report["clean"] is True, report.get("findings")
    assert report["patterns"]["transfer"]["in_flight"] == 0
    summary = admin.recover()
    assert "transfer" in summary["patterns"]
