package ontime

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

// TestObservedCancelBatch: a Client's observed driver passes CancelBatch
// through and reports it as "cancel_batch".
func TestObservedCancelBatch(t *testing.T) {
	t.Parallel()
	drv, err := ontimebolt.Open(filepath.Join(t.TempDir(), "timers.db"), &ontimebolt.Options{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drv.Close() })
	ctx := context.Background()
	if _, err := drv.Schedule(ctx, "t", []ontimedriver.NewTimer{{ID: "a"}}, ontimedriver.Upsert); err != nil {
		t.Fatal(err)
	}
	rec := &opRecorder{ops: map[string]int{}}
	o := &observedDriver{Driver: drv, hooks: []StoreCallHook{rec}, log: quietLog}
	res, err := o.CancelBatch(ctx, "t", []string{"a", "b"})
	if err != nil || len(res) != 2 || res[0] != nil || !errors.Is(res[1], ontimedriver.ErrNotFound) {
		t.Fatalf("CancelBatch = %v, %v; want nil, ErrNotFound", res, err)
	}
	if n := rec.count("cancel_batch"); n != 1 || len(rec.ops) != 1 {
		t.Errorf("reported %v, want one cancel_batch", rec.ops)
	}
}
