package harness

import (
	"math"
	"slices"
	"strconv"
	"time"
)

// quantile returns the q-quantile (0..1) of sorted by the nearest-rank
// method; NaN for an empty slice.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

// median of xs (NaN values ignored; NaN when none are left).
func median(xs []float64) float64 {
	var v []float64
	for _, x := range xs {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// LatencySummary summarises fire-time-minus-due-time samples, in
// milliseconds. Negative samples fired early.
type LatencySummary struct {
	Count int `json:"count"`
	P50   F   `json:"p50_ms"`
	P90   F   `json:"p90_ms"`
	P99   F   `json:"p99_ms"`
	Max   F   `json:"max_ms"`
	Min   F   `json:"min_ms"`
	// EarlyShare is the fraction of samples below zero, EarlyMax the most
	// negative one as a positive number of milliseconds (0 when none).
	EarlyShare F `json:"early_share"`
	EarlyMax   F `json:"early_max_ms"`
}

func summarize(ms []float64) LatencySummary {
	s := slices.Clone(ms)
	slices.Sort(s)
	out := LatencySummary{Count: len(s)}
	if len(s) == 0 {
		out.P50, out.P90, out.P99, out.Max, out.Min = nan, nan, nan, nan, nan
		return out
	}
	out.P50 = F(quantile(s, 0.50))
	out.P90 = F(quantile(s, 0.90))
	out.P99 = F(quantile(s, 0.99))
	out.Max = F(s[len(s)-1])
	out.Min = F(s[0])
	early := 0
	for _, v := range s {
		if v < 0 {
			early++
		}
	}
	out.EarlyShare = F(float64(early) / float64(len(s)))
	if s[0] < 0 {
		out.EarlyMax = F(-s[0])
	}
	return out
}

// medianSummary combines the summaries of several runs field by field.
func medianSummary(runs []LatencySummary) LatencySummary {
	if len(runs) == 0 {
		return summarize(nil)
	}
	pick := func(f func(LatencySummary) F) F {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = float64(f(r))
		}
		return F(median(v))
	}
	return LatencySummary{
		Count:      int(pick(func(r LatencySummary) F { return F(r.Count) })),
		P50:        pick(func(r LatencySummary) F { return r.P50 }),
		P90:        pick(func(r LatencySummary) F { return r.P90 }),
		P99:        pick(func(r LatencySummary) F { return r.P99 }),
		Max:        pick(func(r LatencySummary) F { return r.Max }),
		Min:        pick(func(r LatencySummary) F { return r.Min }),
		EarlyShare: pick(func(r LatencySummary) F { return r.EarlyShare }),
		EarlyMax:   pick(func(r LatencySummary) F { return r.EarlyMax }),
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return math.NaN()
	}
	return float64(n) / d.Seconds()
}

// F is a float64 that encodes NaN and infinities as JSON null.
type F float64

// MarshalJSON implements json.Marshaler.
func (f F) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, v, 'g', 6, 64), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (f *F) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*f = F(math.NaN())
		return nil
	}
	v, err := strconv.ParseFloat(string(b), 64)
	*f = F(v)
	return err
}

var nan = F(math.NaN())
