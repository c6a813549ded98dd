// Package kafkadelay provides delayed delivery for Kafka: a [Producer] that
// publishes a record to be delivered to its topic after a delay (or at an
// instant), and a [Republisher] service that delivers it at its due
// instant, never before, with nothing but Kafka topics as storage.
//
// It is built on franz-go and lives in its own Go module, so users of the
// ontime library never download a Kafka client.
//
//	ladder := kafkadelay.RecommendedLadder("ontime.delay.")
//	producer, _ := kafkadelay.NewProducer(cl, ladder) // cl: your *kgo.Client
//	id, err := producer.PublishIn(ctx, &kgo.Record{Topic: "invoices", Value: body}, 30*24*time.Hour)
//
//	rp, _ := kafkadelay.NewRepublisher(kafkadelay.Config{
//		Ladder: ladder, Group: "ontime-republisher", DeadLetterTopic: "ontime.delay.dead-letters",
//	}, kgo.SeedBrokers("kafka:9092"))
//	err = rp.Run(ctx)
//
// The binary runs the republisher from a TOML file: `ontime republish
// --config FILE` (package kafkaconfig reads it; the layout of the reference "delay
// topics strategy" settings is accepted as it is). docs/kafka.md in the
// repository has the whole design, the configuration and the measured
// numbers.
//
// # The ladder
//
// A [Ladder] is a set of bucket topics, each with one fixed delay, for
// example 1s, 5s, 15s, 1m, 5m, 15m, 1h, 6h and 24h ([RecommendedLadder]).
// A record whose remaining delay is r goes to the largest bucket whose
// delay is at most r (delays beyond the largest go to the largest, as
// often as needed). When it has waited its bucket's delay, the republisher
// routes what remains the same way, so the record steps down the ladder;
// once less than the smallest delay remains, the republisher holds it in
// memory and produces it to the destination at its exact due instant. A
// record due in less than the smallest delay at publish goes to the
// smallest bucket, which the republisher reads at once (holding its
// records in memory, each for less than the smallest delay).
//
// Because each bucket has one delay, the records of a bucket partition
// that belong in it (their remaining delay was at least its delay) are due
// to move in the order they were appended (their timestamps), so the
// republisher only waits for the head of a partition. It keeps reading
// behind a waiting head (up to [Config.ReadAhead] records, then it pauses
// the partition with franz-go's PauseFetchPartitions and resumes it with a
// timer), and a record that must not wait behind the head — one in a
// bucket larger than its remaining delay, as producers that round up write
// ([RoundUp], [Ladder.RouteUp]) — is moved on at once, so no record holds
// up the line. It reads each record into memory [Config.Prefetch] before
// its instant so that the fetch round trip never makes it late, and never
// sleeps in its poll loop. A delay is never rounded up to a bucket: the
// last step is exact.
//
// # A crash
//
// A republisher killed without leaving its group keeps its partitions
// until the group's session timeout ([Config.SessionTimeout], 6s by
// default) passes; the others then take them over from the last commit, so
// records due meanwhile are late by about that much, never early, never
// lost.
//
// # Never early
//
// The republisher produces a record to its destination only when its
// clock has reached the due instant in the [HeaderDue] header (rounded up
// to the millisecond at publish), checked again right before the produce
// (a timer that fires early, or a clock set back, re-arms). Steps between
// buckets can happen early (a bucket's delay counts from the record's
// timestamp, capped by the due instant), never the release. Keep the
// clocks of producers and republishers synchronised (NTP): the due
// instant of PublishIn comes from the producer's clock, the release from
// the republisher's.
//
// # At least once, and when duplicates happen
//
// The republisher produces with franz-go's idempotent producer and acks
// from all in-sync replicas, and commits a partition's offset only up to
// the contiguous run of records whose produce was acknowledged. So a
// crash never loses a record; it repeats the records past the last
// commit whose output had already been produced (a crash test SIGKILLs a
// republisher and checks the duplicates against exactly that count). A
// rebalance produces no duplicates except for produces still unacknowledged
// after [Config.RevokeWait]: a revoked partition's records waiting in
// memory are handed off (produced to the bucket their remaining delay
// routes them to) so that the offsets behind them can be committed. A
// delivered record carries [HeaderID], the same on every copy, for
// consumers that must drop duplicates.
//
// # Bad records and failing produces
//
// A bucket record whose ontime headers are missing or malformed, or whose
// destination cannot take it (unknown topic, record too large, not
// authorised), goes to the dead-letter topic with [HeaderDeadReason] and
// [HeaderDeadSource]; the partition keeps flowing. Any other produce error
// is retried with backoff ([Config.RetryMin] to [Config.RetryMax]); the
// partition is paused meanwhile and no offset is committed past the
// record.
//
// # Observability
//
// [Republisher.Stats] gives, per partition, how far past its instant the
// head record is ([PartitionStats.HeadLate]: the lag that matters for a
// delay topic, where offset lag means nothing), what is buffered, held and
// being produced, and counters of records released, rerouted,
// dead-lettered, produce errors and releases before the due instant
// (which must stay 0). An [Observer] receives each event, for metrics.
// The republisher logs a line per rebalance.
package kafkadelay
