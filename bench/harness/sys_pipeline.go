package harness

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// pipelineSystem is the baseline: a minimal hand-written timer queue doing
// only the essential Redis commands per timer, with no leases, no fencing,
// no attempt counting and one claimer per worker process (so it is correct
// only with a single worker process). Publish: ZADD due + HSET msg,
// pipelined. Claim: ZRANGEBYSCORE due -inf now LIMIT 0 n, then ZREM + HMGET
// pipelined. Ack: one HDEL for a batch of ids. An idle claimer polls every
// millisecond. Due times are kept in milliseconds, rounded up.
type pipelineSystem struct {
	rt    roundTrips
	rdb   *redis.Client
	admin *redis.Client // uncounted: pending checks
	ids   atomic.Int64
}

func pipelineSpec() sysSpec {
	return sysSpec{
		Name: "pipeline", Family: "baseline", Store: "redis", Batch: true,
		Settings: "hand-written: publish ZADD+HSET; claim ZRANGEBYSCORE then ZREM+HMGET; ack HDEL (batched); 1 ms idle poll; no lease",
		open: func(e *env) (system, error) {
			s := &pipelineSystem{}
			s.rdb = e.newRedis(&s.rt, 64)
			s.admin = e.newRedis(nil, 4)
			return s, nil
		},
	}
}

func blKeys(queue string) (due, msg string) {
	return "bl:{" + queue + "}:due", "bl:{" + queue + "}:msg"
}

func dueScore(t time.Time) float64 {
	if t.IsZero() {
		t = time.Now()
	}
	// Round up to the millisecond: never claimable before the due time.
	return float64((t.UnixNano() + 999_999) / 1_000_000)
}

func (s *pipelineSystem) publish(ctx context.Context, queue string, ts []timer, batch int) error {
	due, msg := blKeys(queue)
	batch = max(batch, 1)
	for lo := 0; lo < len(ts); lo += batch {
		hi := min(lo+batch, len(ts))
		p := s.rdb.Pipeline()
		for _, t := range ts[lo:hi] {
			id := uuidLike(s.ids.Add(1))
			p.ZAdd(ctx, due, redis.Z{Score: dueScore(t.due), Member: id})
			p.HSet(ctx, msg, id, t.body)
		}
		if _, err := p.Exec(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (s *pipelineSystem) work(ctx context.Context, queue string, w int, h func([]byte)) (func(context.Context), error) {
	due, msg := blKeys(queue)
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	slots := make(chan struct{}, w)
	acks := make(chan string, 4*w)
	var handlers, acker, claimer sync.WaitGroup

	// Acker: one HDEL per batch of whatever is queued.
	acker.Add(1)
	go func() {
		defer acker.Done()
		ids := make([]string, 0, 512)
		for id := range acks {
			ids = append(ids[:0], id)
		drain:
			for len(ids) < 512 {
				select {
				case more, ok := <-acks:
					if !ok {
						break drain
					}
					ids = append(ids, more)
				default:
					break drain
				}
			}
			_ = s.rdb.HDel(context.Background(), msg, ids...).Err()
		}
	}()

	claimer.Add(1)
	go func() {
		defer claimer.Done()
		for ctx.Err() == nil {
			// At least one free slot, then as many more as are free.
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			n := 1
			for n < min(w, 256) {
				select {
				case slots <- struct{}{}:
					n++
					continue
				default:
				}
				break
			}
			now := strconv.FormatInt(time.Now().UnixMilli(), 10)
			ids, err := s.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: due, Start: "-inf", Stop: now, ByScore: true, Count: int64(n)}).Result()
			if err != nil || len(ids) == 0 {
				for range n {
					<-slots
				}
				select {
				case <-ctx.Done():
				case <-time.After(time.Millisecond):
				}
				continue
			}
			p := s.rdb.Pipeline()
			zrem := make([]any, len(ids))
			for i, id := range ids {
				zrem[i] = id
			}
			p.ZRem(ctx, due, zrem...)
			bodies := p.HMGet(ctx, msg, ids...)
			if _, err := p.Exec(ctx); err != nil {
				for range n {
					<-slots
				}
				continue
			}
			for range n - len(ids) {
				<-slots
			}
			for i, v := range bodies.Val() {
				id := ids[i]
				b, _ := v.(string)
				handlers.Add(1)
				go func() {
					defer handlers.Done()
					h([]byte(b))
					acks <- id
					<-slots
				}()
			}
		}
	}()
	stop := func(context.Context) {
		cancel()
		// Wait for the claimer, then the handlers, then flush the acks.
		claimer.Wait()
		handlers.Wait()
		close(acks)
		acker.Wait()
	}
	return stop, nil
}

func (s *pipelineSystem) pending(ctx context.Context, queue string) (int64, error) {
	_, msg := blKeys(queue)
	return s.admin.HLen(ctx, msg).Result()
}

func (s *pipelineSystem) roundTrips() int64 { return s.rt.load() }

func (s *pipelineSystem) close() {
	_ = s.rdb.Close()
	_ = s.admin.Close()
}

// uuidLike returns a 36-character id shaped like the UUIDs the other
// systems use, so that memory comparisons are not skewed by id length.
func uuidLike(n int64) string {
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", uint32(n>>32), uint64(n)&0xffffffffffff)
}
