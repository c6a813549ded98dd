package kafkadelay_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ontime-go/ontime/kafkadelay"
)

// childEnv, when set to a comma-separated list of brokers, makes the test
// binary run a republisher of the test ladder instead of the tests (the
// kill test starts it as a subprocess and SIGKILLs it).
const childEnv = "KAFKADELAY_TEST_CHILD"

// childDefaultsEnv, when set, makes the child keep the Config's default
// group timing (session timeout, heartbeat) instead of the kill test's
// short one.
const childDefaultsEnv = "KAFKADELAY_TEST_CHILD_DEFAULTS"

func runChild() int {
	brokers := strings.Split(os.Getenv(childEnv), ",")
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...)}
	if os.Getenv(childDefaultsEnv) == "" {
		opts = append(opts, kgo.SessionTimeout(time.Second), kgo.HeartbeatInterval(200*time.Millisecond))
	}
	r, err := kafkadelay.NewRepublisher(kafkadelay.Config{
		Ladder:          testLadder(nopTB{}),
		Group:           "republishers",
		DeadLetterTopic: dlqTopic,
		Logger:          log,
		Observer:        readySignal{},
	}, opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := r.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// readySignal prints "assigned" on stdout when the child owns partitions.
type readySignal struct{ kafkadelay.BaseObserver }

func (readySignal) Rebalanced(ev kafkadelay.Rebalance) {
	if ev.Kind == "assigned" && len(ev.Partitions) > 0 {
		fmt.Println("assigned")
	}
}

// nopTB lets testLadder run outside a test.
type nopTB struct{ testingTB }

var _ = nopTB{}

func (nopTB) Helper()                   {}
func (nopTB) Fatal(args ...any)         { panic(fmt.Sprint(args...)) }
func (nopTB) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }
