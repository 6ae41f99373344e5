package audit

import (
	"sync"
	"time"
)

// A command chooses how many records its stream gets (a loop of refused
// connections makes one each), and the stream is on the host's disk,
// beyond any limit the command runs under. A Limiter bounds one stream's
// rate: records that may be dropped (network and denial records, and the
// decisions --learn let through: the caller says which) are counted, not
// written, once its bucket is empty, the count written as a [Dropped]
// record before the stream's next record that passes, or at its end. A
// record that may not be dropped (a decision of the rules, a run's end)
// waits for a token instead, and so does the caller, whose action goes on
// only once its record is written: a command that makes refused programs
// without end is slowed to the rate rather than left unrecorded.

// Bucket is a token bucket. Its zero value is full.
type Bucket struct {
	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// Take takes a token of a bucket of burst tokens refilled at rate a
// second, if it has one; force takes one if it has one, and says yes
// anyway.
func (b *Bucket) Take(now time.Time, rate float64, burst int, force bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last.IsZero() {
		b.tokens = float64(burst)
	} else {
		b.tokens = min(float64(burst), b.tokens+now.Sub(b.last).Seconds()*rate)
	}
	b.last = now
	if b.tokens < 1 {
		return force
	}
	b.tokens--
	return true
}

// minRate is the least rate a Limiter takes: a kept record waits at most
// a thousand seconds for its token (a smaller rate's wait overflowed a
// Duration, and Add spun).
const minRate = 0.001

// Limiter bounds the rate of one stream's records (see above). Its fields
// are set before its first use.
type Limiter struct {
	// Rate (records a second) and Burst bound the stream: a Rate below
	// 0.001 is taken as 0.001, a Burst below 1 as 1.
	Rate  float64
	Burst int
	// Shared, if set, is a bucket of several streams together, of
	// SharedRate and SharedBurst: a record that may be dropped is dropped
	// when it has no token either; one that may not takes a token of it
	// if there is one, and does not wait for it (each stream's own rate
	// bounds those).
	Shared      *Bucket
	SharedRate  float64
	SharedBurst int
	// Write writes a record that passed.
	Write func(rec any)
	// WriteDropped writes the count of the records dropped (Dropped's
	// Time, Count, Shared, Types and Since are set; the caller names the
	// stream).
	WriteDropped func(d Dropped)

	mu      sync.Mutex // held while a record is written: the stream's stay in order
	tokens  float64
	last    time.Time
	started bool
	waiting int // records that may not be dropped, waiting for a token
	dropped int
	shared  int // of dropped, those over the shared bucket
	byType  map[string]int
	since   time.Time
}

// refill adds the tokens of the time since the last record.
func (l *Limiter) refill(now time.Time) {
	if !(l.Rate >= minRate) { // NaN too
		l.Rate = minRate
	}
	l.Burst = max(l.Burst, 1)
	if !l.started {
		l.started, l.tokens = true, float64(l.Burst)
	} else {
		l.tokens = min(float64(l.Burst), l.tokens+now.Sub(l.last).Seconds()*l.Rate)
	}
	l.last = now
}

func (l *Limiter) takeShared(now time.Time, force bool) bool {
	return l.Shared == nil || l.Shared.Take(now, l.SharedRate, l.SharedBurst, force)
}

// Add writes rec, whose kind ("type") is kind, unless the stream is over
// its rate (or the shared one) and keep is false: then it is counted. A
// record kept waits for a token, and Add with it.
func (l *Limiter) Add(rec any, kind string, keep bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if keep {
		for l.refill(now); l.tokens < 1; l.refill(now) {
			wait := time.Duration((1 - l.tokens) / l.Rate * float64(time.Second))
			l.waiting++
			l.mu.Unlock()
			time.Sleep(wait)
			l.mu.Lock()
			l.waiting--
			now = time.Now()
		}
		l.tokens--
		l.takeShared(now, true)
		l.flushLocked(now)
		l.Write(rec)
		return
	}
	l.refill(now)
	// The tokens that come while a record that may not be dropped waits
	// are its.
	if own := l.tokens >= 1 && l.waiting == 0; !own || !l.takeShared(now, false) {
		if l.dropped == 0 {
			l.since = now
			l.byType = map[string]int{}
		}
		l.dropped++
		if own {
			l.shared++
		}
		if kind == "" {
			kind = "other"
		}
		l.byType[kind]++
		return
	}
	l.tokens--
	l.flushLocked(now)
	l.Write(rec)
}

// flushLocked writes the count of the records dropped, if any. The count
// costs a token too, so that the stream's rate holds.
func (l *Limiter) flushLocked(now time.Time) {
	if l.dropped == 0 {
		return
	}
	l.tokens--
	l.takeShared(now, true)
	l.WriteDropped(Dropped{Type: TypeDropped, Time: now.UTC(), Count: l.dropped, Daemon: l.shared,
		Types: l.byType, Since: l.since.UTC()})
	l.dropped, l.shared, l.byType = 0, 0, nil
}

// Finish writes the count of what was dropped, if anything was, then
// last unless it is nil, with no token: the stream's end.
func (l *Limiter) Finish(last any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flushLocked(time.Now())
	if last != nil {
		l.Write(last)
	}
}
