"""doctx: a client for doctxd, doctx's HTTP/JSON service (docs/server.md).

    from doctx import Client, Conflict
    c = Client("http://127.0.0.1:8420", token)
    c.transfer("alice", "bob", 250, id="order-17")

Standard library only; see docs/clients.md.
"""

from .client import Client, new_id
from .errors import (
    BadRequest,
    Conflict,
    DoctxError,
    Forbidden,
    MethodNotAllowed,
    NotFound,
    RateLimited,
    ServerError,
    TooLarge,
    TransportError,
    Unauthorized,
    Unavailable,
)

__version__ = "0.1.0"

__all__ = [
    "Client",
    "new_id",
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
]
