package harness

import "context"

// HTTPResult is a stub.
type HTTPResult struct{}

func (b *bench) http(context.Context) {}
