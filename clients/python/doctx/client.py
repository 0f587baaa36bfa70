"""A client for doctxd, doctx's HTTP/JSON service (docs/server.md).

Standard library only (http.client, json); one connection per call.  One method per route; a
body carries the CLI's option names with ``-`` written ``_``, and only the
fields a caller gives.  Errors are raised as :mod:`doctx.errors`.

Retries (docs/clients.md, "Retries"): a call is retried only when it is
idempotent -- a GET, a read sent as POST (find, count, aggregate), or a
write that carries a client id (a transfer or a batch of them: the client
gives one to every transfer that lacks it, so every transfer is retried
safely: the server answers a repeated id with the same transfer, counted
once) -- and only on a connection error, 429 or 503.  The waits grow
exponentially from ``backoff`` up to ``max_backoff`` with jitter, are at
least the server's ``Retry-After``, and never pass the call's deadline
(``timeout`` seconds for the whole call, attempts and waits included).
"""

from __future__ import annotations

import email.utils
import http.client
import json
import random
import socket
import time
import urllib.parse
import uuid
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Union

from .errors import (
    DoctxError,
    RateLimited,
    TransportError,
    Unavailable,
    error_from,
)

__all__ = ["Client", "new_id"]

JSON = Dict[str, Any]

_USER_AGENT = "doctx-python/0.1"


def new_id(prefix: str = "py") -> str:
    """A fresh client id for a transfer: ``PREFIX-`` and 32 random hex digits.

    Ids are words of at most 128 characters from letters, digits and ``_.:-``.
    """
    return f"{prefix}-{uuid.uuid4().hex}"


def _drop_none(fields: Mapping[str, Any]) -> JSON:
    return {k: v for k, v in fields.items() if v is not None}


