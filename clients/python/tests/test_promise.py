"""The promise arithmetic, without a network: a fake node and a fake clock."""

from __future__ import annotations

import threading
import time
import unittest
from typing import Any, Dict, List, Optional, Tuple

from electd import Change, Client, ElectdError, Election, NoPromise, Promise, Unreachable

MS = 1_000_000


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000 * MS

    def __call__(self) -> int:
        return self.now


class FakeNode(Client):
    """Answers role claims from a script; each answer takes ``delay_ns`` of the fake clock
    (the network's delay), and records the timeout each question was given. With ``hang``,
    a question after the script waits until ``release`` is set, whatever its timeout: only
    the election's timer can end a holding then."""

    def __init__(
        self,
        clock: FakeClock,
        answers: List[Tuple[bool, Dict[str, Any]]],
        delay_ns: int = 0,
        hang: bool = False,
        no_promise: Optional[str] = None,
    ) -> None:
        super().__init__("127.0.0.1:1", timeout=1.0)
        self.clock = clock
        self.answers = answers
        self.delay_ns = delay_ns
        self.hang = hang
        self.release = threading.Event()
        self.no_promise = no_promise
        self.timeouts: List[Optional[float]] = []
        self.resigned: List[int] = []
        self.stale = False

    def leader(self) -> Dict[str, Any]:
        if self.no_promise is not None:
            return {"node_id": 2, "no_promise": self.no_promise}
        return {"node_id": 2}

    def role_claim(self, name: str, timeout: Optional[float] = None) -> Tuple[bool, Dict[str, Any]]:
        if not self.answers and self.hang:
            self.release.wait(10)
            raise Unreachable("released")
        self.timeouts.append(timeout)
        self.clock.now += self.delay_ns
        if not self.answers:
            raise Unreachable("silent")
        return self.answers.pop(0)

    def resign_role(self, name: str, token: int) -> Dict[str, Any]:
        self.resigned.append(token)
        if self.stale:
            raise ElectdError(409, "stale_token", "not the current grant")
        return {"name": name, "token": token, "released": True}


def claim(token: int, lease_ms: int, node: int = 2) -> Tuple[bool, Dict[str, Any]]:
    return True, {"name": "job", "node": node, "token": token, "lease_ms": lease_ms}


def refused() -> Tuple[bool, Dict[str, Any]]:
    return False, {"name": "job", "node": 3, "token": 9, "lease_ms": 0}


class PromiseTest(unittest.TestCase):
    def test_the_deadline_counts_from_the_send_instant(self) -> None:
        p = Promise()
        changes = p.answered(sent_ns=1_000 * MS, now_ns=1_050 * MS, claims=True, token=4, lease_ms=120)
        self.assertEqual(changes, [Change("elected", 4, 1_050 * MS, 1_120 * MS)])
        self.assertTrue(p.held(1_119 * MS))
        self.assertFalse(p.held(1_120 * MS))

    def test_a_new_token_ends_the_old_holding_and_never_extends_it(self) -> None:
        p = Promise()
        p.answered(1_000 * MS, 1_001 * MS, True, 4, 120)
        changes = p.answered(1_050 * MS, 1_060 * MS, True, 5, 120)
        self.assertEqual([c.kind for c in changes], ["lost", "elected"])
        self.assertEqual(changes[0].ended_ns, 1_060 * MS)
        self.assertEqual(p.token, 5)
        self.assertEqual(p.deadline_ns, 1_170 * MS)

    def test_a_refusal_ends_the_holding_at_once(self) -> None:
        p = Promise()
        p.answered(1_000 * MS, 1_001 * MS, True, 4, 120)
        changes = p.answered(1_010 * MS, 1_020 * MS, False, None, 0)
        self.assertEqual(changes, [Change("lost", 4, 1_001 * MS, 1_020 * MS)])
        self.assertFalse(p.held(1_021 * MS))

    def test_an_answer_that_comes_after_its_promise_holds_nothing(self) -> None:
        p = Promise()
        self.assertEqual(p.answered(1_000 * MS, 1_200 * MS, True, 4, 120), [])
        self.assertFalse(p.held(1_200 * MS))

    def test_renewals_extend_to_the_latest_send_plus_lease(self) -> None:
        p = Promise()
        p.answered(1_000 * MS, 1_010 * MS, True, 4, 120)
        p.answered(1_050 * MS, 1_090 * MS, True, 4, 100)
        self.assertEqual(p.deadline_ns, 1_150 * MS)
        # An older question answered last never shortens it.
        p.answered(1_020 * MS, 1_095 * MS, True, 4, 100)
        self.assertEqual(p.deadline_ns, 1_150 * MS)

    def test_no_answer_restarts_a_resigned_token(self) -> None:
        """An answer to a question sent before the resign begins no holding of the resigned
        token; a later grant does. The margin ends the holding early."""
        p = Promise(margin_ns=5 * MS)
        p.answered(1_000 * MS, 1_001 * MS, True, 4, 120)
        self.assertEqual(p.deadline_ns, 1_115 * MS)
        changes, token = p.resign(1_010 * MS)
        self.assertEqual((token, [c.kind for c in changes]), (4, ["lost"]))
        self.assertEqual(p.answered(1_005 * MS, 1_012 * MS, True, 4, 120), [])
        self.assertFalse(p.held(1_013 * MS))
        self.assertEqual([c.kind for c in p.answered(1_020 * MS, 1_021 * MS, True, 9, 120)], ["elected"])


