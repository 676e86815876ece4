"""The HTTP API of one electd node (docs/design/api-v1.md, docs/design/roles.md), standard
library only: JSON answers as dicts, errors as :class:`ElectdError`, and Server-Sent Events
streams that resume after the last event read (``Last-Event-ID``)."""

from __future__ import annotations

import http.client
import ipaddress
import json
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any, Dict, Generator, Iterator, List, Optional, Tuple

Stream = Generator["Event", None, None]

Json = Dict[str, Any]


class ElectdError(Exception):
    """The node answered with the contract's error body: ``status`` and ``code`` (for example
    409 ``stale_token``, 404 ``unknown_role``, 400 ``invalid_role_name``)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message


class Unreachable(Exception):
    """The node could not be reached or said nothing in time."""


@dataclass(frozen=True)
class Event:
    """One Server-Sent Event: ``id`` (the node's sequence number, a string as sent), ``event``
    (its type: ``leader``, ``granted``, ``released``, ``revoked``, ``lost``, ``role``,
    ``synced``, ``reset``, ``gap``) and ``data`` (its JSON)."""

    id: Optional[str]
    event: str
    data: Json


def check_name(name: str) -> str:
    """``name`` if it is a role name (1-128 ASCII letters, digits, ``.``, ``_``, ``-``,
    starting with a letter or a digit), else :class:`ValueError` naming the rule broken."""
    if not name:
        raise ValueError("a role name is empty")
    if len(name) > 128:
        raise ValueError(f"a role name is at most 128 bytes long, not {len(name)}")
    if not (name[0].isascii() and name[0].isalnum()):
        raise ValueError(f"a role name starts with a letter or a digit, not {name[0]!r}")
    for c in name:
        if not (c.isascii() and (c.isalnum() or c in "._-")):
            raise ValueError(f"a role name holds only ASCII letters, digits, '.', '_' and '-', not {c!r}")
    return name


class Client:
    """The API of the node at ``node`` (``host:port``). Every request ends after ``timeout``
    seconds unless it says otherwise. ``admin_token`` goes with the admin requests and the
    role changes (a node's own candidacy and resign need none from its own host: see
    ``own_host``).

    ``own_host``: connect from the address the node is reached on, so that the node takes this
    client for an application on its own host (its candidacies, resigns and ``max_roles``
    need no admin token then). By default this is done for a loopback address
    (127.0.0.0/8, ::1), where it always works."""

    def __init__(
        self,
        node: str = "127.0.0.1:7001",
        timeout: float = 2.0,
        admin_token: Optional[str] = None,
        own_host: Optional[bool] = None,
    ) -> None:
        host, sep, port = node.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"node {node!r} is not host:port")
        self.host = host.strip("[]")
        self.port = int(port)
        self.node = node
        self.timeout = timeout
        self.admin_token = admin_token
        if own_host is None:
            try:
                own_host = ipaddress.ip_address(self.host).is_loopback
            except ValueError:
                own_host = False
        self.own_host = own_host

    # -- the transport ------------------------------------------------------------------

    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        source: Optional[Tuple[str, int]] = (self.host, 0) if self.own_host else None
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout, source_address=source)

    def request(
        self,
        method: str,
        path: str,
        body: Optional[Json] = None,
        admin: bool = False,
        timeout: Optional[float] = None,
        ok: Tuple[int, ...] = (200,),
    ) -> Tuple[int, Json]:
        """One request: the status and the JSON body of an answer whose status is in ``ok``;
        :class:`ElectdError` for any other, :class:`Unreachable` when no answer came."""
        headers = {"Accept": "application/json"}
        payload: Optional[bytes] = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if admin and self.admin_token is not None:
            headers["Authorization"] = f"Bearer {self.admin_token}"
        limit = self.timeout if timeout is None else max(timeout, 0.001)
        # A socket's timeout bounds each operation, not the request: each phase gets what is
        # left of ``limit``.
        end = time.monotonic() + limit
        conn = self._connect(limit)
        try:
            conn.request(method, path, body=payload, headers=headers)
            if conn.sock is not None:
                conn.sock.settimeout(max(end - time.monotonic(), 0.001))
            res = conn.getresponse()
            if conn.sock is not None:
                conn.sock.settimeout(max(end - time.monotonic(), 0.001))
            raw = res.read()
        except (OSError, http.client.HTTPException) as e:
            raise Unreachable(f"{self.node}: {method} {path}: {e}") from e
        finally:
            conn.close()
        try:
            data = json.loads(raw) if raw else {}
        except ValueError as e:
            raise Unreachable(f"{self.node}: {method} {path}: not JSON ({res.status}): {raw[:200]!r}") from e
        if res.status in ok:
            return res.status, data
        err = data.get("error", {}) if isinstance(data, dict) else {}
        raise ElectdError(res.status, str(err.get("code", "unknown")), str(err.get("message", raw[:200])))

    # -- the cluster's own election -----------------------------------------------------

    def leader(self) -> Json:
        """``GET /v1/leader``: this node's view (``node_id``, ``role``, ``term``, ``leader``,
        ``lease_ms``)."""
        return self.request("GET", "/v1/leader")[1]

    def claim(self, timeout: Optional[float] = None) -> Tuple[bool, Json]:
        """``GET /v1/claim``: whether this node holds the cluster's claim (200) or not (503),
        and its view. A 200's ``lease_ms`` is a promise from the instant the request was sent:
        :class:`electd.Election` keeps it."""
        status, data = self.request("GET", "/v1/claim", timeout=timeout, ok=(200, 503))
        return status == 200, data

    def resign(self, to: Optional[int] = None) -> Json:
        """``POST /v1/admin/resign`` (the admin token): the leader hands over, to ``to`` if
        given."""
        body = None if to is None else {"to": to}
        return self.request("POST", "/v1/admin/resign", body=body, admin=True)[1]

    def health(self) -> Json:
        """``GET /v1/health``."""
        return self.request("GET", "/v1/health")[1]

    # -- named roles ----------------------------------------------------------------------

    def role_claim(self, name: str, timeout: Optional[float] = None) -> Tuple[bool, Json]:
        """``GET /v1/claim/{name}``: whether this node holds the role's claim (200: ``token``
        and ``lease_ms``, a promise from the send instant) or not (503, ``lease_ms`` 0)."""
        path = f"/v1/claim/{check_name(name)}"
        status, data = self.request("GET", path, timeout=timeout, ok=(200, 503))
        return status == 200, data

    def roles(self, prefix: Optional[str] = None) -> List[Json]:
        """``GET /v1/roles``, every page: each role's ``name``, ``candidates``, ``holder`` and
        ``token`` as this node's applied log has them."""
        out: List[Json] = []
        after: Optional[str] = None
        for _ in range(100_000):
            query = {"limit": "1000"}
            if prefix is not None:
                query["prefix"] = prefix
            if after is not None:
                query["after"] = after
            page = self.request("GET", "/v1/roles?" + urllib.parse.urlencode(query))[1]
            out.extend(page["roles"])
            after = page.get("next")
            if after is None:
                break
        return out

    def stand(self, name: str, node_id: int, stands: bool = True) -> Json:
        """``PUT`` (or, ``stands=False``, ``DELETE``) ``/v1/roles/{name}/candidates/{id}``:
        answers the role once the change is applied."""
        path = f"/v1/roles/{check_name(name)}/candidates/{node_id}"
        return self.request("PUT" if stands else "DELETE", path, admin=True)[1]

    def resign_role(self, name: str, token: int) -> Json:
        """``POST /v1/roles/{name}/resign``: gives up grant ``token`` once its promises have
        ended; idempotent; 409 ``stale_token`` for a token that is not the current grant."""
        path = f"/v1/roles/{check_name(name)}/resign"
        return self.request("POST", path, body={"token": token}, admin=True)[1]

    # -- streams --------------------------------------------------------------------------

    def watch(self, since: Optional[str] = None, give_up: float = 30.0) -> Stream:
        """``GET /v1/watch``: this node's view, then every change; resumes after the last
        event read when the stream breaks, until the node has been unreachable for
        ``give_up`` seconds (then :class:`Unreachable`)."""
        return self._stream("/v1/watch", since, give_up)

    def role_watch(
        self,
        names: Optional[List[str]] = None,
        prefix: Optional[str] = None,
        since: Optional[str] = None,
        give_up: float = 30.0,
    ) -> Stream:
        """``GET /v1/roles/watch``: each watched role's state (``role``), ``synced``, then
        ``granted``, ``released``, ``revoked`` and ``lost``; resumes as :meth:`watch`."""
        query = {}
        if names is not None:
            query["names"] = ",".join(check_name(n) for n in names)
        if prefix is not None:
            query["prefix"] = prefix
        path = "/v1/roles/watch" + ("?" + urllib.parse.urlencode(query) if query else "")
        return self._stream(path, since, give_up)

    def _stream(self, path: str, since: Optional[str], give_up: float) -> Stream:
        last = since
        down_since: Optional[float] = None
        pause = 0.05
        for _ in range(1_000_000):
            try:
                for ev in self._one_stream(path, last):
                    down_since, pause = None, 0.05
                    if ev.id is not None:
                        last = ev.id
                    yield ev
            except ElectdError:
                raise
            except Unreachable:
                pass
            now = time.monotonic()
            down_since = now if down_since is None else down_since
            if now - down_since >= give_up:
                raise Unreachable(f"{self.node}: {path}: no stream for {give_up} s")
            time.sleep(pause)
            pause = min(pause * 2, 1.0)

    def _one_stream(self, path: str, last: Optional[str]) -> Iterator[Event]:
        # The node sends a keep-alive every 5 s: 15 s of silence is a node gone.
        conn = self._connect(15.0)
        headers = {"Accept": "text/event-stream"}
        if last is not None:
            headers["Last-Event-ID"] = last
        try:
            try:
                conn.request("GET", path, headers=headers)
                res = conn.getresponse()
            except (OSError, http.client.HTTPException) as e:
                raise Unreachable(f"{self.node}: GET {path}: {e}") from e
            if res.status != 200:
                raw = res.read()
                err = json.loads(raw).get("error", {}) if raw else {}
                raise ElectdError(res.status, str(err.get("code", "unknown")), str(err.get("message", "")))
            yield from _events(res)
        finally:
            conn.close()


def _events(res: http.client.HTTPResponse) -> Iterator[Event]:
    """The events of an SSE body, until it ends (:class:`Unreachable` when it breaks)."""
    ev_id: Optional[str] = None
    ev_type = "message"
    data: List[str] = []
    while True:
        try:
            line = res.readline()
        except (OSError, http.client.HTTPException) as e:
            raise Unreachable(f"the stream broke: {e}") from e
        if not line:
            raise Unreachable("the stream ended")
        text = line.decode().rstrip("\r\n")
        if text == "":
            if data:
                yield Event(ev_id, ev_type, json.loads("\n".join(data)))
            ev_type, data = "message", []
            continue
        if text.startswith(":"):
            continue
        field, _, value = text.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "id":
            ev_id = value
        elif field == "event":
            ev_type = value
        elif field == "data":
            data.append(value)

