package electd

// Against a live cluster the caller started (lab/tests/clients.rs): ELECTD_TEST_NODES (host:port
// of each node, comma-separated, node 1 first), ELECTD_TEST_PIDS (their process ids in the same
// order: the tests pause a node with SIGSTOP and resume it) and ELECTD_TEST_ADMIN_TOKEN.
// Without them the tests are skipped (the caller counts a skip as a failure). Every holding an
// Election saw is judged whole at the end: no two nodes' holdings overlap.

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

type live struct {
	nodes []string
	pids  []int
	token string
}

func liveCluster(t *testing.T) live {
	var l live
	for _, n := range strings.Split(os.Getenv("ELECTD_TEST_NODES"), ",") {
		if n != "" {
			l.nodes = append(l.nodes, n)
		}
	}
	for _, p := range strings.Split(os.Getenv("ELECTD_TEST_PIDS"), ",") {
		if pid, err := strconv.Atoi(p); err == nil {
			l.pids = append(l.pids, pid)
		}
	}
	if len(l.nodes) == 0 || len(l.pids) != len(l.nodes) {
		t.Skip("ELECTD_TEST_NODES and ELECTD_TEST_PIDS are not set")
	}
	l.token = os.Getenv("ELECTD_TEST_ADMIN_TOKEN")
	t.Cleanup(func() {
		for _, pid := range l.pids {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	})
	return l
}

// until waits until cond, at most within (asking every 20 ms).
func until(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	end := time.Now().Add(within)
	for time.Now().Before(end) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("not within %v: %s", within, what)
}

// judge fails on two holdings of different nodes that overlap.
func judge(t *testing.T, es []*Election) {
	type span struct {
		begun, ended int64
		node         int
		token        uint64
	}
	var spans []span
	for i, e := range es {
		for _, c := range e.History() {
			if !c.Elected {
				spans = append(spans, span{c.Begun, c.Ended, i + 1, c.Token})
			}
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].begun < spans[j].begun })
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if b.begun >= a.ended {
				break
			}
			if a.node != b.node {
				t.Errorf("node %d token %d [%d, %d) overlaps node %d token %d [%d, %d)", a.node, a.token, a.begun, a.ended, b.node, b.token, b.begun, b.ended)
			}
		}
	}
}

func (l live) elections(name string, stand bool) []*Election {
	var es []*Election
	for _, n := range l.nodes {
		c := NewClient(n)
		c.AdminToken = l.token
		e := NewElection(c, name)
		e.Stand = stand
		es = append(es, e)
	}
	return es
}

func held(es []*Election) (int, int) {
	n, at := 0, -1
	for i, e := range es {
		if e.Held() {
			n, at = n+1, i
		}
	}
	return n, at
}

