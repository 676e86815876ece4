package electd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

// fakeNode answers role claims from a script; each answer takes delay of the fake clock (the
// network's delay), and it records the timeout each question was given.
type fakeNode struct {
	mu        sync.Mutex
	now       int64
	delay     int64
	answers   []RoleClaim
	timeouts  []time.Duration
	resigned  []uint64
	stale     bool   // every resign answers 409 stale_token
	fail      bool   // every resign fails (unreachable)
	onResign  func() // called as a resign arrives
	hang      bool   // once the script is done, a question waits for its context, whatever its timeout
	noPromise string // the mode's no_promise
}

func (f *fakeNode) clock() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeNode) Leader(context.Context) (View, error) {
	v := View{NodeID: 2}
	if f.noPromise != "" {
		v.NoPromise = &f.noPromise
	}
	return v, nil
}
func (f *fakeNode) Claim(context.Context, time.Duration) (bool, View, error) {
	return false, View{}, fmt.Errorf("%w: not scripted", ErrUnreachable)
}
func (f *fakeNode) RoleClaim(ctx context.Context, _ string, timeout time.Duration) (bool, RoleClaim, error) {
	f.mu.Lock()
	if len(f.answers) == 0 && f.hang {
		f.mu.Unlock()
		<-ctx.Done()
		return false, RoleClaim{}, fmt.Errorf("%w: cancelled", ErrUnreachable)
	}
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
	if f.onResign != nil {
		f.onResign()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resigned = append(f.resigned, token)
	if f.fail {
		return Resigned{}, fmt.Errorf("%w: cut", ErrUnreachable)
	}
	if f.stale {
		return Resigned{}, &APIError{Status: 409, Code: "stale_token", Message: "not the current grant"}
	}
	return Resigned{Name: name, Token: token, Released: true}, nil
}

func (f *fakeNode) resigns() []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]uint64(nil), f.resigned...)
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
	deadline := sent + 120*ms - int64(e.Margin)
	if got := e.History()[len(e.History())-1].Ended; got != deadline {
		t.Fatalf("deadline %d ms after the send, want 120 less the margin", (got-sent)/ms)
	}
	f.now = deadline - 1
	if !e.Held() {
		t.Fatal("not held just before the deadline")
	}
	f.now = deadline
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
	if f.timeouts[0] != time.Second || f.timeouts[1] != 100*time.Millisecond-e.Margin {
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

// Real clock and goroutines: one answer, then a question that never comes back (its timeout
// ignored): only the timer can end the holding. The leadership context is cancelled and
// OnLost called at the deadline, not before, within a bound.
func TestTheLeadershipEndsOnTheTimerWhileTheNetworkIsSilent(t *testing.T) {
	f := &fakeNode{answers: []RoleClaim{claim(7, 150, 2)}, hang: true}
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
	e.Ask(context.Background())
	lead, _, err := e.Leadership(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var heldAtResign, cancelledAtResign bool
	f.onResign = func() { heldAtResign, cancelledAtResign = e.Held(), lead.Err() != nil }
	if err := e.Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
	if heldAtResign || !cancelledAtResign || len(f.resigns()) != 1 || e.Held() {
		t.Fatalf("held %v, cancelled %v at the resign; resigned %v", heldAtResign, cancelledAtResign, f.resigns())
	}
}

// A resign the node did not take leaves the token to be held again: the node still holds it.
func TestAFailedResignTakesNothingBack(t *testing.T) {
	f := &fakeNode{now: 1000 * ms, answers: []RoleClaim{claim(7, 120, 2), claim(7, 120, 2)}, fail: true}
	e := NewElection(f, "job")
	e.Clock = f.clock
	e.Ask(context.Background())
	if err := e.Resign(context.Background()); err == nil {
		t.Fatal("a failed resign said nothing")
	}
	if !e.Ask(context.Background()) {
		t.Fatal("the token resigned in vain is not held again")
	}
}

// A slow OnElected delays no end: the timer cancels the context and Held turns false at the
// deadline while the callback still runs; OnLost follows it. The timer never runs a callback,
// so it does not matter which goroutine heard the answer.
func TestASlowCallbackDelaysNoEnd(t *testing.T) {
	f := &fakeNode{answers: []RoleClaim{claim(7, 150, 2)}, hang: true}
	e := NewElection(f, "job")
	e.Stand = false
	release := make(chan struct{})
	lost := make(chan struct{})
	e.OnElected = func(uint64) {
		select {
		case <-release:
		case <-time.After(5 * time.Second):
		}
	}
	e.OnLost = func(uint64) { close(lost) }
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.Stop(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	lead, _, err := e.Leadership(ctx)
	if err != nil {
		t.Fatalf("no leadership within 2 s: %v", err)
	}
	select {
	case <-lead.Done():
	case <-time.After(time.Second):
		t.Fatal("the leadership context outlived its promise while OnElected ran")
	}
	if e.Held() {
		t.Fatal("held after the context was cancelled")
	}
	close(release)
	select {
	case <-lost:
	case <-time.After(2 * time.Second):
		t.Fatal("OnLost not called within 2 s of OnElected's return")
	}
}

// A callback may resign or stop: neither waits for the callback that calls it.
func TestACallbackMayResignOrStop(t *testing.T) {
	for _, stop := range []bool{false, true} {
		f := &fakeNode{answers: []RoleClaim{claim(7, 150, 2)}, hang: true}
		e := NewElection(f, "job")
		e.Stand = false
		returned := make(chan error, 1)
		lost := make(chan uint64, 1)
		e.OnElected = func(uint64) {
			if stop {
				returned <- e.Stop(context.Background())
			} else {
				returned <- e.Resign(context.Background())
			}
		}
		e.OnLost = func(tok uint64) { lost <- tok }
		if err := e.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-returned:
			if err != nil {
				t.Fatalf("stop %v: %v", stop, err)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("stop %v: the call from OnElected did not return within 2 s", stop)
		}
		select {
		case tok := <-lost:
			if tok != 7 {
				t.Fatalf("lost %d", tok)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("stop %v: no OnLost within 2 s", stop)
		}
		if !stop && (len(f.resigns()) != 1 || e.Held()) {
			t.Fatalf("resigned %v, held %v", f.resigns(), e.Held())
		}
		_ = e.Stop(context.Background())
		select {
		case <-e.Delivered():
		case <-time.After(2 * time.Second):
			t.Fatalf("stop %v: the callbacks' goroutine did not end", stop)
		}
	}
}

// An answer to a question sent before the resign begins no holding of the resigned token; a
// later grant does.
func TestNoAnswerRestartsAResignedToken(t *testing.T) {
	p := Promise{Margin: 5 * ms}
	p.Answered(1000*ms, 1001*ms, true, 4, 120)
	if p.Deadline != 1115*ms {
		t.Fatalf("deadline %d, want the send + lease - margin", p.Deadline/ms)
	}
	if _, tok := p.Resign(1010 * ms); tok != 4 || p.Held(1011*ms) {
		t.Fatalf("resigned %d, held %v", tok, p.Held(1011*ms))
	}
	if c := p.Answered(1005*ms, 1012*ms, true, 4, 120); len(c) != 0 || p.Held(1013*ms) {
		t.Fatalf("the resigned token began again: %+v", c)
	}
	if c := p.Answered(1020*ms, 1021*ms, true, 9, 120); len(c) != 1 || !p.Held(1022*ms) {
		t.Fatalf("a later grant not held: %+v", c)
	}
}

// The node may still hold a grant whose promise ran out here: Resign gives it up all the same,
// and a grant already moved on (409 stale_token) is not an error.
func TestResignAfterTheLocalDeadlineStillGivesTheGrantUp(t *testing.T) {
	f := &fakeNode{now: 1000 * ms, answers: []RoleClaim{claim(7, 120, 2)}, stale: true}
	e := NewElection(f, "job")
	e.Clock = f.clock
	e.Ask(context.Background())
	f.now += 200 * ms
	if err := e.Resign(context.Background()); err != nil || len(f.resigns()) != 1 || f.resigns()[0] != 7 {
		t.Fatalf("resign: %v, resigned %v", err, f.resigns())
	}
}

// A slow OnLost of one holding delays no end of the next: the second holding's context is
// cancelled at its deadline while the first OnLost still runs.
func TestASlowOnLostDelaysNoLaterEnd(t *testing.T) {
	f := &fakeNode{answers: []RoleClaim{claim(7, 100, 2), claim(8, 200, 2)}, hang: true}
	e := NewElection(f, "job")
	e.Stand = false
	e.Poll = time.Hour
	release := make(chan struct{})
	e.OnLost = func(tok uint64) {
		if tok == 7 {
			select {
			case <-release:
			case <-time.After(5 * time.Second):
			}
		}
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() { close(release); _ = e.Stop(context.Background()) }()
	until(t, "holding 7 ended", 2*time.Second, func() bool { return len(e.History()) >= 2 })
	e.Ask(context.Background())
	lead, tok, err := e.Leadership(context.Background())
	if err != nil || tok != 8 {
		t.Fatalf("no holding of 8: %v %d", err, tok)
	}
	select {
	case <-lead.Done():
	case <-time.After(time.Second):
		t.Fatal("holding 8's context outlived its promise while OnLost(7) ran")
	}
}

func TestNegativeMarginIsRefused(t *testing.T) {
	e := NewElection(&fakeNode{}, "job")
	e.Margin = -time.Millisecond
	if e.Start(context.Background()) == nil {
		t.Fatal("a negative margin taken")
	}
}

func TestStartRefusesAModeThatPromisesNothing(t *testing.T) {
	f := &fakeNode{noPromise: "bully mode has no lease"}
	e := NewElection(f, "")
	if err := e.Start(context.Background()); !errors.Is(err, ErrNoPromise) {
		t.Fatalf("start: %v", err)
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
