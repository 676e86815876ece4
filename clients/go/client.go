// Package electd is the Go client of electd, the leader-election node: the node's HTTP API
// (Client) and the cluster's claim or a named role as a promise kept on a local timer
// (Election), whose Leadership context is cancelled when the promise runs out. Standard library
// only. docs/applications.md, "Client libraries", shows it in use.
package electd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// APIError is the node's error answer: Status and the contract's Code (for example 409
// stale_token, 404 unknown_role, 400 invalid_role_name).
type APIError struct {
	Status  int
	Code    string
	Message string
}

func (e *APIError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// ErrUnreachable wraps every failure to get an answer (refused, timed out, cut).
var ErrUnreachable = errors.New("electd: node unreachable")

// View is GET /v1/leader's and GET /v1/claim's body.
type View struct {
	NodeID  uint64  `json:"node_id"`
	Mode    string  `json:"mode"`
	Role    string  `json:"role"`
	Term    uint64  `json:"term"`
	Leader  *Leader `json:"leader"`
	LeaseMs *uint64 `json:"lease_ms"`
	// NoPromise says, in the modes that promise nothing, why (the answers carry no lease_ms).
	NoPromise *string `json:"no_promise,omitempty"`
}

// Leader is the leader a node knows.
type Leader struct {
	ID   uint64 `json:"id"`
	Addr string `json:"addr"`
}

// RoleClaim is GET /v1/claim/{name}'s body: on the holder (200) Token and LeaseMs, a promise
// from the instant the question was sent.
type RoleClaim struct {
	Name    string  `json:"name"`
	Node    *uint64 `json:"node"`
	Token   *uint64 `json:"token"`
	LeaseMs uint64  `json:"lease_ms"`
}

// Role is one role as GET /v1/roles lists it.
type Role struct {
	Name       string   `json:"name"`
	Candidates []uint64 `json:"candidates"`
	Holder     *uint64  `json:"holder"`
	Token      *uint64  `json:"token"`
	Preferred  *uint64  `json:"preferred,omitempty"`
}

// Resigned is POST /v1/roles/{name}/resign's answer.
type Resigned struct {
	Name     string `json:"name"`
	Token    uint64 `json:"token"`
	Released bool   `json:"released"`
}

// CheckName returns nil if name is a role name (1-128 ASCII letters, digits, '.', '_' and
// '-', starting with a letter or a digit), else an error naming the rule broken.
func CheckName(name string) error {
	if name == "" {
		return errors.New("a role name is empty")
	}
	if len(name) > 128 {
		return fmt.Errorf("a role name is at most 128 bytes long, not %d", len(name))
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	if !alnum(name[0]) {
		return fmt.Errorf("a role name starts with a letter or a digit, not %q", name[0])
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !alnum(c) && c != '.' && c != '_' && c != '-' {
			return fmt.Errorf("a role name holds only ASCII letters, digits, '.', '_' and '-', not %q", c)
		}
	}
	return nil
}

// Client is the API of the node at Node (host:port).
type Client struct {
	Node string
	// Timeout bounds each request but streams (whose first answer it bounds).
	Timeout time.Duration
	// AdminToken goes with admin requests and role changes; a node's own candidacy and
	// resign need none from its own host (see OwnHost).
	AdminToken string
	http       *http.Client
}

// NewClient is a client of the node at node. When the node's host is a loopback address, it
// connects from that address, so that the node takes it for an application on its own host
// (its candidacies, resigns and max_roles then need no admin token).
func NewClient(node string) *Client {
	dialer := &net.Dialer{}
	if host, _, err := net.SplitHostPort(node); err == nil {
		if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
			dialer.LocalAddr = &net.TCPAddr{IP: ip}
		}
	}
	// A stream's first answer (its headers) comes within 15 s, or the node is taken for gone,
	// as a stream silent for 15 s is.
	transport := &http.Transport{DialContext: dialer.DialContext, Proxy: nil, IdleConnTimeout: 2 * time.Second, ResponseHeaderTimeout: 15 * time.Second}
	return &Client{Node: node, Timeout: 2 * time.Second, http: &http.Client{Transport: transport}}
}

// Do sends one request and decodes an answer whose status is in ok into out; an *APIError
// for any other status, ErrUnreachable (wrapped) when no answer came. timeout 0: c.Timeout.
func (c *Client) Do(ctx context.Context, method, path string, body, out interface{}, admin bool, timeout time.Duration, ok ...int) (int, error) {
	if timeout <= 0 {
		timeout = c.Timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var payload io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		payload = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+c.Node+path, payload)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if admin && c.AdminToken != "" {
		req.Header.Set("Authorization", "Bearer "+c.AdminToken)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%w: %s %s %s: %v", ErrUnreachable, c.Node, method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return 0, fmt.Errorf("%w: %s %s %s: %v", ErrUnreachable, c.Node, method, path, err)
	}
	if len(ok) == 0 {
		ok = []int{200}
	}
	for _, s := range ok {
		if res.StatusCode == s {
			if out != nil {
				if err := json.Unmarshal(raw, out); err != nil {
					return res.StatusCode, fmt.Errorf("%s %s: %d is not the JSON expected: %v", method, path, res.StatusCode, err)
				}
			}
			return res.StatusCode, nil
		}
	}
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(raw, &e)
	return res.StatusCode, &APIError{Status: res.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
}

// Leader is GET /v1/leader: this node's view.
func (c *Client) Leader(ctx context.Context) (View, error) {
	var v View
	_, err := c.Do(ctx, "GET", "/v1/leader", nil, &v, false, 0)
	return v, err
}

// Claim is GET /v1/claim: whether this node holds the cluster's claim (200) or not (503).
func (c *Client) Claim(ctx context.Context, timeout time.Duration) (bool, View, error) {
	var v View
	status, err := c.Do(ctx, "GET", "/v1/claim", nil, &v, false, timeout, 200, 503)
	return status == 200, v, err
}

// Resign is POST /v1/admin/resign (the admin token): the leader hands over, to `to` when not 0.
func (c *Client) Resign(ctx context.Context, to uint64) error {
	var body interface{}
	if to != 0 {
		body = map[string]uint64{"to": to}
	}
	_, err := c.Do(ctx, "POST", "/v1/admin/resign", body, nil, true, 0)
	return err
}

// RoleClaim is GET /v1/claim/{name}: whether this node holds the role's claim (200) or not.
func (c *Client) RoleClaim(ctx context.Context, name string, timeout time.Duration) (bool, RoleClaim, error) {
	var r RoleClaim
	if err := CheckName(name); err != nil {
		return false, r, err
	}
	status, err := c.Do(ctx, "GET", "/v1/claim/"+name, nil, &r, false, timeout, 200, 503)
	return status == 200, r, err
}

// Roles is GET /v1/roles, every page (prefix "" for all).
func (c *Client) Roles(ctx context.Context, prefix string) ([]Role, error) {
	var out []Role
	after := ""
	for page := 0; page < 100000; page++ {
		q := url.Values{"limit": {"1000"}}
		if prefix != "" {
			q.Set("prefix", prefix)
		}
		if after != "" {
			q.Set("after", after)
		}
		var p struct {
			Roles []Role `json:"roles"`
			Next  string `json:"next"`
		}
		if _, err := c.Do(ctx, "GET", "/v1/roles?"+q.Encode(), nil, &p, false, 0); err != nil {
			return nil, err
		}
		out = append(out, p.Roles...)
		if after = p.Next; after == "" {
			break
		}
	}
	return out, nil
}

// Stand is PUT (stands) or DELETE /v1/roles/{name}/candidates/{id}, answered once applied.
func (c *Client) Stand(ctx context.Context, name string, id uint64, stands bool) (Role, error) {
	var r Role
	if err := CheckName(name); err != nil {
		return r, err
	}
	method := "PUT"
	if !stands {
		method = "DELETE"
	}
	_, err := c.Do(ctx, method, fmt.Sprintf("/v1/roles/%s/candidates/%d", name, id), nil, &r, true, 0)
	return r, err
}

// ResignRole is POST /v1/roles/{name}/resign: gives grant token up once its promises have
// ended; idempotent; 409 stale_token for a token that is not the current grant.
func (c *Client) ResignRole(ctx context.Context, name string, token uint64) (Resigned, error) {
	var r Resigned
	if err := CheckName(name); err != nil {
		return r, err
	}
	_, err := c.Do(ctx, "POST", "/v1/roles/"+name+"/resign", map[string]uint64{"token": token}, &r, true, 0)
	return r, err
}

// Event is one Server-Sent Event: ID (the node's sequence number), Type (leader, granted,
// released, revoked, lost, role, synced, reset, gap) and Data (its JSON).
type Event struct {
	ID   string
	Type string
	Data json.RawMessage
}

// Stream is a watch stream that resumes after the last event read when it breaks, until the
// node has been unreachable for GiveUp.
type Stream struct {
	c      *Client
	path   string
	last   string
	GiveUp time.Duration
	res    *http.Response
	lines  *bufio.Reader
}

// Watch is GET /v1/watch from since ("" for the current view first).
func (c *Client) Watch(since string) *Stream {
	return &Stream{c: c, path: "/v1/watch", last: since, GiveUp: 30 * time.Second}
}

// RoleWatch is GET /v1/roles/watch of names (all when empty) from since.
func (c *Client) RoleWatch(names []string, since string) (*Stream, error) {
	path := "/v1/roles/watch"
	if len(names) > 0 {
		for _, n := range names {
			if err := CheckName(n); err != nil {
				return nil, err
			}
		}
		path += "?names=" + strings.Join(names, ",")
	}
	return &Stream{c: c, path: path, last: since, GiveUp: 30 * time.Second}, nil
}

// Next is the next event: it (re)connects as needed, with Last-Event-ID after the last one read.
func (s *Stream) Next(ctx context.Context) (Event, error) {
	var downSince time.Time
	pause := 50 * time.Millisecond
	for attempt := 0; attempt < 1000000; attempt++ {
		if s.lines == nil {
			if err := s.open(ctx); err != nil {
				var api *APIError
				if errors.As(err, &api) || ctx.Err() != nil {
					return Event{}, err
				}
			}
		}
		if s.lines != nil {
			ev, err := s.read()
			if err == nil {
				if ev.ID != "" {
					s.last = ev.ID
				}
				return ev, nil
			}
			s.Close()
		}
		if downSince.IsZero() {
			downSince = time.Now()
		} else if time.Since(downSince) >= s.GiveUp {
			return Event{}, fmt.Errorf("%w: %s %s: no stream for %v", ErrUnreachable, s.c.Node, s.path, s.GiveUp)
		}
		select {
		case <-ctx.Done():
			return Event{}, ctx.Err()
		case <-time.After(pause):
		}
		if pause *= 2; pause > time.Second {
			pause = time.Second
		}
	}
	return Event{}, ErrUnreachable
}

// Close ends the stream's connection (Next opens another).
func (s *Stream) Close() {
	if s.res != nil {
		s.res.Body.Close()
	}
	s.res, s.lines = nil, nil
}

func (s *Stream) open(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+s.c.Node+s.path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	if s.last != "" {
		req.Header.Set("Last-Event-ID", s.last)
	}
	res, err := s.c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	if res.StatusCode != 200 {
		defer res.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.Unmarshal(raw, &e)
		return &APIError{Status: res.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
	}
	s.res, s.lines = res, bufio.NewReader(res.Body)
	return nil
}

// read returns the next event of the open body. The node sends a keep-alive every 5 s: 15 s
// of silence is a node gone.
func (s *Stream) read() (Event, error) {
	ev := Event{Type: "message"}
	var data []string
	body, lines := s.res.Body, s.lines
	timer := time.AfterFunc(15*time.Second, func() { body.Close() })
	defer timer.Stop()
	for {
		line, err := lines.ReadString('\n')
		if err != nil {
			return Event{}, err
		}
		timer.Reset(15 * time.Second)
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if len(data) > 0 {
				ev.Data = json.RawMessage(strings.Join(data, "\n"))
				return ev, nil
			}
			ev = Event{Type: "message"}
		case strings.HasPrefix(line, ":"):
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "id":
				ev.ID = value
			case "event":
				ev.Type = value
			case "data":
				data = append(data, value)
			}
		}
	}
}
