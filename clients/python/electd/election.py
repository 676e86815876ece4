"""Leadership as a promise, kept on a local timer: :class:`Promise` (I/O-free: what the answers
promise and when the holding ends) and :class:`Election` (asks the node, keeps the promise,
calls back).

A node that answers ``GET /v1/claim`` (or ``GET /v1/claim/{name}``) with 200 and ``lease_ms``
``m`` to a question sent at instant ``s`` holds its claim until ``s + m``, whatever happens
after (docs/applications.md, "The promise"). So the deadline is counted from the instant
*before the request was sent*, never from the answer's arrival, which may come late; it is
kept on ``CLOCK_BOOTTIME`` (which counts a suspended host's sleep, as the node's lease does)
where the platform has it, and a timer of the election's own ends the holding at the deadline
even when the network says nothing. The deadline is the end of the latest promise *of one
token* (the term of the cluster's claim, a role's grant), less a margin the application needs
to stop: an answer with another token never extends it, and the holding of the old token ends
there (``on_lost``) before the new one begins (``on_elected``), as ``electd run`` stops and
restarts its command.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

from ._http import Client, ElectdError, Unreachable, check_name


class NoPromise(Exception):
    """The node's mode promises nothing (bully, ring, invitation): its answers carry no
    ``lease_ms``, so no holding could ever be kept."""

_BOOTTIME: Optional[int] = getattr(time, "CLOCK_BOOTTIME", None)


def boot_ns() -> int:
    """Now on ``CLOCK_BOOTTIME`` (Linux), in nanoseconds; the monotonic clock elsewhere."""
    if _BOOTTIME is not None:
        return time.clock_gettime_ns(_BOOTTIME)
    return time.monotonic_ns()


@dataclass(frozen=True)
class Change:
    """The holding of ``token`` began (``elected``) or ended (``lost``), with the instants it
    began (the first claiming answer heard) and ends (the deadline, or the instant the node
    said it no longer claims or the application resigned). Two nodes' holdings never overlap:
    the later node's claim began after the earlier node's promise ended, before its answer
    was heard."""

    kind: str
    token: int
    begun_ns: int
    ended_ns: int


class Promise:
    """What the node's answers promise, I/O-free: fed with every answer, the instant its
    question was sent and now; says when a holding begins and ends. ``margin_ns`` is what the
    application needs to stop acting once told: the holding ends that long before the promise
    does. Once the application has resigned a token (:meth:`resign`), answers with that token
    or an older one claim nothing."""

    def __init__(self, margin_ns: int = 0) -> None:
        self.token: Optional[int] = None
        self.begun_ns = 0
        self.deadline_ns = 0
        self.margin_ns = margin_ns
        self._holding = False
        self._resigned: Optional[int] = None

    def unresign(self, token: int) -> None:
        """Takes back a resign of ``token`` the node did not take (it failed): the node still
        holds the grant, and its answers may begin a holding again."""
        if self._resigned == token:
            self._resigned = None

    def held(self, now_ns: int) -> bool:
        """Whether a promise runs at ``now_ns``."""
        return self._holding and now_ns < self.deadline_ns

    def answered(self, sent_ns: int, now_ns: int, claims: bool, token: Optional[int], lease_ms: int) -> List[Change]:
        """The answer to a question sent at ``sent_ns``: the node claims (with ``token`` and
        ``lease_ms``) or not. A refusal ends the holding at once (the node no longer claims: the
        application stops as soon as it hears so); a claim with another token ends the old
        holding and begins a new one; a claim with the same token extends the deadline to
        ``sent_ns + lease_ms``, never beyond."""
        out = self.expire(now_ns)
        resigned = self._resigned is not None and token is not None and token <= self._resigned
        if not claims or token is None or lease_ms <= 0 or resigned:
            return out + self.end(now_ns)
        end = sent_ns + lease_ms * 1_000_000 - self.margin_ns
        if self._holding and token != self.token:
            out += self.end(now_ns)
        if end <= now_ns:
            return out
        if self._holding:
            self.deadline_ns = max(self.deadline_ns, end)
            return out
        # The holding begins as the answer is heard: the node's claim may have begun after the
        # question was sent (its promise still runs to sent + lease, which the claim outlasts).
        self._holding, self.token, self.begun_ns, self.deadline_ns = True, token, now_ns, end
        return out + [Change("elected", token, now_ns, end)]

    def expire(self, now_ns: int) -> List[Change]:
        """The holding ends if its deadline has come."""
        if self._holding and now_ns >= self.deadline_ns:
            self._holding = False
            assert self.token is not None
            return [Change("lost", self.token, self.begun_ns, self.deadline_ns)]
        return []

    def end(self, now_ns: int) -> List[Change]:
        """The holding ends now (a refusal, a new token, a resign), if it runs."""
        out = self.expire(now_ns)
        if self._holding:
            self._holding = False
            self.deadline_ns = min(self.deadline_ns, now_ns)
            assert self.token is not None
            out.append(Change("lost", self.token, self.begun_ns, self.deadline_ns))
        return out

    def resign(self, now_ns: int) -> Tuple[List[Change], Optional[int]]:
        """The holding ends now, and the token to give up: the last one heard, even when its
        promise has run out here (the node may still hold the grant). No answer with that token
        or an older one begins a holding again, not even one to a question sent before."""
        if self.token is not None:
            self._resigned = max(self.token, self._resigned or 0)
        return self.end(now_ns), self.token


Callback = Callable[[int], None]


class Election:
    """The cluster's election (``name=None``) or the named role ``name``, as seen from the node
    at ``node`` beside the application.

    ``with Election("scheduler") as e:`` stands the node for the role (``stand=True``; from the
    node's own host no admin token is needed), keeps asking ``GET /v1/claim/{name}`` every
    ``poll`` seconds on a thread of its own, and on leaving withdraws the node and gives the
    role up if it holds it. Meanwhile ``e.held()`` says whether the application may act as the
    holder now, ``e.token`` is the fencing token to pass to what it writes to (the role's
    grant; the cluster's term), ``on_elected(token)`` is called when a holding begins and
    ``on_lost(token)`` when it ends: ``margin`` seconds before the promise's deadline by the
    election's own timer, whether or not the node answers, or at once when the node says it no
    longer claims. Callbacks run in order, one at a time, on a thread of their own, after
    ``held()`` has turned: a slow callback delays the next callback, never the end of a
    holding, and a callback may call :meth:`resign` or :meth:`stop`. An exception a callback
    raises is logged (logger ``electd``) and the next callback still runs. A node whose mode
    promises nothing makes :meth:`start` raise :class:`NoPromise`. An election starts once.
    """

    def __init__(
        self,
        name: Optional[str] = None,
        node: str = "127.0.0.1:7001",
        *,
        stand: bool = True,
        poll: float = 0.02,
        timeout: float = 1.0,
        margin: float = 0.005,
        admin_token: Optional[str] = None,
        on_elected: Optional[Callback] = None,
        on_lost: Optional[Callback] = None,
        client: Optional[Client] = None,
        clock: Callable[[], int] = boot_ns,
    ) -> None:
        if margin < 0:
            raise ValueError(f"margin {margin} is negative: it would stretch the promise")
        self.name = None if name is None else check_name(name)
        self.client = client if client is not None else Client(node, timeout=timeout, admin_token=admin_token)
        self.stand_for = stand and name is not None
        self.poll = poll
        self.on_elected = on_elected
        self.on_lost = on_lost
        self.clock = clock
        self.node_id: Optional[int] = None
        self.history: List[Change] = []
        self._promise = Promise(round(margin * 1e9))
        self._cond = threading.Condition()
        self._pending: List[Change] = []
        self._stopped = False  # no answer begins a holding
        self._closing = False  # the callbacks' thread ends once nothing is queued
        self._calling: Optional[threading.Thread] = None
        self._stop = threading.Event()
        self._threads: List[threading.Thread] = []

    # -- what the application reads ----------------------------------------------------------

    def held(self) -> bool:
        """Whether a promise runs now: the application may act as the holder."""
        with self._cond:
            return self._promise.held(self.clock())

    @property
    def token(self) -> Optional[int]:
        """The fencing token of the running holding, or ``None``."""
        with self._cond:
            return self._promise.token if self._promise.held(self.clock()) else None

    def time_left(self) -> float:
        """Seconds until the running promise ends (0 when none runs)."""
        with self._cond:
            now = self.clock()
            return max(self._promise.deadline_ns - now, 0) / 1e9 if self._promise.held(now) else 0.0

    def wait(self, timeout: float) -> bool:
        """Waits until a promise runs, at most ``timeout`` seconds; whether one runs."""
        end = time.monotonic() + timeout
        with self._cond:
            while not self._promise.held(self.clock()):
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.05))
            return True

    # -- one question ---------------------------------------------------------------------

    def ask(self) -> bool:
        """Asks the node once; whether a promise runs after its answer. The question waits no
        longer than the running promise has left (nor than the client's timeout)."""
        if self.node_id is None:
            self.node_id = int(self.client.leader()["node_id"])
        left = self.time_left()
        timeout = min(self.client.timeout, left) if left > 0 else self.client.timeout
        sent = self.clock()
        try:
            if self.name is None:
                claims, body = self.client.claim(timeout=timeout)
                node, token = body.get("node_id"), body.get("term")
            else:
                claims, body = self.client.role_claim(self.name, timeout=timeout)
                node, token = body.get("node"), body.get("token")
        except Unreachable:
            # Nothing said: the running promise still runs, to its deadline.
            self._step(lambda now: [])
            return self.held()
        except ElectdError:
            claims, node, token, body = False, None, None, {}
        # An answer from another node (a load-balanced address) claims nothing for this one.
        mine = claims and node == self.node_id
        lease = int(body.get("lease_ms") or 0)
        # Once the election has stopped, no answer begins a holding.
        self._step(lambda now: [] if self._stopped else self._promise.answered(sent, now, mine, token, lease))
        return self.held()

    def _step(self, step: Callable[[int], List[Change]]) -> None:
        """Steps the promise under the lock (``step`` gets now) and queues the changes for the
        callbacks' thread."""
        with self._cond:
            now = self.clock()
            changes = self._promise.expire(now) + step(now)
            self.history.extend(changes)
            self._pending.extend(changes)
            self._cond.notify_all()

    def _calls(self) -> None:
        """The callbacks' thread: calls back for every change queued, in order, one at a time,
        until the election stops and nothing is left."""
        while True:
            with self._cond:
                while not self._pending and not self._closing:
                    self._cond.wait()
                if not self._pending:
                    return
                c = self._pending.pop(0)
            callback = self.on_lost if c.kind == "lost" else self.on_elected
            if callback is None:
                continue
            try:
                callback(c.token)
            except Exception:
                logging.getLogger("electd").exception("the %s callback of token %d raised", c.kind, c.token)

    # -- the threads ----------------------------------------------------------------------

    def start(self) -> "Election":
        """Stands the node for the role (when asked to) and starts asking, the timer and the
        callbacks' thread. An election starts once: after :meth:`stop`, make a new one."""
        if self._calling is not None:
            raise RuntimeError("an Election starts once: make a new one")
        view = self.client.leader()
        if view.get("no_promise"):
            raise NoPromise(str(view["no_promise"]))
        self.node_id = int(view["node_id"])
        if self.stand_for:
            assert self.name is not None and self.node_id is not None
            self.client.stand(self.name, self.node_id, True)
        self._threads = [
            threading.Thread(target=self._asking, name="electd-ask", daemon=True),
            threading.Thread(target=self._timer, name="electd-timer", daemon=True),
        ]
        self._calling = threading.Thread(target=self._calls, name="electd-callbacks", daemon=True)
        for t in self._threads + [self._calling]:
            t.start()
        return self

    def stop(self) -> None:
        """Stops asking; ends the holding (``on_lost``); withdraws the node from the role and
        gives the role up if it holds it (when it stood for it). Called from outside a callback,
        it returns once the election's threads have ended and ``on_lost`` has been called; from
        a callback, ``on_lost`` follows that callback."""
        with self._cond:
            self._stopped = True
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        for t in self._threads:
            t.join(timeout=5)
        self._step(self._promise.end)
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        calling = self._calling
        if calling is not None and calling is not threading.current_thread():
            calling.join(timeout=5)
        if self.stand_for and self.name is not None and self.node_id is not None:
            try:
                self.client.stand(self.name, self.node_id, False)
                claims, body = self.client.role_claim(self.name)
                if claims and body.get("token") is not None:
                    self.client.resign_role(self.name, int(body["token"]))
            except (Unreachable, ElectdError):
                pass

    def resign(self) -> None:
        """Gives the holding up: ends it here first (``held()`` turns false, ``on_lost`` is
        queued), then asks the node to resign the role's grant or, for the cluster's election,
        to hand over (the admin token). For a role it gives up the last token heard even when
        its promise has run out here (the node may still hold the grant); a grant that has
        already moved on (409 ``stale_token``) is given up already. No answer with the token
        resigned begins a holding again, unless the resign fails."""
        resigned: List[Optional[int]] = []

        def step(now: int) -> List[Change]:
            if self.name is None and not self._promise.held(now):
                resigned.append(None)
                return self._promise.end(now)
            changes, token = self._promise.resign(now)
            resigned.append(token)
            return changes

        self._step(step)
        token = resigned[0]
        if token is None:
            return
        try:
            if self.name is None:
                self.client.resign()
            else:
                self.client.resign_role(self.name, token)
        except ElectdError as e:
            if self.name is not None and e.code == "stale_token":
                return
            with self._cond:
                self._promise.unresign(token)
            raise
        except Unreachable:
            with self._cond:
                self._promise.unresign(token)
            raise

    def __enter__(self) -> "Election":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _asking(self) -> None:
        while not self._stop.is_set():
            try:
                self.ask()
            except (Unreachable, ElectdError):
                pass
            self._stop.wait(self.poll)

    def _timer(self) -> None:
        # Wakes at the deadline, or every 50 ms at most: a wait is timed on the monotonic
        # clock, which stands still while the host is suspended, and a deadline that passed
        # in a suspend is enforced within 50 ms of the resume.
        while not self._stop.is_set():
            with self._cond:
                now = self.clock()
                left = (self._promise.deadline_ns - now) / 1e9 if self._promise.held(now) else 0.05
                self._cond.wait(min(max(left, 0.0), 0.05))
            self._step(lambda now: [])
