// Runs a job's loop only while this host's node holds the role (electd's Go client).
//
//	cd clients/go && go run ./example billing 127.0.0.1:7002 10s
//
// stands node 2 of the bundled cluster for "billing", works while it holds it for 10 s, then
// withdraws (0s: until interrupted).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"time"

	"electd"
)

func main() {
	name, node, length := "scheduler", "127.0.0.1:7001", time.Duration(0)
	if len(os.Args) > 3 {
		name, node = os.Args[1], os.Args[2]
		length, _ = time.ParseDuration(os.Args[3])
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if length > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, length)
		defer cancel()
	}
	e := electd.NewElection(electd.NewClient(node), name)
	if err := e.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "cannot stand:", err)
		os.Exit(1)
	}
	defer func() { _ = e.Stop(context.Background()) }()
	for ctx.Err() == nil {
		// lead is cancelled at the promise's end by the election's own timer, even if the node
		// is silent: stop writing then.
		lead, token, err := e.Leadership(ctx)
		if err != nil {
			return
		}
		fmt.Printf("elected (token %d)\n", token)
		for lead.Err() == nil && ctx.Err() == nil {
			// Pass the token to what the job writes to, which refuses a lower one.
			fmt.Printf("working as %s with token %d, %v promised\n", name, token, e.TimeLeft().Round(time.Millisecond))
			select {
			case <-lead.Done():
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
		if lead.Err() != nil {
			fmt.Printf("lost (token %d): stop writing now\n", token)
		}
	}
}
