// Package abtest times two ways of doing one thing in the same benchmark
// run, interleaved, and reports their ratio: what a benchmark that
// measures a cost against its baseline needs, so that the machine's load
// falls on both alike. For tests only.
package abtest

import (
	"slices"
	"testing"
	"time"
)

// Compare runs a and base b.N times each, one of each per iteration,
// alternating which goes first, each returning how long its own work
// took (not its setup). It reports the median of each, in µs, as
// "NAME-µs", and their ratio as "A/BASE": medians, because on a shared
// machine a few tries wait for the scheduler or the collector, and a sum
// would be theirs.
func Compare(b *testing.B, name string, a func() time.Duration, baseName string, base func() time.Duration) {
	as, bases := make([]time.Duration, b.N), make([]time.Duration, b.N)
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			as[i], bases[i] = a(), base()
		} else {
			bases[i], as[i] = base(), a()
		}
	}
	am, bm := median(as), median(bases)
	b.ReportMetric(float64(am)/float64(bm), name+"/"+baseName)
	b.ReportMetric(float64(am)/1e3, name+"-µs")
	b.ReportMetric(float64(bm)/1e3, baseName+"-µs")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
