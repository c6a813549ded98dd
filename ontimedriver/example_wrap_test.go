package ontimedriver_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

// counting counts the claims that reach the store it wraps. It embeds the
// Driver and implements Wrapper, so the store's optional interfaces stay
// in view without forwarding any of them.
type counting struct {
	ontimedriver.Driver
	claims atomic.Int64
}

func (c *counting) Unwrap() ontimedriver.Driver { return c.Driver }

func (c *counting) Claim(ctx context.Context, topic string, max int, lease time.Duration) (*ontimedriver.ClaimResult, error) {
	c.claims.Add(1)
	return c.Driver.Claim(ctx, topic, max, lease)
}

// A wrapper that implements Wrapper hides none of the store's optional
// interfaces: As finds them through it.
func ExampleAs() {
	dir, err := os.MkdirTemp("", "ontime-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := ontimebolt.Open(filepath.Join(dir, "timers.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	var d ontimedriver.Driver = &counting{Driver: store}
	idx, ok := ontimedriver.As[ontimedriver.TopicIndex](d)
	fmt.Println("topic index:", ok && idx.TopicIndexed())
	fmt.Println("slow claims:", ontimedriver.ClaimsAreSlow(d))
	fmt.Println("legacy payloads:", ontimedriver.AcceptsLegacyPayloads(d))
	// Output:
	// topic index: true
	// slow claims: true
	// legacy payloads: false
}
