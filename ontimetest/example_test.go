package ontimetest_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
	"github.com/ontime-go/ontime/ontimetest"
)

type Reminder struct {
	User  string `json:"user"`
	Tries int    `json:"tries"`
}

// register is the application's registration function: the same one
// serves the real worker and the test worker.
func register(r ontime.Registrar) error {
	return ontime.Handle(r, "reminders", func(ctx context.Context, m *ontime.Message[Reminder]) error {
		switch {
		case m.Body.User == "":
			return ontime.Drop(errors.New("no user"))
		case m.Attempt < 3:
			return errors.New("mail server busy")
		}
		return nil
	}, &ontime.TopicOptions{Retry: ontime.RetryPolicy{MinDelay: time.Minute, Jitter: -1}})
}

// Run a handler on a body, with no store, and see its outcome.
func ExampleWorker_Work() {
	w, err := ontimetest.NewWorker(nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := register(w); err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		body    Reminder
		attempt int
	}{{Reminder{User: "ann"}, 1}, {Reminder{User: "ann"}, 3}, {Reminder{}, 1}} {
		res, err := w.Work(ctx, "reminders", c.body, &ontimetest.Delivery{Attempt: c.attempt})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("user %q, attempt %d: %v %v %v\n", c.body.User, c.attempt, res.Outcome, res.Delay, res.Err)
	}
	// Output:
	// user "ann", attempt 1: retried 1m0s mail server busy
	// user "ann", attempt 3: acked 0s <nil>
	// user "", attempt 1: dropped 0s ontime: dropped: no user
}

// Build a Message to call a handler function directly, and see what it
// settled by hand.
func ExampleNewMessage() {
	handler := func(ctx context.Context, m *ontime.Message[Reminder]) error {
		if m.Body.Tries > 2 {
			return m.DeadLetter(ctx, errors.New("gave up"))
		}
		return m.Snooze(ctx, time.Duration(m.Body.Tries)*time.Hour)
	}
	ctx := context.Background()
	for _, tries := range []int{1, 3} {
		m, settled, err := ontimetest.NewMessage[Reminder](ctx, Reminder{User: "bob", Tries: tries}, nil)
		if err != nil {
			log.Fatal(err)
		}
		if err := handler(ctx, m); err != nil {
			log.Fatal(err)
		}
		res, _ := settled.Result()
		fmt.Printf("%v after %v, reason %q\n", res.Outcome, res.Delay, res.Reason)
	}
	// Output:
	// snoozed after 1h0m0s, reason ""
	// dead_lettered after 0s, reason "rejected"
}

// Check what code under test published. In a test, RequirePublished does
// this (and ontimetest.NewClient opens the store).
func ExamplePublished() {
	dir, err := os.MkdirTemp("", "ontimetest-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	drv, err := ontimebolt.Open(filepath.Join(dir, "timers.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer drv.Close()
	c, err := ontime.NewClient(drv, nil)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	// The code under test:
	if _, err := c.Publish(ctx, "reminders", Reminder{User: "cy"}, ontime.WithID("cy-1"), ontime.In(time.Hour)); err != nil {
		log.Fatal(err)
	}

	timers, err := ontimetest.Published(ctx, c, "reminders")
	if err != nil {
		log.Fatal(err)
	}
	want := ontimetest.Want{Body: Reminder{User: "cy"}, DueAfter: time.Now().Add(59 * time.Minute)}
	for _, ti := range timers {
		ok, _ := want.Match(ti)
		fmt.Println(ti.ID, ok)
	}
	// Output:
	// cy-1 true
}
