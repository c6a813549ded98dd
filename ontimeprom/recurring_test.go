package ontimeprom_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/ontimeprom"
	"github.com/ontime-go/ontime/schedule"
)

// TestRecurringTicks runs a real recurring timer every 100 ms on the
// embedded store and checks ontime_recurring_ticks_total: each tick
// delivered counts as fired; a tick that runs past the next instants makes
// them missed (FireOnce), exactly the instants between it and the next
// tick delivered; a pause skips exactly the instants between the held tick
// and the tick Resume arms.
func TestRecurringTicks(t *testing.T) {
	t.Parallel()
	const every = 100 * time.Millisecond
	reg := prometheus.NewPedanticRegistry()
	m, err := ontimeprom.New(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ontime.NewClient(openBolt(t), &ontime.Config{Logger: quiet, Hooks: []any{m}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var (
		mu    sync.Mutex
		ticks []ontime.Tick
	)
	delivered := func() []ontime.Tick {
		mu.Lock()
		defer mu.Unlock()
		return append([]ontime.Tick(nil), ticks...)
	}
	w := ontime.NewWorker(client, &ontime.WorkerConfig{Logger: quiet})
	err = ontime.Handle(w, "cron", func(ctx context.Context, msg *ontime.Message[string]) error {
		if msg.Tick.N == 2 {
			// run past five instants: they are missed (FireOnce)
			for time.Now().Before(msg.Tick.At.Add(5*every + every/2)) {
				time.Sleep(every / 10)
			}
		}
		mu.Lock()
		ticks = append(ticks, msg.Tick)
		mu.Unlock()
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.PublishRecurring(ctx, "cron", "beat", schedule.Every(every), "x"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			if err := w.Stop(ctx); err != nil {
				t.Error(err)
			}
			<-done
		})
	}
	defer stop()
	ticksOf := func(outcome string) float64 {
		return value(t, reg, "ontime_recurring_ticks_total", "topic", "cron", "outcome", outcome)
	}

	wait.For(t, 30*time.Second, func() bool { return len(delivered()) >= 4 }, "4 ticks delivered, got %d", func() int { return len(delivered()) })
	got := delivered()
	if got[1].N != 2 || got[2].N != 3 {
		t.Fatalf("ticks %+v", got)
	}
	// tick 2 ran past five instants (more on a slow machine)
	if n := got[2].At.Sub(got[1].At)/every - 1; n < 5 {
		t.Fatalf("tick 3 at %v, tick 2 at %v: %d instants between them, want 5 or more", got[2].At, got[1].At, n)
	}
	wait.For(t, 10*time.Second, func() bool { return ticksOf("fired") >= float64(len(got)) }, "fired %v, want at least %d", func() float64 { return ticksOf("fired") }, len(got))

	// pause, and let the held tick's instant and two more pass
	if err := client.Pause(ctx, "cron", "beat"); err != nil {
		t.Fatal(err)
	}
	var held time.Time
	wait.For(t, 30*time.Second, func() bool {
		info, err := client.Get(ctx, "cron", "beat")
		if err != nil {
			t.Fatal(err)
		}
		d := delivered()
		held = info.Recurring.Tick.At
		// the held tick is after the last one delivered (none in flight)
		return info.Recurring.Paused && held.After(d[len(d)-1].At) && time.Since(held) > 2*every+every/2
	}, "the held tick's instant and two more pass")
	before := delivered()
	if err := client.Resume(ctx, "cron", "beat"); err != nil {
		t.Fatal(err)
	}
	info, err := client.Get(ctx, "cron", "beat")
	if err != nil {
		t.Fatal(err)
	}
	wantSkipped := float64(info.Recurring.Tick.At.Sub(held) / every)
	if wantSkipped < 3 {
		t.Fatalf("held tick at %v, resumed at %v: want at least 3 skipped", held, info.Recurring.Tick.At)
	}
	if got := ticksOf("skipped"); got != wantSkipped {
		t.Errorf("skipped %v, want %v", got, wantSkipped)
	}
	wait.For(t, 30*time.Second, func() bool { return len(delivered()) > len(before) }, "a tick after Resume")
	if got := delivered()[len(before)]; !got.At.Equal(info.Recurring.Tick.At) {
		t.Errorf("first tick after Resume at %v, want %v", got.At, info.Recurring.Tick.At)
	}
	// stop, paused, and count every instant the ticks delivered passed over
	if err := client.Pause(ctx, "cron", "beat"); err != nil {
		t.Fatal(err)
	}
	stop()
	all := delivered()
	info, err = client.Get(ctx, "cron", "beat")
	if err != nil {
		t.Fatal(err)
	}
	gap := func(a, b time.Time) float64 { return float64(b.Sub(a)/every - 1) }
	wantMissed := 0.0
	for i := 1; i < len(all); i++ {
		if i != len(before) { // not over the pause
			wantMissed += gap(all[i-1].At, all[i].At)
		}
	}
	// and the last tick before each pause, to the tick it armed (held)
	wantMissed += gap(before[len(before)-1].At, held) + gap(all[len(all)-1].At, info.Recurring.Tick.At)
	if got := ticksOf("missed"); got < 5 || got != wantMissed {
		t.Errorf("missed %v, want %v (ticks %v)", got, wantMissed, all)
	}
	if got := ticksOf("fired"); got != float64(len(all)) {
		t.Errorf("fired %v, delivered %d", got, len(all))
	}
}
