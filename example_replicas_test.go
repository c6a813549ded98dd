package ontime_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/ontimedriver"
)

// Publish a timer that a failover of the store cannot lose: the call
// returns once one replica has it. The embedded store used here has no
// replicas and ignores the option; on Redis (ontimeredis) the publish
// waits for WAIT, and fails with ontimedriver.ErrNotReplicated when no
// replica acknowledged it within the timeout.
func ExampleWaitReplicas() {
	drv, closeStore := openStore()
	defer closeStore()
	client, err := ontime.NewClient(drv, &ontime.Config{Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	_, err = client.Publish(context.Background(), "payments", "charge 42",
		ontime.WithID("charge-42"), ontime.In(time.Hour), ontime.WaitReplicas(1, time.Second))
	switch {
	case errors.Is(err, ontimedriver.ErrNotReplicated):
		// On the primary, not yet on a replica: publish again with the
		// same id (it replaces, never duplicates), or alert.
		fmt.Println("not replicated:", err)
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Println("published charge-42")
	}
	// Output: published charge-42
}
