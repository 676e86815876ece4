"""electd's Python client: the cluster's claim and named roles as promises kept on a local
timer (:class:`Election`), and the node's HTTP API (:class:`Client`). Standard library only.
docs/applications.md, "Client libraries", shows it in use."""

from ._http import Client, ElectdError, Event, Unreachable, check_name
from .election import Change, Election, NoPromise, Promise, boot_ns

__all__ = [
    "Change",
    "Client",
    "Election",
    "ElectdError",
    "Event",
    "NoPromise",
    "Promise",
    "Unreachable",
    "boot_ns",
    "check_name",
]