class ElectionTest(unittest.TestCase):
    def test_the_election_counts_from_before_the_request_not_its_answer(self) -> None:
        """Fails if the deadline is computed from the receive instant: the answer takes 50 ms."""
        clock = FakeClock()
        node = FakeNode(clock, [claim(7, 120)], delay_ns=50 * MS)
        e = Election("job", client=node, clock=clock, margin=0.005)
        sent = clock.now
        self.assertTrue(e.ask())
        self.assertEqual(e.token, 7)
        self.assertEqual(e.history[-1].ended_ns, sent + 115 * MS)
        clock.now = sent + 115 * MS - 1
        self.assertTrue(e.held())
        clock.now = sent + 115 * MS
        self.assertFalse(e.held())
        self.assertIsNone(e.token)

    def test_a_question_waits_no_longer_than_the_promise_has_left(self) -> None:
        clock = FakeClock()
        node = FakeNode(clock, [claim(7, 120), claim(7, 120)], delay_ns=20 * MS)
        e = Election("job", client=node, clock=clock, margin=0.005)
        e.ask()
        e.ask()
        self.assertEqual(node.timeouts[0], 1.0)
        left = node.timeouts[1]
        assert left is not None
        self.assertAlmostEqual(left, 0.095, places=6)

    def test_an_answer_of_another_node_claims_nothing(self) -> None:
        clock = FakeClock()
        node = FakeNode(clock, [claim(7, 120, node=3)])
        e = Election("job", client=node, clock=clock)
        self.assertFalse(e.ask())

    def test_on_lost_comes_from_the_timer_while_the_network_is_silent(self) -> None:
        """Real clock and threads: one answer, then a question that never comes back: on_lost
        at the deadline, not before, within a bound."""
        lost: List[Tuple[int, int]] = []
        done = threading.Event()
        node = FakeNode(FakeClock(), [claim(7, 150)], hang=True)  # the answer takes no time

        def on_lost(token: int) -> None:
            lost.append((token, e.clock()))
            done.set()

        e = Election("job", client=node, stand=False, on_lost=on_lost, poll=0.01)
        with e:
            try:
                self.assertTrue(e.wait(2.0))
                deadline = e.history[-1].ended_ns
                self.assertTrue(done.wait(2.0), "on_lost was not called within 2 s")
            finally:
                node.release.set()
        self.assertEqual(lost[0][0], 7)
        self.assertGreaterEqual(lost[0][1], deadline, "on_lost came before the deadline")
        self.assertLess(lost[0][1] - deadline, 500 * MS, "on_lost came more than 500 ms late")

    def test_resign_ends_the_holding_before_it_asks(self) -> None:
        clock = FakeClock()
        order: List[str] = []

        class Resigning(FakeNode):
            def resign_role(self, name: str, token: int) -> Dict[str, Any]:
                order.append(f"resign {token} (held {e.held()})")
                return {"name": name, "token": token, "released": True}

        node = Resigning(clock, [claim(7, 120)])
        e = Election("job", client=node, clock=clock)
        e.ask()
        e.resign()
        self.assertEqual(order, ["resign 7 (held False)"])
        self.assertEqual([c.kind for c in e.history], ["elected", "lost"])

    def test_a_failed_resign_takes_nothing_back(self) -> None:
        """The node did not take the resign: it still holds the token, which may be held
        again."""
        clock = FakeClock()

        class Failing(FakeNode):
            def resign_role(self, name: str, token: int) -> Dict[str, Any]:
                raise Unreachable("cut")

        node = Failing(clock, [claim(7, 120), claim(7, 120)])
        e = Election("job", client=node, clock=clock)
        e.ask()
        with self.assertRaises(Unreachable):
            e.resign()
        self.assertTrue(e.ask(), "the token resigned in vain is not held again")

    def test_an_election_starts_once_and_a_negative_margin_is_refused(self) -> None:
        node = FakeNode(FakeClock(), [], hang=True)
        e = Election("job", client=node, stand=False)
        e.start()
        try:
            with self.assertRaises(RuntimeError):
                e.start()
        finally:
            node.release.set()
            e.stop()
        with self.assertRaises(ValueError):
            Election("job", client=node, margin=-0.001)


    def test_a_slow_callback_delays_no_end(self) -> None:
        """A slow on_elected delays no end: held() turns false at the deadline while the
        callback still runs; on_lost follows it."""
        release, lost = threading.Event(), threading.Event()
        node = FakeNode(FakeClock(), [claim(7, 150)], hang=True)
        e = Election("job", client=node, stand=False, poll=0.01)

        def on_elected(token: int) -> None:
            release.wait(5)

        e.on_elected = on_elected
        e.on_lost = lambda t: lost.set()
        with e:
            try:
                self.assertTrue(e.wait(2.0))
                end = time.monotonic() + 1.0
                while e.held() and time.monotonic() < end:
                    time.sleep(0.005)
                self.assertFalse(e.held(), "held past its promise while on_elected ran")
                self.assertFalse(lost.is_set())
                release.set()
                self.assertTrue(lost.wait(2.0), "no on_lost within 2 s of on_elected's return")
            finally:
                release.set()
                node.release.set()

    def test_a_callback_may_resign_or_stop(self) -> None:
        for stop in (False, True):
            returned, lost = threading.Event(), threading.Event()
            node = FakeNode(FakeClock(), [claim(7, 150)], hang=True)
            e = Election("job", client=node, stand=False, poll=0.01)

            def on_elected(token: int, e: Election = e, stop: bool = stop) -> None:
                if stop:
                    e.stop()
                else:
                    e.resign()
                returned.set()

            e.on_elected = on_elected
            e.on_lost = lambda t: lost.set()
            e.start()
            try:
                self.assertTrue(returned.wait(2.0), f"stop={stop}: the call from on_elected did not return")
                self.assertTrue(lost.wait(2.0), f"stop={stop}: no on_lost")
                if not stop:
                    self.assertEqual(node.resigned, [7])
            finally:
                node.release.set()
                e.stop()

    def test_resign_after_the_local_deadline_still_gives_the_grant_up(self) -> None:
        """The node may still hold a grant whose promise ran out here; a grant already moved
        on (409 stale_token) is not an error."""
        clock = FakeClock()
        node = FakeNode(clock, [claim(7, 120)])
        node.stale = True
        e = Election("job", client=node, clock=clock)
        e.ask()
        clock.now += 200 * MS
        e.resign()
        self.assertEqual(node.resigned, [7])

    def test_start_refuses_a_mode_that_promises_nothing(self) -> None:
        node = FakeNode(FakeClock(), [], no_promise="bully mode has no lease")
        with self.assertRaises(NoPromise):
            Election(None, client=node).start()


if __name__ == "__main__":
    unittest.main()
