package ontime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/ontimedriver"
)

// plainDriver hides every optional capability of the driver it holds (no
// Unwrap): the library must do without them.
type plainDriver struct{ ontimedriver.Driver }

// TestDeadLetterByID: Client.DeadLetter finds one dead letter, whole, by
// id, through the store's DeadLetterGetter and, for a store without it, by
// paging ListDead (more than one page here); an unknown id is ErrNotFound
// either way.
func TestDeadLetterByID(t *testing.T) {
	drv, closeStore := openStore()
	defer closeStore()
	ctx := context.Background()
	if _, ok := ontimedriver.As[ontimedriver.DeadLetterGetter](plainDriver{drv}); ok {
		t.Fatal("plainDriver exposes DeadLetterGetter")
	}
	c, err := ontime.NewClient(drv, &ontime.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	const n = 1005 // ListDead pages hold 1000
	body := make([]byte, 4096)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	var timers []ontime.Timer
	for i := range n {
		timers = append(timers, ontime.Timer{ID: "t" + string(rune('A'+i/26/26%26)) + string(rune('A'+i/26%26)) + string(rune('A'+i%26)), Body: body})
	}
	if _, err := c.PublishBatch(ctx, "d", timers); err != nil {
		t.Fatal(err)
	}
	w := ontime.NewWorker(c, nil)
	ontime.Handle(w, "d", func(ctx context.Context, m *ontime.Message[[]byte]) error {
		return ontime.DeadLetter(errors.New("no"))
	}, &ontime.TopicOptions{MaxConcurrency: 64})
	go func() { _ = w.Run(ctx) }()
	defer func() { _ = w.Stop(ctx) }()
	wait.For(t, 60*time.Second, func() bool {
		cnt, err := c.Count(ctx, "d")
		return err == nil && cnt.Dead == n
	}, "%d dead letters", n)
	last := timers[n-1].ID
	for _, cc := range []struct {
		name string
		drv  ontimedriver.Driver
	}{{"getter", drv}, {"paged", plainDriver{drv}}} {
		c, err := ontime.NewClient(cc.drv, &ontime.Config{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		d, err := c.DeadLetter(ctx, "d", last)
		if err != nil {
			t.Fatalf("%s: DeadLetter(%s): %v", cc.name, last, err)
		}
		if d.ID != last || string(d.Body) != string(body) || d.Reason != ontimedriver.ReasonRejected || d.Topic != "d" {
			t.Errorf("%s: DeadLetter = %s %q (%d bytes) %s", cc.name, d.ID, d.Reason, len(d.Body), d.Topic)
		}
		if _, err := c.DeadLetter(ctx, "d", "nope"); !errors.Is(err, ontime.ErrNotFound) {
			t.Errorf("%s: unknown id: %v, want ErrNotFound", cc.name, err)
		}
	}
}