def _retry_after(value: Optional[str]) -> Optional[float]:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class Client:
    """A doctxd client.

    Args:
        base_url: doctxd's address, e.g. ``http://127.0.0.1:8420``.
        token: a bearer token from doctxd's ``--tokens`` file (None: send none,
            enough for :meth:`health` and :meth:`ready`).
        timeout: seconds a call may take in all, every attempt and wait
            between them included.
        retries: how many times an idempotent call is tried again at most.
        backoff: the first wait between attempts, in seconds; it doubles
            each time, up to ``max_backoff``, with random jitter.
        max_backoff: the longest wait the backoff reaches (a ``Retry-After``
            may ask for longer, within the deadline).
    """

    def __init__(
        self,
        base_url: str,
        token: Optional[str] = None,
        *,
        timeout: float = 30.0,
        retries: int = 6,
        backoff: float = 0.1,
        max_backoff: float = 2.0,
    ) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be > 0")
        if retries < 0:
            raise ValueError("retries must be >= 0")
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = float(timeout)
        self.retries = int(retries)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)

    # ---- transport --------------------------------------------------------

    def _once(
        self, method: str, url: str, data: Optional[bytes], budget: float
    ) -> Any:
        headers = {"Accept": "application/json", "User-Agent": _USER_AGENT}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if data is not None:
            headers["Content-Type"] = "application/json"
        parts = urllib.parse.urlsplit(url)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        conn_cls = (http.client.HTTPSConnection if parts.scheme == "https"
                    else http.client.HTTPConnection)
        conn = conn_cls(parts.hostname or "127.0.0.1", parts.port, timeout=budget)
        try:
            try:
                conn.request(method, target, body=data, headers=headers)
            except (BrokenPipeError, ConnectionResetError) as e:
                # doctxd answers a body it refuses by its Content-Length
                # (413) before reading it, then closes: the answer may be
                # there to read although the body could not all be sent.
                sent_error: Optional[OSError] = e
            else:
                sent_error = None
            try:
                resp = conn.getresponse()
                raw = resp.read()
            except (OSError, http.client.HTTPException) as e:
                raise sent_error or e
        except (OSError, http.client.HTTPException) as e:
            code = "TIMEOUT" if isinstance(e, socket.timeout) else "CONNECTION"
            raise TransportError(
                0, code, "no answer from doctxd", f"{method} {url}: {e!r}"
            ) from e
        finally:
            conn.close()
        ctype = resp.getheader("Content-Type", "") or ""
        if resp.status >= 400:
            try:
                problem = json.loads(raw.decode("utf-8")) if raw else {}
            except ValueError:
                problem = {"detail": raw.decode("utf-8", "replace")[:400]}
            raise error_from(
                resp.status, problem, _retry_after(resp.getheader("Retry-After"))
            )
        if "json" not in ctype:
            return raw.decode("utf-8")
        return json.loads(raw.decode("utf-8"))

    def _delay(self, attempt: int, retry_after: Optional[float]) -> float:
        cap = min(self.max_backoff, self.backoff * (2 ** attempt))
        wait = random.uniform(cap / 2, cap)  # jitter: clients spread out
        if retry_after is not None:
            wait = max(wait, retry_after)
        return wait

    def _call(
        self,
        method: str,
        path: str,
        body: Optional[JSON] = None,
        *,
        query: Optional[Mapping[str, Any]] = None,
        idempotent: bool = False,
    ) -> Any:
        url = self.base_url + path
        if query:
            q = _drop_none(query)
            if q:
                url += "?" + urllib.parse.urlencode(q)
        if body is not None:
            data: Optional[bytes] = json.dumps(
                body, separators=(",", ":"), ensure_ascii=False
            ).encode("utf-8")
        else:
            data = b"" if method == "POST" else None
        deadline = time.monotonic() + self.timeout
        attempt = 0
        while True:
            budget = deadline - time.monotonic()
            if budget <= 0:
                raise TransportError(
                    0, "TIMEOUT", "no answer from doctxd",
                    f"{method} {url}: no answer within {self.timeout} s",
                )
            try:
                return self._once(method, url, data, budget)
            except DoctxError as e:
                retryable = isinstance(e, (TransportError, RateLimited, Unavailable))
                if not (idempotent and retryable and attempt < self.retries):
                    raise
                wait = self._delay(attempt, e.retry_after)
                if time.monotonic() + wait >= deadline:
                    raise
                time.sleep(wait)
                attempt += 1

    @staticmethod
    def _p(part: str) -> str:
        return urllib.parse.quote(str(part), safe="")

    def _coll(self, coll: str, verb: str) -> str:
        return f"/v1/c/{self._p(coll)}/{verb}"

    def _pages(
        self, path: str, key: str, query: Mapping[str, Any]
    ) -> Iterator[JSON]:
        # start_after (an id: keyset paging from that entry) opens the walk;
        # the cursors carry it on (the server takes one or the other).
        after: Optional[str] = None
        while True:
            page = self._call(
                "GET", path, query={**query, "after": after}, idempotent=True
            )
            yield from page[key]
            after = page.get("next")
            if not after:
                return
            query = {k: v for k, v in query.items() if k != "start_after"}

    # ---- documents --------------------------------------------------------

    def find(
        self,
        coll: str,
        filter: Optional[JSON] = None,
        *,
        sort: Optional[JSON] = None,
        limit: Optional[int] = None,
        skip: Optional[int] = None,
        projection: Optional[JSON] = None,
        after: Optional[str] = None,
    ) -> JSON:
        """One page of the documents of ``coll`` that match ``filter``.

        Returns ``{"docs": [...], "next": CURSOR or None}``; pass ``next`` back
        as ``after`` (with the same query) for the next page.  ``limit`` is
        the page's size, 1..1000 (default 100).
        """
        body = _drop_none(
            {"filter": filter, "sort": sort, "limit": limit, "skip": skip,
             "projection": projection, "after": after}
        )
        return self._call("POST", self._coll(coll, "find"), body, idempotent=True)

    def count(self, coll: str, filter: Optional[JSON] = None) -> int:
        """How many documents of ``coll`` match ``filter``."""
        body = _drop_none({"filter": filter})
        return int(
            self._call("POST", self._coll(coll, "count"), body, idempotent=True)[
                "count"
            ]
        )

    def insert(
        self, coll: str, docs: Sequence[JSON], *, bypass_validation: Optional[bool] = None
    ) -> JSON:
        """Inserts 1..1000 documents; returns ``{"inserted": n, "ids": [...]}``.

        Not retried: a retry after a lost answer would meet ``DUPKEY``.
        """
        body = _drop_none({"docs": list(docs), "bypass_validation": bypass_validation})
        return self._call("POST", self._coll(coll, "insert"), body)

    def update(
        self,
        coll: str,
        filter: JSON,
        update: Union[JSON, List[JSON]],
        *,
        many: Optional[bool] = None,
        upsert: Optional[bool] = None,
        array_filters: Optional[List[JSON]] = None,
        bypass_validation: Optional[bool] = None,
        fence: Optional[str] = None,
    ) -> JSON:
        """Updates the first (or, with ``many``, every) match.

        Returns ``{"matched", "modified"[, "upserted"]}``.  ``fence`` is
        ``"NAME:TOKEN"`` of a held lock (docs/locks.md).  Not retried.
        """
        body = _drop_none(
            {"filter": filter, "update": update, "many": many, "upsert": upsert,
             "array_filters": array_filters,
             "bypass_validation": bypass_validation, "fence": fence}
        )
        return self._call("POST", self._coll(coll, "update"), body)

    def find_and_modify(
        self,
        coll: str,
        filter: JSON,
        update: Union[JSON, List[JSON]],
        *,
        sort: Optional[JSON] = None,
        projection: Optional[JSON] = None,
        new: Optional[bool] = None,
        upsert: Optional[bool] = None,
        array_filters: Optional[List[JSON]] = None,
        bypass_validation: Optional[bool] = None,
        fence: Optional[str] = None,
    ) -> JSON:
        """Updates one match atomically and returns it (after the update with ``new``).

        Raises :class:`~doctx.errors.Conflict` with code ``NOMATCH`` when no
        document matched.  Not retried.
        """
        body = _drop_none(
            {"filter": filter, "update": update, "sort": sort,
             "projection": projection, "new": new, "upsert": upsert,
             "array_filters": array_filters,
             "bypass_validation": bypass_validation, "fence": fence}
        )
        return self._call("POST", self._coll(coll, "find-and-modify"), body)["doc"]

    def delete(
        self,
        coll: str,
        filter: JSON,
        *,
        many: Optional[bool] = None,
        bypass_validation: Optional[bool] = None,
        fence: Optional[str] = None,
    ) -> int:
        """Deletes the first (or, with ``many``, every) match; returns how many.  Not retried."""
        body = _drop_none(
            {"filter": filter, "many": many,
             "bypass_validation": bypass_validation, "fence": fence}
        )
        return int(self._call("POST", self._coll(coll, "delete"), body)["deleted"])

    def bulk(self, coll: str, ops: Sequence[JSON]) -> List[JSON]:
        """Runs 1..1000 operations (``doctx bulk``'s shapes, e.g.
        ``{"insertOne": {"document": {...}}}``); returns one result per op.  Not retried.
        """
        return self._call("POST", self._coll(coll, "bulk"), {"ops": list(ops)})[
            "results"
        ]

    def aggregate(self, coll: str, pipeline: Sequence[JSON]) -> List[JSON]:
        """Runs an aggregation pipeline over ``coll``; returns its documents."""
        return self._call(
            "POST", self._coll(coll, "aggregate"), {"pipeline": list(pipeline)},
            idempotent=True,
        )["docs"]

    def indexes(self, coll: str) -> List[JSON]:
        """The indexes of ``coll``: ``[{"name", "key", "unique", "sparse"}, ...]``."""
        return self._call("GET", self._coll(coll, "indexes"), idempotent=True)[
            "indexes"
        ]

    def create_index(
        self,
        coll: str,
        keys: JSON,
        *,
        unique: Optional[bool] = None,
        sparse: Optional[bool] = None,
        name: Optional[str] = None,
        bypass_validation: Optional[bool] = None,
    ) -> str:
        """Creates an index on ``keys`` (e.g. ``{"item": 1}``); returns its name.  Not retried."""
        body = _drop_none(
            {"keys": keys, "unique": unique, "sparse": sparse, "name": name,
             "bypass_validation": bypass_validation}
        )
        return str(self._call("POST", self._coll(coll, "indexes"), body)["name"])

    # ---- accounts and transfers -------------------------------------------

    def create_account(
        self,
        id: str,
        *,
        balance: Optional[int] = None,
        min_balance: Optional[Union[int, str]] = None,
    ) -> JSON:
        """Creates account ``id`` with an opening ``balance`` (default 0).

        ``min_balance`` is an integer (default 0) or ``"none"`` for no floor.
        Raises :class:`~doctx.errors.Conflict` (``DUPKEY``) if it exists.
        Not retried.
        """
        body = _drop_none({"id": id, "balance": balance, "min_balance": min_balance})
        return self._call("POST", "/v1/accounts", body)

    def account(self, id: str) -> JSON:
        """Account ``id``; :class:`~doctx.errors.NotFound` (``NOACCOUNT``) if none."""
        return self._call("GET", f"/v1/accounts/{self._p(id)}", idempotent=True)

    def accounts(
        self, *, page_size: Optional[int] = None, start_after: Optional[str] = None
    ) -> Iterator[JSON]:
        """Every account, fetched a page (``?limit=``, 1..1000) at a time;
        with ``start_after`` only those after that id (every list takes it:
        the id of an entry of the list, resumed from its place)."""
        return self._pages("/v1/accounts", "accounts",
                           {"limit": page_size, "start_after": start_after})

    def transfer(
        self,
        from_: str,
        to: str,
        amount: int,
        *,
        id: Optional[str] = None,
        async_: Optional[bool] = None,
        deadline_ms: Optional[int] = None,
    ) -> JSON:
        """Moves ``amount`` from account ``from_`` to account ``to``; returns the transfer.

        Without ``id`` the client makes one (:func:`new_id`), so the call is
        always retried safely: doctxd answers a repeated id with the same
        transfer, counted once.  A transfer the funds do not cover is an
        answer, ``state == "failed"`` with its ``reason``.  With ``async_``
        it is only recorded (``state == "initiated"``).  The same id with
        other parameters raises :class:`~doctx.errors.Conflict` (``CONFLICT``).
        """
        body = _drop_none(
            {"id": id or new_id(), "from": from_, "to": to, "amount": amount,
             "async": async_, "deadline_ms": deadline_ms}
        )
        return self._call("POST", "/v1/transfers", body, idempotent=True)

    def transfer_batch(
        self, transfers: Sequence[Mapping[str, Any]], *, deadline_ms: Optional[int] = None
    ) -> List[JSON]:
        """Runs 1..1000 transfers ``{"from", "to", "amount"[, "id"]}``.

        Returns one result per item, in order: ``{"status": 200, "transfer":
        {...}}`` or a problem object.  Items without an id get one from the
        client (the list passed in is not changed), so the batch is retried
        safely.
        """
        items = [dict(t) if t.get("id") else {**t, "id": new_id()} for t in transfers]
        body = _drop_none({"transfers": items, "deadline_ms": deadline_ms})
        return self._call("POST", "/v1/transfers/batch", body, idempotent=True)[
            "results"
        ]

    def get_transfer(self, id: str) -> JSON:
        """Transfer ``id``; :class:`~doctx.errors.NotFound` if none."""
        return self._call("GET", f"/v1/transfers/{self._p(id)}", idempotent=True)

    def transfers(
        self, *, state: Optional[str] = None, page_size: Optional[int] = None,
        start_after: Optional[str] = None
    ) -> Iterator[JSON]:
        """Every transfer (in ``state`` if given), fetched a page at a time."""
        return self._pages(
            "/v1/transfers", "transfers",
            {"state": state, "limit": page_size, "start_after": start_after}
        )

    def cancel_transfer(self, id: str) -> JSON:
        """Cancels a transfer not yet under way; returns it (``failed``, ``canceled``).

        :class:`~doctx.errors.Conflict` (``STATE``) once it has committed.
        Not retried.
        """
        return self._call("POST", f"/v1/transfers/{self._p(id)}/cancel")

    # ---- the job queue (docs/jobs.md) -----------------------------------------

    def add_job(
        self,
        queue: str,
        type: str,
        payload: Any = None,
        *,
        id: Optional[str] = None,
        priority: Optional[int] = None,
        delay_ms: Optional[int] = None,
        max_attempts: Optional[int] = None,
        backoff_ms: Optional[int] = None,
        unique_key: Optional[str] = None,
    ) -> JSON:
        """Adds a job of ``type`` with ``payload`` to ``queue``; returns the job.

        With an ``id`` it is retried safely: the same id and content answer
        the job already recorded (other content: Conflict ``CONFLICT``).
        With ``unique_key``, the key's holder answers while it is pending.
        """
        body = _drop_none({"type": type, "payload": payload, "id": id,
                           "priority": priority, "delay_ms": delay_ms,
                           "max_attempts": max_attempts, "backoff_ms": backoff_ms,
                           "unique_key": unique_key})
        return self._call("POST", f"/v1/queues/{self._p(queue)}/jobs", body,
                          idempotent=bool(id))

    def claim(
        self,
        queue: str,
        *,
        n: Optional[int] = None,
        lease_ms: Optional[int] = None,
        owner: Optional[str] = None,
    ) -> List[JSON]:
        """Claims up to ``n`` (1..256, default 1) due jobs of ``queue`` for a lease.

        Each job comes back running with its ``epoch``: pass it to
        :meth:`heartbeat`, :meth:`complete`, :meth:`fail` and :meth:`effect`.
        ``[]`` when nothing is due.  Not retried: a lost answer leaves its
        jobs to their lease's end.
        """
        body = _drop_none({"n": n, "lease_ms": lease_ms, "owner": owner})
        return self._call("POST", f"/v1/queues/{self._p(queue)}/claim", body)["jobs"]

    def heartbeat(self, id: str, epoch: int, *, lease_ms: Optional[int] = None) -> JSON:
        """Extends the lease of job ``id``'s attempt ``epoch``; Conflict (``STALE``)
        once that attempt is no longer current.  Retried (fenced by the epoch)."""
        body = _drop_none({"epoch": epoch, "lease_ms": lease_ms})
        return self._call("POST", f"/v1/jobs/{self._p(id)}/heartbeat", body, idempotent=True)

    def progress(self, id: str, epoch: int, value: Any) -> JSON:
        """Records ``value`` (any JSON, at most 4096 bytes) as the progress of
        job ``id``'s attempt ``epoch``; Conflict (``STALE``) once that attempt
        is no longer current, nothing written.  Retried (fenced by the epoch)."""
        body = {"epoch": epoch, "value": value}
        return self._call("POST", f"/v1/jobs/{self._p(id)}/progress", body, idempotent=True)

    def complete(self, id: str, epoch: int, *, result: Any = None) -> JSON:
        """Completes job ``id``'s attempt ``epoch`` with ``result``.  A repeat
        answers the same, so it is retried; Conflict (``STALE``) if taken over."""
        body = _drop_none({"epoch": epoch, "result": result})
        return self._call("POST", f"/v1/jobs/{self._p(id)}/complete", body, idempotent=True)

    def fail(self, id: str, epoch: int, *, error: Optional[str] = None) -> JSON:
        """Fails job ``id``'s attempt ``epoch`` (delayed for a retry, or dead).
        A repeat answers the same, so it is retried; Conflict (``STALE``) if taken over."""
        body = _drop_none({"epoch": epoch, "error": error})
        return self._call("POST", f"/v1/jobs/{self._p(id)}/fail", body, idempotent=True)

    def retry_job(self, id: str) -> JSON:
        """Makes dead job ``id`` ready again; Conflict (``STATE``) otherwise.  Not retried."""
        return self._call("POST", f"/v1/jobs/{self._p(id)}/retry")

    def cancel_job(self, id: str) -> JSON:
        """Cancels job ``id``: a ready or delayed one is canceled; for a running one
        the cancel is recorded (``cancel_requested``) and its worker ends the
        attempt canceled -- its :meth:`heartbeat` then raises Conflict
        (``STATE``), and its :meth:`complete` or :meth:`fail` answer the job
        canceled.  Conflict (``STATE``) for a succeeded or dead one.  A repeat
        answers the same, so it is retried."""
        return self._call("POST", f"/v1/jobs/{self._p(id)}/cancel", idempotent=True)

    def effect(
        self,
        id: str,
        epoch: int,
        key: str,
        coll: str,
        filter: JSON,
        update: JSON,
        *,
        fence: Optional[str] = None,
    ) -> JSON:
        """Applies ``update`` to the ``filter`` match in ``coll`` at most once
        per (job, ``key``), while attempt ``epoch`` is current.

        Returns ``{"applied": True}``, or ``False`` when the key was applied
        before -- so a retry (it is retried) never applies it twice.
        """
        body = _drop_none({"epoch": epoch, "key": key, "coll": coll,
                           "filter": filter, "update": update, "fence": fence})
        return self._call("POST", f"/v1/jobs/{self._p(id)}/effect", body, idempotent=True)

    def job(self, id: str) -> JSON:
        """Job ``id``; :class:`~doctx.errors.NotFound` if none."""
        return self._call("GET", f"/v1/jobs/{self._p(id)}", idempotent=True)

    def jobs(
        self, queue: str, *, state: Optional[str] = None, page_size: Optional[int] = None,
        start_after: Optional[str] = None
    ) -> Iterator[JSON]:
        """Every job of ``queue`` (in ``state`` if given), a page at a time."""
        return self._pages(f"/v1/queues/{self._p(queue)}/jobs", "jobs",
                           {"state": state, "limit": page_size,
                            "start_after": start_after})

    def queue_stats(self, queue: str) -> JSON:
        """``{"ready", "delayed", "running", "succeeded", "dead", "canceled", "total"}``."""
        return self._call("GET", f"/v1/queues/{self._p(queue)}/stats", idempotent=True)

    def job_events(
        self,
        queue: str,
        *,
        after: int = 0,
        limit: Optional[int] = None,
        wait_ms: Optional[int] = None,
    ) -> JSON:
        """The events of ``queue`` after cursor ``after`` (docs/jobs.md, "Events").

        ``{"events": [{cursor, job, n, event, at, epoch, from, to}...],
        "cursor": the last one's, or ``after``}``: pass ``cursor`` as the
        next ``after`` to go on without loss.  ``wait_ms`` (at most 30000)
        waits for an event when there is none yet.  A cursor whose next
        events were trimmed is :class:`~doctx.errors.Conflict` (STATE).
        """
        return self._call("GET", f"/v1/queues/{self._p(queue)}/events",
                          query=_drop_none({"after": after, "limit": limit,
                                            "wait_ms": wait_ms}),
                          idempotent=True)

    def schedule_job(
        self,
        name: str,
        queue: str,
        type: str,
        payload: Any = None,
        *,
        cron: Optional[str] = None,
        every_ms: Optional[int] = None,
        missed: Optional[str] = None,
        grace_ms: Optional[int] = None,
        priority: Optional[int] = None,
        max_attempts: Optional[int] = None,
        backoff_ms: Optional[int] = None,
    ) -> JSON:
        """Adds (or replaces: a new gen) schedule ``name``: one job of ``queue``
        per tick of ``cron`` (five fields, UTC) or of ``every_ms``.  Retried:
        a repeat replaces the schedule with itself."""
        body = _drop_none({"name": name, "queue": queue, "type": type,
                           "payload": payload, "cron": cron, "every_ms": every_ms,
                           "missed": missed, "grace_ms": grace_ms,
                           "priority": priority, "max_attempts": max_attempts,
                           "backoff_ms": backoff_ms})
        return self._call("POST", "/v1/job-schedules", body, idempotent=True)

    def job_schedules(self, queue: Optional[str] = None) -> JSON:
        """``{"schedules": [...]}``: the active schedules (of ``queue``)."""
        return self._call("GET", "/v1/job-schedules",
                          query=_drop_none({"queue": queue}), idempotent=True)

    def unschedule_job(self, name: str) -> JSON:
        """Removes schedule ``name`` (its tombstone answers); NotFound if none."""
        return self._call("DELETE", f"/v1/job-schedules/{self._p(name)}")
    def job_queues(self) -> JSON:
        """``GET /v1/job-queues`` (admin scope): ``{"queues": [{queue, paused,
        gen}]}``, every queue with settings (docs/jobs.md, "Pause and resume")."""
        return self._call("GET", "/v1/job-queues", idempotent=True)

    def pause_queue(self, queue: str) -> JSON:
        """Admin scope: claims of ``queue`` stop (running jobs finish); returns
        once every worker sees it.  A repeat is harmless, so it is retried."""
        return self._call("POST", f"/v1/job-queues/{self._p(queue)}/pause", {}, idempotent=True)

    def resume_queue(self, queue: str) -> JSON:
        """Admin scope: claims of ``queue`` start again.  Retried."""
        return self._call("POST", f"/v1/job-queues/{self._p(queue)}/resume", {}, idempotent=True)

    def set_queue(self, queue: str, max_running: int | str | None = None,
                  rate: str | None = None,
                  rate_group: str | None = None) -> JSON:
        """Admin scope: at most ``max_running`` jobs of ``queue`` run at once
        (``"none"``: no limit; docs/jobs.md, "Queue limits"); at most
        ``rate`` ``"N/MS"`` claims per window of MS ms, per value of the job
        at ``rate_group`` when given (``"none"``: no rate; "Rate
        limits").  Only the arguments given change.  Retried."""
        body: dict[str, Any] = {}
        if max_running is not None:
            body["max_running"] = max_running
        if rate is not None:
            body["rate"] = rate
        if rate_group is not None:
            body["rate_group"] = rate_group
        return self._call("POST", f"/v1/job-queues/{self._p(queue)}", body,
                          idempotent=True)

    # ---- locks (docs/locks.md) ----------------------------------------------

    def acquire(
        self,
        name: str,
        *,
        ttl_ms: Optional[int] = None,
        owner: Optional[str] = None,
        wait_ms: Optional[int] = None,
        deadline_ms: Optional[int] = None,
        max: Optional[int] = None,
    ) -> JSON:
        """Acquires lock ``name``: ``{"name", "owner", "token", "expires"}``.

        ``token`` is the fencing token: pass ``f"{name}:{token}"`` as ``fence``
        to the document writes.  :class:`~doctx.errors.Conflict` (``NOMATCH``,
        naming the holder) while another holds it.  ``max`` N (2..100) makes
        ``name`` a semaphore of N holders: the answer adds ``"slot"`` and
        ``"fence"``, and the writes fence with ``f"{fence}:{token}"``.  Not
        retried.
        """
        body = _drop_none({"ttl_ms": ttl_ms, "owner": owner, "wait_ms": wait_ms,
                           "deadline_ms": deadline_ms, "max": max})
        return self._call("POST", f"/v1/locks/{self._p(name)}/acquire", body)

    def campaign(
        self,
        name: str,
        *,
        ttl_ms: Optional[int] = None,
        owner: Optional[str] = None,
        wait_ms: Optional[int] = None,
        deadline_ms: Optional[int] = None,
    ) -> JSON:
        """Waits until this caller leads ``name`` (up to ``wait_ms``; without
        it, within the request's time) and answers as :meth:`acquire`: the
        token is the term.  Not retried.
        """
        body = _drop_none({"ttl_ms": ttl_ms, "owner": owner, "wait_ms": wait_ms,
                           "deadline_ms": deadline_ms})
        return self._call("POST", f"/v1/locks/{self._p(name)}/campaign", body)

    def leader(self, name: str) -> JSON:
        """``{"name", "leader", "term", "expires"}`` of election ``name`` (leader None: none)."""
        return self._call("GET", f"/v1/locks/{self._p(name)}/leader", idempotent=True)

    def renew(self, name: str, token: int, *, ttl_ms: Optional[int] = None) -> JSON:
        """Renews lock ``name`` held with ``token``; Conflict (``NOMATCH``) if not current.  Not retried."""
        body = _drop_none({"token": token, "ttl_ms": ttl_ms})
        return self._call("POST", f"/v1/locks/{self._p(name)}/renew", body)

    def release(self, name: str, token: int) -> JSON:
        """Releases lock ``name`` held with ``token``; Conflict (``NOMATCH``) if not current.  Not retried."""
        return self._call("POST", f"/v1/locks/{self._p(name)}/release", {"token": token})

    def lock(self, name: str) -> JSON:
        """Lock ``name``: ``{"name", "owner", "token", "expires", "held"}``."""
        return self._call("GET", f"/v1/locks/{self._p(name)}", idempotent=True)

    def locks(
        self, *, page_size: Optional[int] = None, start_after: Optional[str] = None
    ) -> Iterator[JSON]:
        """Every lock, fetched a page at a time."""
        return self._pages("/v1/locks", "locks",
                           {"limit": page_size, "start_after": start_after})

    def force_release(self, name: str, *, token: Optional[int] = None) -> JSON:
        """Releases lock ``name`` whoever holds it (admin scope), with ``token``
        or the current one; Conflict (``NOMATCH``) if it moved.  Not retried."""
        return self._call("POST", f"/v1/admin/locks/{self._p(name)}/release",
                          _drop_none({"token": token}))

    # ---- ledger (docs/ledger.md) ---------------------------------------------

    def ledger_account(
        self,
        id: str,
        *,
        min_balance: Optional[Union[int, str]] = None,
        max_balance: Optional[Union[int, str]] = None,
        asset: Optional[str] = None,
    ) -> JSON:
        """Creates ledger account ``id``.  Not retried.

        ``min_balance``: the floor a debit may not take the balance (less
        pending debits) under, an integer or ``"none"`` (no floor; unset: 0).
        ``max_balance``: the upper limit a credit may not take the balance
        (plus pending credits) over, an integer or ``"none"`` (unset: none);
        a credit past it is Conflict ``INSUFFICIENT``.  ``asset``:
        ``"CODE/SCALE"`` (e.g. ``"USD/2"``, values in cents), fixed for
        good; an entry's legs must all have one asset (or all none), else
        BadRequest.  docs/ledger.md, "Assets" and "The upper limit".
        """
        body = _drop_none({"id": id, "min_balance": min_balance,
                           "max_balance": max_balance, "asset": asset})
        return self._call("POST", "/v1/ledger/accounts", body)

    def ledger_limit(
        self,
        id: str,
        min_balance: Optional[Union[int, str]] = None,
        *,
        max_balance: Optional[Union[int, str]] = None,
    ) -> JSON:
        """Changes ledger account ``id``'s limits in one step: ``min_balance``
        and/or ``max_balance`` (each an integer or ``"none"``); the one not
        given is kept.  At least one is required (BadRequest otherwise), and
        a max below the floor is BadRequest, nothing changed."""
        body = _drop_none({"min_balance": min_balance, "max_balance": max_balance})
        return self._call("POST", f"/v1/ledger/accounts/{self._p(id)}/limit", body)

    def close_account(self, id: str, *, deadline_ms: Optional[int] = None) -> JSON:
        """Closes ledger account ``id`` for good (balance 0, no hold); Conflict
        (``STATE``) otherwise.  Returns the close entry.  Not retried."""
        body = _drop_none({"deadline_ms": deadline_ms})
        return self._call("POST", f"/v1/ledger/accounts/{self._p(id)}/close", body)

    def balance(self, account: str, *, at_seq: Optional[int] = None) -> JSON:
        """``{"account", "balance", "available", "pending_debits", "seq"}``, now or at ``at_seq``."""
        return self._call("GET", f"/v1/ledger/accounts/{self._p(account)}/balance",
                          query={"at_seq": at_seq}, idempotent=True)

    def statement(
        self, account: str, *, from_seq: Optional[int] = None,
        page_size: Optional[int] = None,
    ) -> Iterator[JSON]:
        """Every leg of ``account`` in seq order (from ``from_seq``), a page at a time."""
        path = f"/v1/ledger/accounts/{self._p(account)}/statement"
        query: Dict[str, Any] = {"from_seq": from_seq, "limit": page_size}
        while True:
            page = self._call("GET", path, query=query, idempotent=True)
            yield from page["legs"]
            if not page.get("next"):
                return
            query = {"after": page["next"], "limit": page_size}

    def post(
        self,
        legs: Sequence[Mapping[str, Any]],
        *,
        id: Optional[str] = None,
        pending: Optional[bool] = None,
        timeout_ms: Optional[int] = None,
        meta: Optional[JSON] = None,
        ref: Optional[str] = None,
        deadline_ms: Optional[int] = None,
    ) -> JSON:
        """Posts a ledger entry: ``legs`` are ``{"account", "value"}`` summing to 0.

        A value is an integer, or one balancing pair: ``"-max"`` or
        ``"-max=CAP"`` on one leg and ``"max"`` on another moves as much as
        both accounts' limits allow (at most CAP); the entry records the
        amount (docs/ledger.md, "Balancing legs").  With ``pending`` it holds
        the debits until :meth:`post_pending` or :meth:`void` (or
        ``timeout_ms``).  ``meta``: a JSON object (at most 4 KiB) kept with
        the entry; ``ref``: a string (1..256 bytes) naming what it belongs to
        outside the ledger -- both never change, and :meth:`entries` finds
        entries by them.  With an ``id`` it is retried safely: the same id,
        legs, meta and ref answer the same entry, posted once.  Conflict
        ``INSUFFICIENT`` names the account short of funds or over its max
        balance; Conflict ``DUPKEY`` a ref another entry holds once refs are
        unique (:meth:`unique_refs`).
        """
        body = _drop_none({"legs": [dict(leg) for leg in legs], "id": id,
                           "pending": pending, "timeout_ms": timeout_ms,
                           "meta": meta, "ref": ref, "deadline_ms": deadline_ms})
        return self._call("POST", "/v1/ledger/entries", body, idempotent=bool(id))

    def post_batch(
        self, entries: Sequence[Mapping[str, Any]], *, deadline_ms: Optional[int] = None
    ) -> List[JSON]:
        """Posts 1..1000 entries ``{"legs"[, "id", "pending", "timeout_ms",
        "meta", "ref"]}`` (each as :meth:`post` takes them); one result per
        entry.  Retried only when every entry has an id."""
        items = [dict(e) for e in entries]
        body = _drop_none({"entries": items, "deadline_ms": deadline_ms})
        return self._call("POST", "/v1/ledger/entries/batch", body,
                          idempotent=all(e.get("id") for e in items))["results"]

    def post_pending(
        self,
        id: str,
        *,
        amounts: Optional[Sequence[Mapping[str, Any]]] = None,
        post_id: Optional[str] = None,
    ) -> JSON:
        """Posts pending entry ``id``; Conflict (``STATE``) once voided.

        In full without ``amounts``; with ``amounts`` (``[{"account",
        "value"}...]``, each 0 up to what its leg holds, the same sign,
        summing to 0; legs not named post 0) only that much, the rest
        released, in one step (docs/ledger.md, "Partial post of a hold").
        ``post_id`` names the partial post: a retry with the same amounts
        and post id answers the same entry, otherwise Conflict (``CONFLICT``).
        Not retried by the client.
        """
        body = _drop_none({"amounts": None if amounts is None else [dict(a) for a in amounts],
                           "post_id": post_id})
        return self._call("POST", f"/v1/ledger/entries/{self._p(id)}/post", body or None)

    def void(self, id: str) -> JSON:
        """Voids pending entry ``id``; Conflict (``STATE``) once posted.  Not retried."""
        return self._call("POST", f"/v1/ledger/entries/{self._p(id)}/void")

    def reverse(
        self, entry_id: str, *, id: Optional[str] = None, deadline_ms: Optional[int] = None
    ) -> JSON:
        """Posts the entry that reverses ``entry_id`` (under ``id`` if given).  Not retried."""
        body = _drop_none({"id": id, "deadline_ms": deadline_ms})
        return self._call("POST", f"/v1/ledger/entries/{self._p(entry_id)}/reverse", body)

    def entry(self, id: str) -> JSON:
        """Ledger entry ``id``; :class:`~doctx.errors.NotFound` if none."""
        return self._call("GET", f"/v1/ledger/entries/{self._p(id)}", idempotent=True)

    def entries(
        self,
        *,
        account: Optional[str] = None,
        ref: Optional[str] = None,
        meta_filter: Optional[JSON] = None,
        page_size: Optional[int] = None,
        start_after: Optional[str] = None,
    ) -> Iterator[JSON]:
        """Every ledger entry, a page at a time: those touching ``account``,
        or those whose ``ref`` is the one given and/or whose meta matches
        ``meta_filter`` (a MongoDB filter over the meta object, its paths
        relative to it: ``{"order": "o1"}``), oldest first.  ``account``
        does not go with ``ref`` or ``meta_filter`` (BadRequest)."""
        mf = None if meta_filter is None else json.dumps(
            meta_filter, separators=(",", ":"), ensure_ascii=False)
        return self._pages("/v1/ledger/entries", "entries",
                           {"account": account, "ref": ref, "meta_filter": mf,
                            "limit": page_size, "start_after": start_after})

    def unique_refs(self) -> JSON:
        """Makes entry refs unique in the ledger from now on (admin scope);
        Conflict (``DUPKEY``) when entries already share one.  Idempotent."""
        return self._call("POST", "/v1/ledger/unique-refs", idempotent=True)

    # ---- sync (docs/sync.md) ---------------------------------------------------

    def sync_rule(self, name: str, master: str, dependents: str, link: str, copy: str) -> JSON:
        """Defines sync rule ``name``: ``dependents`` documents whose ``link``
        names a ``master`` document keep copies of its fields (``copy``:
        ``"SRC:DST,..."``).  The same rule again answers the same, so it is
        retried; another under the name is Conflict (``CONFLICT``)."""
        body = {"master": master, "dependents": dependents, "link": link, "copy": copy}
        return self._call("POST", f"/v1/sync/{self._p(name)}/rule", body, idempotent=True)

    def sync_update(
        self,
        name: str,
        master_id: str,
        update: JSON,
        *,
        lease_ms: Optional[int] = None,
        owner: Optional[str] = None,
        deadline_ms: Optional[int] = None,
    ) -> JSON:
        """Updates master ``master_id`` under rule ``name`` and its dependents' copies.  Not retried."""
        body = _drop_none({"master_id": master_id, "update": update,
                           "lease_ms": lease_ms, "owner": owner,
                           "deadline_ms": deadline_ms})
        return self._call("POST", f"/v1/sync/{self._p(name)}/update", body)

    def sync(self, name: str) -> JSON:
        """Sync rule ``name``; :class:`~doctx.errors.NotFound` if none."""
        return self._call("GET", f"/v1/sync/{self._p(name)}", idempotent=True)

    def sync_repair(
        self, *, older_than_ms: Optional[int] = None, deadline_ms: Optional[int] = None
    ) -> JSON:
        """Finishes interrupted sync updates (admin scope); the summary.  Not retried."""
        body = _drop_none({"older_than_ms": older_than_ms, "deadline_ms": deadline_ms})
        return self._call("POST", "/v1/sync/repair", body)

    # ---- orders (docs/orders.md) ----------------------------------------------

    def create_order(
        self, trade_id: str, account: str, amount: int, *, settlement: Optional[str] = None
    ) -> JSON:
        """Records order ``trade_id`` paying ``amount`` into ``account`` once confirmed.

        Idempotent by its trade id (the same order again answers the same;
        other parameters are Conflict ``CONFLICT``), so it is retried.
        """
        body = _drop_none({"account": account, "amount": amount, "settlement": settlement})
        return self._call("POST", f"/v1/orders/{self._p(trade_id)}/create", body,
                          idempotent=True)

    def confirm_order(
        self,
        trade_id: str,
        *,
        lease_ms: Optional[int] = None,
        owner: Optional[str] = None,
        deadline_ms: Optional[int] = None,
    ) -> JSON:
        """Confirms order ``trade_id`` (its payment is credited once); retried,
        since confirming a confirmed order credits nothing."""
        body = _drop_none({"lease_ms": lease_ms, "owner": owner, "deadline_ms": deadline_ms})
        return self._call("POST", f"/v1/orders/{self._p(trade_id)}/confirm", body,
                          idempotent=True)

    def confirm_orders(
        self,
        trade_ids: Sequence[str],
        *,
        lease_ms: Optional[int] = None,
        owner: Optional[str] = None,
        deadline_ms: Optional[int] = None,
    ) -> List[JSON]:
        """Confirms 1..1000 orders; one result per trade id.  Retried, as :meth:`confirm_order`."""
        body = _drop_none({"trade_ids": list(trade_ids), "lease_ms": lease_ms,
                           "owner": owner, "deadline_ms": deadline_ms})
        return self._call("POST", "/v1/orders/confirm", body, idempotent=True)["results"]

    def cancel_order(self, trade_id: str) -> JSON:
        """Cancels order ``trade_id``; Conflict (``STATE``) once confirmed.  Not retried."""
        return self._call("POST", f"/v1/orders/{self._p(trade_id)}/cancel")

    def order(self, trade_id: str) -> JSON:
        """Order ``trade_id``; :class:`~doctx.errors.NotFound` if none."""
        return self._call("GET", f"/v1/orders/{self._p(trade_id)}", idempotent=True)

    def orders(
        self, *, state: Optional[str] = None, page_size: Optional[int] = None,
        start_after: Optional[str] = None
    ) -> Iterator[JSON]:
        """Every order (in ``state`` if given), a page at a time."""
        return self._pages("/v1/orders", "orders",
                           {"state": state, "limit": page_size,
                            "start_after": start_after})

    # ---- versions (docs/versions.md) --------------------------------------------

    def put_version(
        self,
        item: str,
        root: JSON,
        *,
        child: Optional[JSON] = None,
        remove_child: Optional[Sequence[str]] = None,
        expect_version: Optional[int] = None,
    ) -> JSON:
        """Writes the next version of ``item``: ``{"item", "version"}``.

        ``child`` maps keys to the child documents to set, ``remove_child``
        lists keys to drop.  Conflict (``CONFLICT``) when ``expect_version``
        is not the current one.  Not retried.
        """
        body = _drop_none({"root": root, "child": child,
                           "remove_child": list(remove_child) if remove_child is not None else None,
                           "expect_version": expect_version})
        return self._call("POST", f"/v1/versions/{self._p(item)}/put", body)

    def version(self, item: str, *, version: Optional[int] = None) -> JSON:
        """``{"item", "version", "root", "children"}``: the current version or ``version``."""
        return self._call("GET", f"/v1/versions/{self._p(item)}",
                          query={"version": version}, idempotent=True)

    def version_history(self, item: str) -> List[JSON]:
        """The versions of ``item`` still kept."""
        return self._call("GET", f"/v1/versions/{self._p(item)}/history",
                          idempotent=True)["versions"]

    def version_gc(
        self, *, keep: Optional[int] = None, grace_ms: Optional[int] = None
    ) -> JSON:
        """Drops old versions, keeping ``keep`` per item (admin scope); the summary.  Not retried."""
        return self._call("POST", "/v1/versions/gc",
                          _drop_none({"keep": keep, "grace_ms": grace_ms}))

    # ---- transactions (docs/transactions.md) ------------------------------------

    def txn(
        self,
        script: Sequence[Mapping[str, Any]],
        *,
        isolation: Optional[str] = None,
        id: Optional[str] = None,
        lease_ms: Optional[int] = None,
        deadline_ms: Optional[int] = None,
    ) -> JSON:
        """Runs ``script`` (a list of steps, as ``doctx txn`` takes) as ONE transaction.

        Returns ``{"outcome": "committed", "reads": {NAME: doc or None}}``, or
        ``{"outcome": "aborted", ...}`` when a ``require`` step did not hold
        (nothing was written).  ``isolation`` is ``"snapshot"`` (doctxd's
        default) or ``"serializable"``.  Conflicts are retried by doctxd
        until ``deadline_ms``; one still there raises
        :class:`~doctx.errors.Conflict` (``CONFLICT``): run it again.

        Never retried by the client: a repeat under the same ``id`` meets
        the id's record and answers ``CONFLICT`` even when the first run
        committed.  On :class:`~doctx.errors.Unavailable` (the problem's
        ``outcome`` is ``"unknown"``) or a
        :class:`~doctx.errors.TransportError`, the outcome is unknown: give
        an ``id`` and ask :meth:`txn_show` with it.  With an ``id`` every
        commit writes a record, and a conflict is not retried by doctxd.
        """
        body = _drop_none(
            {"script": list(script), "isolation": isolation, "id": id,
             "lease_ms": lease_ms, "deadline_ms": deadline_ms}
        )
        return self._call("POST", "/v1/txn", body)

    def txn_show(self, id: str) -> JSON:
        """The outcome of transaction ``id``, as ``doctx txn show``:
        ``{"id", "outcome"}``, ``"committed"``, ``"aborted"`` or ``"unknown"``
        (still pending under a live lease: ask again).

        ``POST /v1/txn/{id}/outcome`` (write scope): an id with no record is
        fenced -- an aborted record is written, so a late commit under it
        fails -- and answers ``"aborted"``; committed and aborted are final,
        so a repeat answers the same and the call is retried.
        """
        return self._call("POST", f"/v1/txn/{self._p(id)}/outcome", idempotent=True)

    # ---- admin ------------------------------------------------------------

    def audit(self, *, settled: Optional[bool] = None) -> JSON:
        """Runs the audit (admin scope); its report, with ``"clean": True|False``."""
        return self._call("POST", "/v1/admin/audit", _drop_none({"settled": settled}))

    def recover(
        self,
        *,
        older_than_ms: Optional[int] = None,
        tombstone_ttl_ms: Optional[int] = None,
        deadline_ms: Optional[int] = None,
        retention_ms: Optional[int] = None,
    ) -> JSON:
        """Runs recovery (admin scope), as ``doctx recover``; returns its summary.  Not retried."""
        body = _drop_none(
            {"older_than_ms": older_than_ms, "tombstone_ttl_ms": tombstone_ttl_ms,
             "deadline_ms": deadline_ms, "retention_ms": retention_ms}
        )
        return self._call("POST", "/v1/admin/recover", body)

    def admin_stats(self) -> JSON:
        """``GET /v1/admin/stats`` (admin scope): the admin page's dashboard --
        this doctxd's requests and errors per second over the last minute,
        and the store's transfers, jobs and locks by state (docs/admin.md)."""
        return self._call("GET", "/v1/admin/stats", idempotent=True)

    # ---- operations -------------------------------------------------------

    def health(self) -> JSON:
        """``GET /healthz``: ``{"status": "ok"}`` while the process is up."""
        return self._call("GET", "/healthz", idempotent=True)

    def ready(self) -> bool:
        """``GET /readyz``: True when the store answers, False on 503
        (draining, or the store away).  Asked once, never retried."""
        try:
            self._call("GET", "/readyz")
        except Unavailable:
            return False
        return True

    def openapi(self) -> JSON:
        """``GET /openapi.json``: the OpenAPI 3.1 description of every route."""
        return self._call("GET", "/openapi.json", idempotent=True)

    def metrics(self) -> str:
        """``GET /metrics`` (metrics or admin scope): the Prometheus text."""
        return str(self._call("GET", "/metrics", idempotent=True))
