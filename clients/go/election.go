package electd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Change says that the holding of Token began (Elected) or ended, between Begun (the first
// claiming answer heard) and Ended (its last promise's end, or the instant the node said it no
// longer claims or the application resigned). Two nodes' holdings never overlap: the later
// node's claim began after the earlier node's promise ended, before its answer was heard.
type Change struct {
	Elected bool
	Token   uint64
	Begun   int64
	Ended   int64
}

// Promise is what the node's answers promise, I/O-free: fed with every answer, the instant its
// question was sent and now (nanoseconds of one clock); says when a holding begins and ends.
//
// A node that answers with lease_ms m to a question sent at s holds its claim until s + m,
// whatever happens after: the deadline counts from the send instant, never from the answer's
// arrival. It is the end of the latest promise of one token (the cluster's term, a role's
// grant), less Margin: an answer with another token never extends it. Once the application
// has resigned a token (Resign), answers with that token or an older one claim nothing.
type Promise struct {
	Token    uint64
	Begun    int64
	Deadline int64
	// Margin (ns) is what the application needs to stop acting once told: the holding ends
	// this long before the promise does.
	Margin   int64
	holding  bool
	resigned uint64
}

// Held says whether a promise runs at now.
func (p *Promise) Held(now int64) bool { return p.holding && now < p.Deadline }

// Answered takes the answer to a question sent at sent: the node claims (with token and
// leaseMs) or not. A refusal ends the holding at once; a claim with another token ends the old
// holding and begins a new one; a claim with the same token extends the deadline to
// sent + leaseMs, never beyond.
func (p *Promise) Answered(sent, now int64, claims bool, token uint64, leaseMs uint64) []Change {
	out := p.Expire(now)
	if !claims || leaseMs == 0 || (p.resigned != 0 && token <= p.resigned) {
		return append(out, p.End(now)...)
	}
	end := sent + int64(leaseMs)*int64(time.Millisecond) - p.Margin
	if p.holding && token != p.Token {
		out = append(out, p.End(now)...)
	}
	if end <= now {
		return out
	}
	if p.holding {
		if end > p.Deadline {
			p.Deadline = end
		}
		return out
	}
	p.holding, p.Token, p.Begun, p.Deadline = true, token, now, end
	return append(out, Change{Elected: true, Token: token, Begun: now, Ended: end})
}

// Expire ends the holding if its deadline has come.
func (p *Promise) Expire(now int64) []Change {
	if p.holding && now >= p.Deadline {
		p.holding = false
		return []Change{{Token: p.Token, Begun: p.Begun, Ended: p.Deadline}}
	}
	return nil
}

// End ends the holding now (a refusal, a new token, a resign), if it runs.
func (p *Promise) End(now int64) []Change {
	out := p.Expire(now)
	if p.holding {
		p.holding = false
		if now < p.Deadline {
			p.Deadline = now
		}
		out = append(out, Change{Token: p.Token, Begun: p.Begun, Ended: p.Deadline})
	}
	return out
}

// Resign ends the holding now and says which token to give up: the last one heard, even when
// its promise has run out here (the node may still hold the grant). No answer with that token
// or an older one begins a holding again, not even one to a question sent before.
func (p *Promise) Resign(now int64) ([]Change, uint64) {
	if p.Token > p.resigned {
		p.resigned = p.Token
	}
	return p.End(now), p.Token
}

// Unresign takes back a resign of token that the node did not take (it failed): the node
// still holds the grant, and its answers may begin a holding again.
func (p *Promise) Unresign(token uint64) {
	if p.resigned == token {
		p.resigned = 0
	}
}

// Asker is what an Election asks: *Client, or a fake in tests.
type Asker interface {
	Leader(ctx context.Context) (View, error)
	Claim(ctx context.Context, timeout time.Duration) (bool, View, error)
	RoleClaim(ctx context.Context, name string, timeout time.Duration) (bool, RoleClaim, error)
	Stand(ctx context.Context, name string, id uint64, stands bool) (Role, error)
	ResignRole(ctx context.Context, name string, token uint64) (Resigned, error)
	Resign(ctx context.Context, to uint64) error
}

// ErrNoPromise is Start's error on a node whose mode promises nothing (bully, ring,
// invitation): its answers carry no lease_ms, so no holding could ever be kept.
var ErrNoPromise = errors.New("electd: this cluster's mode makes no promise")

// Election is the cluster's election (Name "") or the named role Name, as seen from the node
// beside the application. Start stands the node for the role (from the node's own host no admin
// token is needed) and keeps asking every Poll; Held says whether the application may act as
// the holder now, Token is the fencing token to pass to what it writes to, Leadership gives a
// context that is cancelled when the holding ends: Margin before the promise's deadline by the
// election's own timer, whether or not the node answers, or at once when the node says it no
// longer claims.
//
// OnElected and OnLost are called as holdings begin and end, in that order, one at a time, on
// a goroutine of their own (after Held has turned and the context has been cancelled): a slow
// callback delays the next callback, never the end of a holding, and a callback may call
// Resign or Stop.
type Election struct {
	Name      string
	Stand     bool
	Poll      time.Duration
	Timeout   time.Duration
	Margin    time.Duration
	OnElected func(token uint64)
	OnLost    func(token uint64)
	Clock     func() int64
	NodeID    uint64

	asker     Asker
	history   []Change
	mu        sync.Mutex
	pending   []Change
	delivered chan struct{}
	wake      chan struct{}
	stopped   bool // no answer begins a holding
	closing   bool // the callbacks' goroutine ends once nothing is queued
	promise   Promise
	changed   chan struct{}
	cancel    context.CancelFunc
	ctx       context.Context
	lead      context.CancelFunc
	leadCtx   context.Context
	done      sync.WaitGroup
}

// NewElection is an election of role name ("" for the cluster's own) asked of a.
func NewElection(a Asker, name string) *Election {
	return &Election{Name: name, Stand: name != "", Poll: 20 * time.Millisecond, Timeout: time.Second, Margin: 5 * time.Millisecond, Clock: BootNs, asker: a, changed: make(chan struct{})}
}

// History is every holding begun and ended so far, in order.
func (e *Election) History() []Change {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Change(nil), e.history...)
}

