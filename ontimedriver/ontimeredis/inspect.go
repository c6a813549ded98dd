package ontimeredis

import (
	"context"
	"strconv"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
)

// CountDue counts a topic's timers between bounds with one script call:
// one ZCOUNT of the due sorted set per bound, O(log N) each, whatever the
// topic's size. See ontimedriver.Driver.
func (d *Driver) CountDue(ctx context.Context, topic string, bounds []time.Time) ([]int64, error) {
	if err := ontimedriver.ValidateDueBounds(bounds); err != nil {
		return nil, err
	}
	if s := d.sharded(topic); s != nil {
		return d.countDueSharded(ctx, s, bounds)
	}
	args := make([]any, len(bounds))
	for i, b := range bounds {
		if d.compat {
			args[i] = compatScore(b)
		} else {
			args[i] = strconv.FormatInt(ceilMs(b), 10)
		}
	}
	res, err := d.eval(ctx, sCountDue, []string{d.keys(topic).due}, args...)
	if err != nil {
		return nil, err
	}
	a, err := replyArray(res)
	if err != nil || len(a) != len(bounds)+1 {
		return nil, errReply
	}
	out := make([]int64, len(a))
	for i, v := range a {
		out[i] = replyInt(v)
	}
	return out, nil
}

// compatScore is an instant as a compatible-layout score: seconds with six
// decimals, rounded up to the microsecond.
func compatScore(t time.Time) string {
	us := t.UnixMicro()
	if t.After(time.UnixMicro(us)) {
		us++
	}
	sec := floorDiv(us, 1_000_000)
	frac := us - sec*1_000_000
	return strconv.FormatInt(sec, 10) + "." + leftPad6(frac)
}

func leftPad6(n int64) string {
	s := strconv.FormatInt(n, 10)
	for len(s) < 6 {
		s = "0" + s
	}
	return s
}

// FireNow makes a scheduled timer due now with one script call. See
// ontimedriver.Driver; the compatible layout cannot tell a leased timer.
func (d *Driver) FireNow(ctx context.Context, topic, id string) (time.Time, error) {
	if s := d.sharded(topic); s != nil {
		topic = s.names[s.of(id)]
	}
	k := d.keys(topic)
	var (
		res any
		err error
	)
	if d.compat {
		res, err = d.eval(ctx, sCFire, []string{k.due, k.msg}, id, k.wake)
	} else {
		res, err = d.eval(ctx, sFire, d.withIndex([]string{k.due, k.msg, k.lease}), id, k.wake, topic)
	}
	if err != nil {
		return time.Time{}, err
	}
	a, err := replyArray(res)
	if err != nil || len(a) < 1 {
		return time.Time{}, errReply
	}
	switch replyInt(a[0]) {
	case 1:
		return time.Time{}, ontimedriver.ErrNotFound
	case 2:
		return time.Time{}, ontimedriver.ErrLeased
	}
	if len(a) != 2 && (d.compat || len(a) != 4) {
		return time.Time{}, errReply
	}
	if len(a) == 4 {
		// made due: the index entry is lowered
		d.hintAfter(ctx, topic, a[2], hintLower, a[3], false)
	}
	if d.compat {
		return usTime(replyInt(a[1])), nil
	}
	return msTime(replyInt(a[1])), nil
}
