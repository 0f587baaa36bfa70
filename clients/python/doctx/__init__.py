"""doctx: a client for doctxd, doctx's HTTP/JSON service (docs/server.md).

    from doctx import Client, Conflict
    c = Client("http://127.0.0.1:8420", token)
    c.transfer("alice", "bob", 250, id="order-17")

Standard library only; see docs/clients.md.
"""

from . import errors
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

# The exceptions as errors.py lists them (error_from is internal).
__all__ = ["Client", "new_id"] + [n for n in errors.__all__ if n != "error_from"]