// Held says whether a promise runs now.
func (e *Election) Held() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.promise.Held(e.Clock())
}

// Token is the fencing token of the running holding, and whether one runs.
func (e *Election) Token() (uint64, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.promise.Token, e.promise.Held(e.Clock())
}

// TimeLeft is how long the running promise has left (0 when none runs).
func (e *Election) TimeLeft() time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.Clock()
	if !e.promise.Held(now) {
		return 0
	}
	return time.Duration(e.promise.Deadline - now)
}

// Leadership waits until a holding runs (or ctx ends) and returns a context cancelled when it
// ends, with its token.
func (e *Election) Leadership(ctx context.Context) (context.Context, uint64, error) {
	for {
		e.mu.Lock()
		now, changed := e.Clock(), e.changed
		if e.promise.Held(now) && e.leadCtx != nil {
			c, t := e.leadCtx, e.promise.Token
			e.mu.Unlock()
			return c, t, nil
		}
		e.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-changed:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Ask asks the node once; whether a promise runs after its answer. The question waits no
// longer than the running promise has left (nor than Timeout).
func (e *Election) Ask(ctx context.Context) bool {
	if e.NodeID == 0 {
		v, err := e.asker.Leader(ctx)
		if err != nil {
			e.step(func(int64) []Change { return nil })
			return e.Held()
		}
		e.NodeID = v.NodeID
	}
	timeout := e.Timeout
	if left := e.TimeLeft(); left > 0 && left < timeout {
		timeout = left
	}
	sent := e.Clock()
	var claims bool
	var node, token, lease uint64
	var err error
	if e.Name == "" {
		var v View
		claims, v, err = e.asker.Claim(ctx, timeout)
		node, token = v.NodeID, v.Term
		if v.LeaseMs != nil {
			lease = *v.LeaseMs
		}
	} else {
		var r RoleClaim
		claims, r, err = e.asker.RoleClaim(ctx, e.Name, timeout)
		if r.Node != nil {
			node = *r.Node
		}
		if r.Token != nil {
			token = *r.Token
		}
		lease = r.LeaseMs
	}
	if errors.Is(err, ErrUnreachable) || ctx.Err() != nil {
		// Nothing said: the running promise still runs, to its deadline.
		e.step(func(int64) []Change { return nil })
		return e.Held()
	}
	// An error answer claims nothing; nor does an answer of another node (a load-balanced
	// address); nor any answer once the election has stopped.
	mine := err == nil && claims && node == e.NodeID
	e.step(func(now int64) []Change {
		if e.stopped {
			return nil
		}
		e.promise.Margin = 0
		if e.Margin > 0 {
			e.promise.Margin = int64(e.Margin)
		}
		return e.promise.Answered(sent, now, mine, token, lease)
	})
	return e.Held()
}

// step steps the promise under the lock (expiring it first), cancels an ended holding's
// context there, and queues the changes for the callbacks' goroutine.
func (e *Election) step(f func(now int64) []Change) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.Clock()
	changes := append(e.promise.Expire(now), f(now)...)
	e.history = append(e.history, changes...)
	for _, c := range changes {
		if c.Elected {
			e.leadCtx, e.lead = context.WithCancel(context.Background())
		} else if e.lead != nil {
			e.lead()
			e.lead, e.leadCtx = nil, nil
		}
	}
	if len(changes) > 0 {
		close(e.changed)
		e.changed = make(chan struct{})
		e.pending = append(e.pending, changes...)
		select {
		case e.wake <- struct{}{}:
		default:
		}
	}
}

// calling calls back for every change queued, in order, one at a time, until the election
// stops and nothing is left; then closes delivered.
func (e *Election) calling(wake <-chan struct{}, delivered chan<- struct{}) {
	defer close(delivered)
	for {
		e.mu.Lock()
		var c Change
		next := len(e.pending) > 0
		if next {
			c, e.pending = e.pending[0], e.pending[1:]
		}
		closing := e.closing
		e.mu.Unlock()
		switch {
		case next && c.Elected && e.OnElected != nil:
			e.OnElected(c.Token)
		case next && !c.Elected && e.OnLost != nil:
			e.OnLost(c.Token)
		case next:
		case closing:
			return
		default:
			<-wake
		}
	}
}

// Start stands the node for the role (when Stand) and starts asking, the timer and the
// callbacks' goroutine. An Election starts once: after Stop, make a new one.
func (e *Election) Start(ctx context.Context) error {
	if e.cancel != nil {
		return errors.New("electd: an Election starts once: make a new one")
	}
	if e.Margin < 0 {
		return fmt.Errorf("electd: Margin %v is negative: it would stretch the promise", e.Margin)
	}
	v, err := e.asker.Leader(ctx)
	if err != nil {
		return err
	}
	if v.NoPromise != nil {
		return fmt.Errorf("%w: %s", ErrNoPromise, *v.NoPromise)
	}
	e.NodeID = v.NodeID
	if e.Stand && e.Name != "" {
		if _, err := e.asker.Stand(ctx, e.Name, e.NodeID, true); err != nil {
			return err
		}
	}
	wake, delivered := make(chan struct{}, 1), make(chan struct{})
	e.mu.Lock()
	e.wake, e.delivered = wake, delivered
	e.mu.Unlock()
	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.done.Add(2)
	go e.asking()
	go e.timer()
	go e.calling(wake, delivered)
	return nil
}

// Stop stops asking, ends the holding (Held turns false, the context is cancelled, OnLost is
// queued), withdraws the node from the role and gives the role up if it holds it (when it
// stood for it); the withdrawal's error, if any. Delivered is closed once OnLost has been
// called.
func (e *Election) Stop(ctx context.Context) error {
	e.mu.Lock()
	e.stopped = true
	e.mu.Unlock()
	if e.cancel != nil {
		e.cancel()
		e.done.Wait()
	}
	e.step(e.promise.End)
	e.mu.Lock()
	e.closing = true
	select {
	case e.wake <- struct{}{}:
	default:
	}
	e.mu.Unlock()
	if !e.Stand || e.Name == "" || e.NodeID == 0 {
		return nil
	}
	_, err := e.asker.Stand(ctx, e.Name, e.NodeID, false)
	if claims, r, cerr := e.asker.RoleClaim(ctx, e.Name, 0); cerr == nil && claims && r.Token != nil {
		_, _ = e.asker.ResignRole(ctx, e.Name, *r.Token)
	}
	return err
}

// Delivered is closed once a stopped election has called back for every change (nil before
// Start).
func (e *Election) Delivered() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.delivered
}

