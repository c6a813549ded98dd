package kafkadelay_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ontime-go/ontime/kafkadelay"
)

// ParseMeta never panics, and what it accepts round-trips: a due instant
// in range, a valid destination, an id of 1 to 255 bytes.
func FuzzParseMeta(f *testing.F) {
	f.Add("1700000000123", "orders", "id-1", "1700000000000", "")
	f.Add("", "", "", "", "")
	f.Add("-1", "a b", "x", "nan", "ontime-due-ms")
	f.Add("253402300799999", "..", "x", "0", "ontime-id")
	f.Fuzz(func(t *testing.T, due, dest, id, ts, extra string) {
		hs := []kgo.RecordHeader{
			{Key: kafkadelay.HeaderDue, Value: []byte(due)},
			{Key: kafkadelay.HeaderDestination, Value: []byte(dest)},
			{Key: kafkadelay.HeaderID, Value: []byte(id)},
			{Key: kafkadelay.HeaderTimestamp, Value: []byte(ts)},
		}
		if extra != "" {
			hs = append(hs, kgo.RecordHeader{Key: extra, Value: []byte(due)})
		}
		m, err := kafkadelay.ParseMeta(hs)
		if err != nil {
			if !errors.Is(err, kafkadelay.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if n, err := strconv.ParseInt(due, 10, 64); err != nil || n != m.Due.UnixMilli() {
			t.Fatalf("due %q parsed as %v", due, m.Due)
		}
		if m.Due.After(kafkadelay.MaxDue) || m.Due.UnixMilli() < 0 {
			t.Fatalf("due %v out of range accepted", m.Due)
		}
		if err := kafkadelay.ValidTopic(m.Destination); err != nil || m.Destination != dest {
			t.Fatalf("destination %q accepted: %v", dest, err)
		}
		if m.ID != id || len(id) == 0 || len(id) > 255 {
			t.Fatalf("id %q accepted", id)
		}
	})
}