func TestLiveTheClusterClaimIsHeldByTheLeaderAlone(t *testing.T) {
	l := liveCluster(t)
	ctx := context.Background()
	es := l.elections("", false)
	for _, e := range es {
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	at := -1
	until(t, "one node holds the cluster's claim", 20*time.Second, func() bool {
		n, i := held(es)
		at = i
		return n == 1
	})
	v, err := NewClient(l.nodes[at]).Leader(ctx)
	token, _ := es[at].Token()
	if err != nil || v.Role != "leader" || v.Term != token {
		t.Fatalf("holder %d: %+v %v, token %d", at+1, v, err, token)
	}
	for _, e := range es {
		_ = e.Stop(ctx)
	}
	judge(t, es)
}

func TestLiveARoleMovesWhenItsHolderPausesAndItsLeadershipEndsOnTime(t *testing.T) {
	l := liveCluster(t)
	ctx := context.Background()
	name := "go-job"
	es := l.elections(name, true)
	var mu sync.Mutex
	lost := map[int][]int64{}
	for i, e := range es {
		i := i
		e.OnLost = func(uint64) { mu.Lock(); lost[i] = append(lost[i], BootNs()); mu.Unlock() }
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, e := range es {
			_ = e.Stop(ctx)
		}
	}()
	first := -1
	until(t, "one node holds the role", 20*time.Second, func() bool {
		n, at := held(es)
		first = at
		return n == 1
	})
	lead, token, err := es[first].Leadership(ctx)
	if err != nil {
		t.Fatal(err)
	}
	roles, err := NewClient(l.nodes[0]).Roles(ctx, name)
	if err != nil || len(roles) != 1 || *roles[0].Holder != uint64(first+1) || *roles[0].Token != token {
		t.Fatalf("listed %+v %v; holder %d token %d", roles, err, first+1, token)
	}
	// The holder's node pauses: its questions go unanswered, and the election's own timer
	// ends the holding at the promise's deadline.
	if err := syscall.Kill(l.pids[first], syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lead.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the paused holder's leadership did not end within 5 s")
	}
	h := es[first].History()
	if last := h[len(h)-1]; last.Elected || last.Token != token {
		t.Fatalf("history %+v", h)
	}
	// OnLost is delivered by the election's own goroutine, after the context is cancelled.
	until(t, "OnLost called", 5*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(lost[first]) > 0
	})
	mu.Lock()
	if lost[first][0] < h[len(h)-1].Ended {
		t.Fatalf("OnLost at %v, the holding ended at %d", lost[first], h[len(h)-1].Ended)
	}
	mu.Unlock()
	second := -1
	until(t, "another node holds the role", 20*time.Second, func() bool {
		for j, e := range es {
			if j != first && e.Held() {
				second = j
				return true
			}
		}
		return false
	})
	newToken, _ := es[second].Token()
	if newToken <= token {
		t.Fatalf("token %d after %d: the fencing token must grow", newToken, token)
	}
	_ = syscall.Kill(l.pids[first], syscall.SIGCONT)
	// A resign with the old token changes nothing.
	_, err = NewClient(l.nodes[second]).ResignRole(ctx, name, token)
	var api *APIError
	if !errors.As(err, &api) || api.Status != 409 || api.Code != "stale_token" {
		t.Fatalf("a stale resign answered %v", err)
	}
	if err := es[second].Resign(ctx); err != nil || es[second].Held() {
		t.Fatalf("resign: %v, held %v", err, es[second].Held())
	}
	until(t, "a third holding begins", 20*time.Second, func() bool {
		for _, e := range es {
			if tok, ok := e.Token(); ok && tok != newToken {
				return true
			}
		}
		return false
	})
	for i, e := range es {
		if err := e.Stop(ctx); err != nil {
			t.Errorf("node %d's withdrawal: %v", i+1, err)
		}
	}
	judge(t, es)
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r, err := NewClient(l.nodes[0]).Roles(ctx, name)
		// A role nobody stands for or holds is gone from the table.
		if err == nil && (len(r) == 0 || len(r[0].Candidates) == 0) {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("not every candidacy withdrawn within 20 s: %+v %v", r, err)
		}
	}
}

func TestLiveTheRoleWatchResumesAfterTheLastEventRead(t *testing.T) {
	l := liveCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := "go-watched"
	c := NewClient(l.nodes[0])
	c.AdminToken = l.token
	s, err := c.RoleWatch([]string{name}, "")
	if err != nil {
		t.Fatal(err)
	}
	ev, err := s.Next(ctx)
	if err != nil || ev.Type != "synced" {
		t.Fatalf("first event %+v %v: want synced (nobody stands)", ev, err)
	}
	if _, err := c.Stand(ctx, name, 1, true); err != nil {
		t.Fatal(err)
	}
	for ev.Type != "granted" {
		if ev, err = s.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	var granted struct {
		Name string `json:"name"`
		Node uint64 `json:"node"`
	}
	if err := json.Unmarshal(ev.Data, &granted); err != nil || granted.Name != name || granted.Node != 1 {
		t.Fatalf("granted %s %v", ev.Data, err)
	}
	// Withdrawn, the holder keeps the role (no other candidate) until it resigns it.
	var grant struct {
		Token uint64 `json:"token"`
	}
	_ = json.Unmarshal(ev.Data, &grant)
	if _, err := c.Stand(ctx, name, 1, false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ResignRole(ctx, name, grant.Token); err != nil {
		t.Fatal(err)
	}
	r, err := c.RoleWatch([]string{name}, ev.ID)
	if err != nil {
		t.Fatal(err)
	}
	// A resumed stream tells what came after the event it resumes from, then `synced`; never
	// the roles' states again.
	next, err := r.Next(ctx)
	for err == nil && next.Type == "synced" {
		next, err = r.Next(ctx)
	}
	r.Close()
	if err != nil || next.Type != "released" {
		t.Fatalf("resumed after %s: %+v %v, want released", ev.ID, next, err)
	}
}
