package ontime_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sort"
	"sync/atomic"
	"time"

	"github.com/ontime-go/ontime"
)

// Timers whose handler keeps failing are dead-lettered once the retry
// policy gives up. An operator lists them, fixes the cause, replays the
// ones worth sending and purges the rest.
func ExampleClient_DeadLetters() {
	drv, closeStore := openStore()
	defer closeStore()
	ctx := context.Background()
	client, _ := ontime.NewClient(drv, &ontime.Config{Logger: quiet})
	client.Publish(ctx, "emails", "welcome mail", ontime.WithID("mail-1"))
	client.Publish(ctx, "emails", "spam", ontime.WithID("mail-2"))

	var fixed atomic.Bool // the mail template is deployed
	done := make(chan struct{})
	worker := ontime.NewWorker(client, nil)
	ontime.Handle(worker, "emails", func(ctx context.Context, m *ontime.Message[string]) error {
		switch {
		case m.Body == "spam":
			return errors.New("blocked by the mail server")
		case !fixed.Load():
			return errors.New("template missing")
		}
		fmt.Printf("sent %s (attempt %d)\n", m.Body, m.Attempt)
		close(done)
		return nil
	}, &ontime.TopicOptions{Retry: ontime.RetryPolicy{MinDelay: 10 * time.Millisecond, MaxAttempts: 2}})
	go worker.Run(ctx)

	// Wait for both to run out of attempts.
	var dead []ontime.DeadLetterInfo
	for len(dead) < 2 {
		time.Sleep(10 * time.Millisecond)
		p, err := client.DeadLetters(ctx, "emails", ontime.ListOptions{})
		if err != nil {
			log.Fatal(err)
		}
		dead = p.Dead
	}
	sort.Slice(dead, func(i, j int) bool { return dead[i].ID < dead[j].ID })
	for _, d := range dead {
		fmt.Printf("dead: %s %q attempts=%d reason=%s error=%q\n", d.ID, d.Body, d.Attempt, d.Reason, d.LastError)
	}

	// One dead letter by id, with its whole body.
	one, err := client.DeadLetter(ctx, "emails", "mail-2")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("one: %s %q\n", one.ID, one.Body)

	fixed.Store(true)
	n, err := client.ReplayDeadLetters(ctx, "emails", "mail-1") // due at once, attempts reset
	fmt.Println("replayed:", n, err)
	<-done
	n, err = client.PurgeAllDeadLetters(ctx, "emails") // all that are left
	fmt.Println("purged:", n, err)
	worker.Stop(ctx)
	// Output:
	// dead: mail-1 "welcome mail" attempts=2 reason=max_attempts error="template missing"
	// dead: mail-2 "spam" attempts=2 reason=max_attempts error="blocked by the mail server"
	// one: mail-2 "spam"
	// replayed: 1 <nil>
	// sent welcome mail (attempt 1)
	// purged: 1 <nil>
}
