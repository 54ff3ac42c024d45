package breaker

import "time"

// window counts outcomes over a rolling span of time, in fixed-width buckets
// kept in a ring; a bucket is emptied when the clock moves past it, so old
// outcomes drop off a bucket at a time rather than all at once.
type window struct {
	buckets  []bucket
	width    time.Duration
	start    time.Time // bucket numbers count widths from here
	head     int64     // number of the newest bucket
	total    int
	failures int
}

type bucket struct {
	total    int
	failures int
}

func newWindow(span time.Duration, buckets int, start time.Time) window {
	return window{
		buckets: make([]bucket, buckets),
		width:   max(span/time.Duration(buckets), 1),
		start:   start,
	}
}

// advance empties the buckets the clock has moved past. A clock that stepped
// back leaves head alone, so the outcome lands in the newest bucket.
func (w *window) advance(now time.Time) {
	n := int64(now.Sub(w.start) / w.width)
	if n <= w.head {
		return
	}
	steps := min(n-w.head, int64(len(w.buckets)))
	for i := int64(1); i <= steps; i++ {
		bk := &w.buckets[(w.head+i)%int64(len(w.buckets))]
		w.total -= bk.total
		w.failures -= bk.failures
		*bk = bucket{}
	}
	w.head = n
}

func (w *window) record(now time.Time, success bool) {
	w.advance(now)
	bk := &w.buckets[w.head%int64(len(w.buckets))]
	bk.total++
	w.total++
	if !success {
		bk.failures++
		w.failures++
	}
}

func (w *window) reset() {
	clear(w.buckets)
	w.total, w.failures = 0, 0
}
