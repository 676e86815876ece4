"""The promise arithmetic, without a network: a fake node and a fake clock."""

from __future__ import annotations

import threading
import unittest
from typing import Any, Dict, List, Optional, Tuple

from electd import Change, Client, Election, Promise, Unreachable

MS = 1_000_000


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000 * MS

    def __call__(self) -> int:
        return self.now


class FakeNode(Client):
    """Answers role claims from a script; each answer takes ``delay_ns`` of the fake clock
    (the network's delay), and records the timeout each question was given."""

    def __init__(self, clock: FakeClock, answers: List[Tuple[bool, Dict[str, Any]]], delay_ns: int = 0) -> None:
        super().__init__("127.0.0.1:1", timeout=1.0)
        self.clock = clock
        self.answers = answers
        self.delay_ns = delay_ns
        self.timeouts: List[Optional[float]] = []

    def leader(self) -> Dict[str, Any]:
        return {"node_id": 2}

    def role_claim(self, name: str, timeout: Optional[float] = None) -> Tuple[bool, Dict[str, Any]]:
        self.timeouts.append(timeout)
        self.clock.now += self.delay_ns
        if not self.answers:
            raise Unreachable("silent")
        return self.answers.pop(0)


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


class ElectionTest(unittest.TestCase):
    def test_the_election_counts_from_before_the_request_not_its_answer(self) -> None:
        """Fails if the deadline is computed from the receive instant: the answer takes 50 ms."""
        clock = FakeClock()
        node = FakeNode(clock, [claim(7, 120)], delay_ns=50 * MS)
        e = Election("job", client=node, clock=clock)
        sent = clock.now
        self.assertTrue(e.ask())
        self.assertEqual(e.token, 7)
        self.assertEqual(e.history[-1].ended_ns, sent + 120 * MS)
        clock.now = sent + 120 * MS - 1
        self.assertTrue(e.held())
        clock.now = sent + 120 * MS
        self.assertFalse(e.held())
        self.assertIsNone(e.token)

    def test_a_question_waits_no_longer_than_the_promise_has_left(self) -> None:
        clock = FakeClock()
        node = FakeNode(clock, [claim(7, 120), claim(7, 120)], delay_ns=20 * MS)
        e = Election("job", client=node, clock=clock)
        e.ask()
        e.ask()
        self.assertEqual(node.timeouts[0], 1.0)
        left = node.timeouts[1]
        assert left is not None
        self.assertAlmostEqual(left, 0.100, places=6)

    def test_an_answer_of_another_node_claims_nothing(self) -> None:
        clock = FakeClock()
        node = FakeNode(clock, [claim(7, 120, node=3)])
        e = Election("job", client=node, clock=clock)
        self.assertFalse(e.ask())

    def test_on_lost_comes_from_the_timer_while_the_network_is_silent(self) -> None:
        """Real clock and threads: one answer, then silence; on_lost at the deadline, not
        before, within a bound."""
        lost: List[Tuple[int, int]] = []
        done = threading.Event()
        node = FakeNode(FakeClock(), [claim(7, 150)])  # the answer takes no time

        def on_lost(token: int) -> None:
            lost.append((token, e.clock()))
            done.set()

        e = Election("job", client=node, stand=False, on_lost=on_lost, poll=0.01)
        with e:
            self.assertTrue(e.wait(2.0))
            deadline = e.history[-1].ended_ns
            self.assertTrue(done.wait(2.0), "on_lost was not called within 2 s")
        self.assertEqual(lost[0][0], 7)
        self.assertGreaterEqual(lost[0][1], deadline, "on_lost came before the deadline")
        self.assertLess(lost[0][1] - deadline, 500 * MS, "on_lost came more than 500 ms late")

    def test_resign_ends_the_holding_before_it_asks(self) -> None:
        clock = FakeClock()
        order: List[str] = []

        class Resigning(FakeNode):
            def resign_role(self, name: str, token: int) -> Dict[str, Any]:
                order.append(f"resign {token}")
                return {"name": name, "token": token, "released": True}

        node = Resigning(clock, [claim(7, 120)])
        e = Election("job", client=node, clock=clock, on_lost=lambda t: order.append(f"lost {t}"))
        e.ask()
        e.resign()
        self.assertEqual(order, ["lost 7", "resign 7"])
        self.assertFalse(e.held())


if __name__ == "__main__":
    unittest.main()