// Resign gives the holding up: ends it here first (Held turns false, the context is cancelled,
// OnLost is queued), then asks the node to resign the role's grant or, for the cluster's
// election, to hand over (the admin token). For a role it gives up the last token heard even
// when its promise has run out here (the node may still hold the grant); a grant that has
// already moved on (409 stale_token) is given up already. No answer with the token resigned
// begins a holding again, unless the resign fails.
func (e *Election) Resign(ctx context.Context) error {
	var token uint64
	e.step(func(now int64) []Change {
		if e.Name == "" && !e.promise.Held(now) {
			return e.promise.End(now)
		}
		changes, t := e.promise.Resign(now)
		token = t
		return changes
	})
	if token == 0 {
		return nil
	}
	var err error
	if e.Name != "" {
		_, err = e.asker.ResignRole(ctx, e.Name, token)
		var api *APIError
		if errors.As(err, &api) && api.Code == "stale_token" {
			return nil
		}
	} else {
		err = e.asker.Resign(ctx, 0)
	}
	if err != nil {
		e.mu.Lock()
		e.promise.Unresign(token)
		e.mu.Unlock()
	}
	return err
}

func (e *Election) asking() {
	defer e.done.Done()
	for e.ctx.Err() == nil {
		e.Ask(e.ctx)
		select {
		case <-e.ctx.Done():
		case <-time.After(e.Poll):
		}
	}
}

// timer wakes at the deadline, or every 50 ms at most: a Go timer runs on the monotonic clock,
// which stands still while the host is suspended, so a deadline that passed in a suspend is
// enforced within 50 ms of the resume.
func (e *Election) timer() {
	defer e.done.Done()
	for e.ctx.Err() == nil {
		wait := 50 * time.Millisecond
		if left := e.TimeLeft(); left > 0 && left < wait {
			wait = left
		}
		select {
		case <-e.ctx.Done():
		case <-time.After(wait):
		}
		e.step(func(int64) []Change { return nil })
	}
}
