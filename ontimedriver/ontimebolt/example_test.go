package ontimebolt_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

// Cancel many timers of a topic in one transaction: each id gets its own
// result.
func ExampleDriver_CancelBatch() {
	dir, _ := os.MkdirTemp("", "ontimebolt-example-")
	defer os.RemoveAll(dir)
	d, err := ontimebolt.Open(filepath.Join(dir, "timers.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()
	_, err = d.Schedule(ctx, "invoices", []ontimedriver.NewTimer{
		{ID: "a", Delay: time.Hour}, {ID: "b", Delay: time.Hour},
	}, ontimedriver.Upsert)
	if err != nil {
		log.Fatal(err)
	}
	res, err := d.CancelBatch(ctx, "invoices", []string{"a", "b", "c"})
	if err != nil {
		log.Fatal(err)
	}
	for i, id := range []string{"a", "b", "c"} {
		fmt.Println(id, res[i])
	}
	// Output:
	// a <nil>
	// b <nil>
	// c ontime: timer not found
}

// Give the space that deleted timers left back to the file system: with
// the store closed, Compact rewrites the file with only what it holds.
func ExampleCompact() {
	dir, _ := os.MkdirTemp("", "ontimebolt-example-")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "timers.db")
	d, err := ontimebolt.Open(path, nil)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	var ids []string
	for i := range 20 {
		var ts []ontimedriver.NewTimer
		for j := range 1000 {
			id := fmt.Sprintf("t-%d-%d", i, j)
			ids = append(ids, id)
			ts = append(ts, ontimedriver.NewTimer{ID: id, Delay: time.Hour, Payload: make([]byte, 200)})
		}
		if _, err := d.Schedule(ctx, "jobs", ts, ontimedriver.Upsert); err != nil {
			log.Fatal(err)
		}
	}
	for i := 0; i < len(ids)-1000; i += 1000 {
		if _, err := d.CancelBatch(ctx, "jobs", ids[i:i+1000]); err != nil {
			log.Fatal(err)
		}
	}
	sp, err := d.Space()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("mostly free:", sp.Free > sp.File/2)
	if err := d.Close(); err != nil {
		log.Fatal(err)
	}

	before, after, err := ontimebolt.Compact(path, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("a quarter or less of its size:", after <= before/4)
	// Output:
	// mostly free: true
	// a quarter or less of its size: true
}
