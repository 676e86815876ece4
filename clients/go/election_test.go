package electd

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

// fakeNode answers role claims from a script; each answer takes delay of the fake clock (the
// network's delay), and it records the timeout each question was given.
type fakeNode struct {
	mu       sync.Mutex
	now      int64
	delay    int64
	answers  []RoleClaim
	timeouts []time.Duration
	resigned []uint64
}

func (f *fakeNode) clock() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeNode) Leader(context.Context) (View, error) { return View{NodeID: 2}, nil }
func (f *fakeNode) Claim(context.Context, time.Duration) (bool, View, error) {
	return false, View{}, fmt.Errorf("%w: not scripted", ErrUnreachable)
}
func (f *fakeNode) RoleClaim(_ context.Context, _ string, timeout time.Duration) (bool, RoleClaim, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.timeouts = append(f.timeouts, timeout)
	f.now += f.delay
	if len(f.answers) == 0 {
		return false, RoleClaim{}, fmt.Errorf("%w: silent", ErrUnreachable)
	}
	a := f.answers[0]
	f.answers = f.answers[1:]
	return a.LeaseMs > 0, a, nil
}
func (f *fakeNode) Stand(context.Context, string, uint64, bool) (Role, error) { return Role{}, nil }
func (f *fakeNode) ResignRole(_ context.Context, name string, token uint64) (Resigned, error) {
	f.resigned = append(f.resigned, token)
	return Resigned{Name: name, Token: token, Released: true}, nil
}
func (f *fakeNode) Resign(context.Context, uint64) error { return nil }

func claim(token, leaseMs, node uint64) RoleClaim {
	return RoleClaim{Name: "job", Node: &node, Token: &token, LeaseMs: leaseMs}
}

func TestTheDeadlineCountsFromTheSendInstant(t *testing.T) {
	var p Promise
	c := p.Answered(1000*ms, 1050*ms, true, 4, 120)
	if len(c) != 1 || c[0] != (Change{Elected: true, Token: 4, Begun: 1050 * ms, Ended: 1120 * ms}) {
		t.Fatalf("changes %+v", c)
	}
	if !p.Held(1119*ms) || p.Held(1120*ms) {
		t.Fatal("held past the send instant + lease, or not up to it")
	}
}

func TestANewTokenEndsTheOldHoldingAndNeverExtendsIt(t *testing.T) {
	var p Promise
	p.Answered(1000*ms, 1001*ms, true, 4, 120)
	c := p.Answered(1050*ms, 1060*ms, true, 5, 120)
	if len(c) != 2 || c[0].Elected || !c[1].Elected || c[0].Ended != 1060*ms {
		t.Fatalf("changes %+v", c)
	}
	if p.Token != 5 || p.Deadline != 1170*ms {
		t.Fatalf("promise %+v", p)
	}
}

func TestARefusalEndsTheHoldingAtOnce(t *testing.T) {
	var p Promise
	p.Answered(1000*ms, 1001*ms, true, 4, 120)
	c := p.Answered(1010*ms, 1020*ms, false, 0, 0)
	if len(c) != 1 || c[0] != (Change{Token: 4, Begun: 1001 * ms, Ended: 1020 * ms}) || p.Held(1021*ms) {
		t.Fatalf("changes %+v", c)
	}
}

func TestRenewalsExtendToTheLatestSendPlusLease(t *testing.T) {
	var p Promise
	p.Answered(1000*ms, 1010*ms, true, 4, 120)
	p.Answered(1050*ms, 1090*ms, true, 4, 100)
	p.Answered(1020*ms, 1095*ms, true, 4, 100)
	if p.Deadline != 1150*ms {
		t.Fatalf("deadline %d", p.Deadline/ms)
	}
}

// Fails if the deadline is computed from the receive instant: the answer takes 50 ms.
func TestTheElectionCountsFromBeforeTheRequestNotItsAnswer(t *testing.T) {
	f := &fakeNode{now: 1000 * ms, delay: 50 * ms, answers: []RoleClaim{claim(7, 120, 2)}}
	e := NewElection(f, "job")
	e.Clock = f.clock
	sent := f.clock()
	if !e.Ask(context.Background()) {
		t.Fatal("not held after a claiming answer")
	}
	if got := e.History()[len(e.History())-1].Ended; got != sent+120*ms {
		t.Fatalf("deadline %d ms after the send, want 120", (got-sent)/ms)
	}
	f.now = sent + 120*ms - 1
	if !e.Held() {
		t.Fatal("not held just before the deadline")
	}
	f.now = sent + 120*ms
	if e.Held() {
		t.Fatal("held at the deadline")
	}
}

func TestAQuestionWaitsNoLongerThanThePromiseHasLeft(t *testing.T) {
	f := &fakeNode{now: 1000 * ms, delay: 20 * ms, answers: []RoleClaim{claim(7, 120, 2), claim(7, 120, 2)}}
	e := NewElection(f, "job")
	e.Clock = f.clock
	e.Ask(context.Background())
	e.Ask(context.Background())
	if f.timeouts[0] != time.Second || f.timeouts[1] != 100*time.Millisecond {
		t.Fatalf("timeouts %v", f.timeouts)
	}
}

func TestAnAnswerOfAnotherNodeClaimsNothing(t *testing.T) {
	f := &fakeNode{now: 1000 * ms, answers: []RoleClaim{claim(7, 120, 3)}}
	e := NewElection(f, "job")
	e.Clock = f.clock
	if e.Ask(context.Background()) {
		t.Fatal("held on another node's answer")
	}
}

// Real clock and goroutines: one answer, then silence; the leadership context is cancelled
// and OnLost called at the deadline, not before, within a bound.
func TestTheLeadershipEndsOnTheTimerWhileTheNetworkIsSilent(t *testing.T) {
	f := &fakeNode{answers: []RoleClaim{claim(7, 150, 2)}}
	e := NewElection(f, "job")
	e.Stand = false
	lost := make(chan int64, 1)
	e.OnLost = func(uint64) { lost <- e.Clock() }
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.Stop(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	lead, token, err := e.Leadership(ctx)
	if err != nil || token != 7 {
		t.Fatalf("no leadership within 2 s: %v", err)
	}
	e.mu.Lock()
	deadline := e.promise.Deadline
	e.mu.Unlock()
	select {
	case <-lead.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("the leadership context was not cancelled within 2 s")
	}
	at := <-lost
	if at < deadline || at-deadline > 500*ms {
		t.Fatalf("OnLost %d ms after the deadline", (at-deadline)/ms)
	}
}

func TestResignEndsTheHoldingBeforeItAsks(t *testing.T) {
	f := &fakeNode{now: 1000 * ms, answers: []RoleClaim{claim(7, 120, 2)}}
	e := NewElection(f, "job")
	e.Clock = f.clock
	var order []string
	e.OnLost = func(tok uint64) { order = append(order, fmt.Sprintf("lost %d (resigned %v)", tok, f.resigned)) }
	e.Ask(context.Background())
	if err := e.Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(order) != 1 || order[0] != "lost 7 (resigned [])" || len(f.resigned) != 1 || e.Held() {
		t.Fatalf("order %v, resigned %v", order, f.resigned)
	}
}

func TestBadNamesAreRefusedBeforeTheyAreSent(t *testing.T) {
	for _, bad := range []string{"", ".x", "a/b", "a b", string(make([]byte, 129))} {
		if CheckName(bad) == nil {
			t.Fatalf("%q taken for a name", bad)
		}
	}
	if CheckName("queue-17") != nil || CheckName("v1.compactor_2") != nil {
		t.Fatal("a good name refused")
	}
}
