package node

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestOfflineRecheck: requests that find a node remembered offline share
// one probe; a node that answers it is back at once, one that does not
// stays offline with the probe's cause.
func TestOfflineRecheck(t *testing.T) {
	for _, up := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			o := NewOffline(time.Minute, time.Now)
			o.Mark("N", "connection refused")
			open := make(chan struct{})
			var probes, inFlight, most atomic.Int64
			probe := func() {
				probes.Add(1)
				n := inFlight.Add(1)
				defer inFlight.Add(-1)
				most.Store(max(most.Load(), n))
				<-open
				if up {
					o.Clear("N")
				} else {
					o.Mark("N", "still refused")
				}
			}
			const reqs = 5
			var wg sync.WaitGroup
			offs := make([]bool, reqs)
			for i := range reqs {
				wg.Go(func() { _, offs[i] = o.Recheck(context.Background(), "N", probe) })
			}
			synctest.Wait()
			close(open)
			wg.Wait()
			if probes.Load() != 1 || most.Load() != 1 {
				t.Errorf("up %v: probes %d, most at once %d, want 1 and 1", up, probes.Load(), most.Load())
			}
			for i, off := range offs {
				if off == up {
					t.Errorf("up %v: request %d offline = %v, want %v", up, i, off, !up)
				}
			}
			if cause, off := o.Lookup("N"); !up && (!off || cause != "still refused") {
				t.Errorf("after a failed probe: Lookup = %q, %v, want the probe's cause", cause, off)
			}
		})
	}
}
