"""Against a live cluster the caller started (lab/tests/clients.rs): ``ELECTD_TEST_NODES``
(``host:port`` of each node, comma-separated, node 1 first), ``ELECTD_TEST_PIDS`` (their
process ids, in the same order: the tests pause a node with SIGSTOP and resume it) and
``ELECTD_TEST_ADMIN_TOKEN``. Without them the tests are skipped (the caller counts a skip as a
failure). Every holding an :class:`Election` saw is judged whole at the end: no two nodes'
holdings of one role or of the cluster's claim overlap."""

from __future__ import annotations

import os
import signal
import time
import unittest
from typing import Callable, Dict, List, Optional, Tuple

from electd import Change, Client, ElectdError, Election, boot_ns

NODES = [n for n in os.environ.get("ELECTD_TEST_NODES", "").split(",") if n]
PIDS = [int(p) for p in os.environ.get("ELECTD_TEST_PIDS", "").split(",") if p]
TOKEN = os.environ.get("ELECTD_TEST_ADMIN_TOKEN")
WAIT = 20.0


def until(what: str, cond: Callable[[], bool], within: float = WAIT) -> None:
    """Waits until ``cond()``, at most ``within`` seconds (asking every 20 ms)."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError(f"not within {within} s: {what}")


def overlaps(holdings: Dict[int, List[Change]]) -> List[str]:
    """Pairs of holdings of different nodes that overlap (each from the first claiming answer
    heard to the end of its last promise)."""
    spans: List[Tuple[int, int, int, int]] = []
    for node, changes in holdings.items():
        spans += [(c.begun_ns, c.ended_ns, node, c.token) for c in changes if c.kind == "lost"]
    spans.sort()
    out = []
    for i, (b1, e1, n1, t1) in enumerate(spans):
        for b2, e2, n2, t2 in spans[i + 1 :]:
            if b2 >= e1:
                break
            if n1 != n2:
                out.append(f"node {n1} token {t1} [{b1}, {e1}) overlaps node {n2} token {t2} [{b2}, {e2})")
    return out


@unittest.skipUnless(NODES and len(PIDS) == len(NODES), "ELECTD_TEST_NODES and ELECTD_TEST_PIDS are not set")
class LiveTest(unittest.TestCase):
    def tearDown(self) -> None:
        for pid in PIDS:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass

    def elections(self, name: Optional[str], stand: bool) -> List[Election]:
        return [Election(name, node, poll=0.02, admin_token=TOKEN, stand=stand) for node in NODES]

    def judge(self, elections: List[Election]) -> None:
        holdings = {i + 1: list(e.history) for i, e in enumerate(elections)}
        self.assertEqual(overlaps(holdings), [])

    def test_the_cluster_claim_is_held_by_the_leader_alone(self) -> None:
        es = self.elections(None, False)
        for e in es:
            e.start()
        try:
            until("one node holds the cluster's claim", lambda: sum(e.held() for e in es) == 1)
            holder = next(i for i, e in enumerate(es) if e.held())
            view = Client(NODES[holder]).leader()
            self.assertEqual(view["role"], "leader")
            self.assertEqual(es[holder].token, view["term"])
        finally:
            for e in es:
                e.stop()
        self.judge(es)

    def test_a_role_moves_when_its_holder_pauses_and_on_lost_fires_on_time(self) -> None:
        name = "py-job"
        lost: Dict[int, List[Tuple[int, int]]] = {}

        def on_lost(i: int) -> Callable[[int], None]:
            return lambda token: lost.setdefault(i, []).append((token, boot_ns()))

        es = [Election(name, node, poll=0.02, on_lost=on_lost(i)) for i, node in enumerate(NODES)]
        for e in es:
            e.start()
        try:
            until("one node holds the role", lambda: sum(e.held() for e in es) == 1)
            first = next(i for i, e in enumerate(es) if e.held())
            token = es[first].token
            assert token is not None
            listed = {r["name"]: r for r in Client(NODES[0]).roles(prefix="py-")}
            self.assertEqual(listed[name]["holder"], first + 1)
            self.assertEqual(listed[name]["token"], token)
            # The holder's node pauses: its questions go unanswered, and the election's own
            # timer ends the holding at the promise's deadline.
            deadline = es[first].history[-1].ended_ns
            os.kill(PIDS[first], signal.SIGSTOP)
            until("the paused holder's on_lost", lambda: first in lost, within=5.0)
            self.assertEqual(lost[first][0][0], token)
            self.assertGreaterEqual(lost[first][0][1], es[first].history[-1].ended_ns)
            self.assertGreaterEqual(es[first].history[-1].ended_ns, deadline)
            until("another node holds the role", lambda: any(e.held() for j, e in enumerate(es) if j != first))
            second = next(j for j, e in enumerate(es) if j != first and e.held())
            new = es[second].token
            assert new is not None
            self.assertGreater(new, token, "the fencing token grows")
            os.kill(PIDS[first], signal.SIGCONT)
            # A resign with the old token changes nothing.
            with self.assertRaises(ElectdError) as refused:
                Client(NODES[second]).resign_role(name, token)
            self.assertEqual((refused.exception.status, refused.exception.code), (409, "stale_token"))
            # The holder resigns: its holding ends before the node is asked, another takes it.
            es[second].resign()
            self.assertFalse(es[second].held())
            until("a third holding begins", lambda: any(t is not None and t != new for t in (e.token for e in es)))
        finally:
            for pid in PIDS:
                os.kill(pid, signal.SIGCONT)
            for e in es:
                e.stop()
        self.judge(es)
        # Each one withdrew as it stopped.
        # A role nobody stands for or holds is gone from the table.
        until("every candidacy withdrawn", lambda: all(r["candidates"] == [] for r in Client(NODES[0]).roles(prefix=name)))

    def test_the_role_watch_resumes_after_the_last_event_read(self) -> None:
        name = "py-watched"
        c = Client(NODES[0], admin_token=TOKEN)
        stream = c.role_watch(names=[name])
        seen = []
        for ev in stream:
            seen.append(ev.event)
            if ev.event == "synced":
                break
        self.assertEqual(seen, ["synced"], "no state of a role nobody stands for")
        c.stand(name, 1)
        granted = next(ev for ev in stream if ev.event == "granted")
        stream.close()
        self.assertEqual((granted.data["name"], granted.data["node"]), (name, 1))
        assert granted.id is not None
        # Withdrawn, the holder keeps the role (no other candidate) until it resigns it.
        c.stand(name, 1, stands=False)
        c.resign_role(name, int(granted.data["token"]))
        # A resumed stream tells what came after the event it resumes from, then `synced`;
        # never the roles' states again.
        kinds = []
        for ev in c.role_watch(names=[name], since=granted.id, give_up=5.0):
            kinds.append(ev.event)
            if ev.event in ("released", "revoked", "role") or len(kinds) > 3:
                break
        self.assertEqual([k for k in kinds if k != "synced"], ["released"], f"resumed after {granted.id}")

    def test_bad_input_is_refused_before_it_is_sent(self) -> None:
        with self.assertRaises(ValueError):
            Election("no/slash", NODES[0])
        with self.assertRaises(ElectdError) as e:
            Client(NODES[0]).request("GET", "/v1/claim/" + "a%2Fb", ok=(200, 503))
        self.assertEqual(e.exception.status // 100, 4)


if __name__ == "__main__":
    unittest.main()
