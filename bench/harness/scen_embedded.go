package harness

import "context"

// embedded runs the throughput phases (publish one by one and batched,
// fire+ack, end to end) on the embedded stores: ontime's (ontimebolt) and
// River's on SQLite, with the same N (Config.EmbeddedN) and W for both.
func (b *bench) embedded(ctx context.Context, specs []sysSpec) {
	cfg := b.cfg
	b.logf("== embedded: N=%d, W=%d, %d publishers, batch %d, body %d B, %d runs",
		cfg.EmbeddedN, cfg.W, cfg.Publishers, cfg.Batch, cfg.BodySize, cfg.Runs)
	b.rep.Embedded = append(b.rep.Embedded, b.throughputRuns(ctx, "embedded", specs, func(sysSpec) int { return cfg.EmbeddedN })...)
}
