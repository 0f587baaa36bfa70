"""The exceptions a doctxd call raises: one per class of HTTP status.

doctxd answers every error as ``application/problem+json`` (docs/server.md,
"Status codes"): ``{"type", "title", "status", "detail", "code"}``, plus
members a failed write carries (a transfer's ``transfer``, an insert's
``inserted``...).  :func:`error_from` turns such an answer into the
subclass of :class:`DoctxError` for its status.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Type

__all__ = [
    "DoctxError",
    "BadRequest",
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "MethodNotAllowed",
    "Conflict",
    "TooLarge",
    "RateLimited",
    "ServerError",
    "Unavailable",
    "TransportError",
    "error_from",
]


class DoctxError(Exception):
    """An error answer from doctxd, or no answer at all (:class:`TransportError`).

    Attributes:
        status: the HTTP status (0 when no answer came).
        code: the problem's ``code``: the library's error name (``NOMATCH``,
            ``DUPKEY``, ``INSUFFICIENT``, ``STALE``, ``FENCED``...) or the
            server's own (``UNAUTHORIZED``, ``RATELIMIT``, ``DRAINING``...).
        title: the problem's ``title`` (the library's ``dtx_strerror``).
        detail: the problem's ``detail``: the text the CLI prints.
        problem: the whole problem object, with any extra members (a failed
            transfer's ``transfer``, a partial insert's ``inserted``...).
        retry_after: the ``Retry-After`` header in seconds, or None.
    """

    status: int

    def __init__(
        self,
        status: int,
        code: str,
        title: str,
        detail: str,
        problem: Optional[Dict[str, Any]] = None,
        retry_after: Optional[float] = None,
    ) -> None:
        super().__init__(f"{status} {code}: {detail}")
        self.status = status
        self.code = code
        self.title = title
        self.detail = detail
        self.problem: Dict[str, Any] = problem if problem is not None else {}
        self.retry_after = retry_after


class BadRequest(DoctxError):
    """400: bad input (``INVAL``, ``BADJSON``, ``BADQUERY``...); nothing was written."""


class Unauthorized(DoctxError):
    """401: no token, or one doctxd does not know."""


class Forbidden(DoctxError):
    """403: the token lacks the route's scope (read < write < admin; metrics)."""


class NotFound(DoctxError):
    """404: no such route, transfer, account (``NOROUTE``, ``NOTFOUND``, ``NOACCOUNT``)."""


class MethodNotAllowed(DoctxError):
    """405: a known path with another method."""


class Conflict(DoctxError):
    """409: a condition or constraint failed.

    ``code`` says which: ``NOMATCH``, ``DUPKEY``, ``CONFLICT`` (an id reused
    with other parameters), ``INSUFFICIENT``, ``STATE``, ``STALE``,
    ``FENCED``, ``VALIDATION``, or ``TYPE``, ``OVERFLOW``, ``IMMUTABLE``,
    ``LIMIT`` (what the stored documents make of the request: an ``$inc``
    past int64, a field of another type, a changed ``_id``).
    """


class TooLarge(DoctxError):
    """413: a request body over 1 MiB."""


class RateLimited(DoctxError):
    """429: the token is over its rate; ``retry_after`` says when to come back."""


class ServerError(DoctxError):
    """500 (and any other 5xx but 503): the server's or the store's own failure."""


class Unavailable(DoctxError):
    """503: the store is away or busy (``UNAVAILABLE``, ``BUSY``), or doctxd is draining."""


class TransportError(DoctxError):
    """No HTTP answer: the connection was refused, reset or timed out (status 0).

    ``__cause__`` holds the underlying ``OSError``.  For a call that is not
    idempotent the request may or may not have reached the store.
    """


_BY_STATUS: Dict[int, Type[DoctxError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    413: TooLarge,
    429: RateLimited,
    503: Unavailable,
}


def error_from(
    status: int, problem: Any, retry_after: Optional[float] = None
) -> DoctxError:
    """The exception for an error answer: its status's class, the problem's fields."""
    if not isinstance(problem, dict):
        problem = {"detail": str(problem) if problem else ""}
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else DoctxError)
    return cls(
        status,
        str(problem.get("code") or f"HTTP{status}"),
        str(problem.get("title") or ""),
        str(problem.get("detail") or problem.get("title") or f"HTTP {status}"),
        problem,
        retry_after,
    )
