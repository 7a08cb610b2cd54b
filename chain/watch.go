package chain

// Watcher sees the events of every run as they happen, whatever front
// started it and whether or not that front follows the run itself: the
// cockpit's list of traces follows running chains through it. Watch runs on
// the run's goroutine and must return at once (no I/O, no waiting). On an
// EventClassified it may give the run another trace id (req.TraceID), the
// chain's own where the one it came with is taken.
type Watcher interface {
	Watch(req *RunRequest, ev Event)
}

// SetWatcher makes w see every later run's events (nil stops it).
func (e *Engine) SetWatcher(w Watcher) {
	if w == nil {
		e.watcher.Store(nil)
		return
	}
	e.watcher.Store(&w)
}

// watched wraps emit so that the engine's Watcher, if any, sees each event
// before emit does. Deltas are not shown to it: they are the answer's text,
// many per second, and say nothing of the chain's progress.
func (e *Engine) watched(req *RunRequest, emit func(Event) error) func(Event) error {
	p := e.watcher.Load()
	if p == nil {
		return emit
	}
	w := *p
	return func(ev Event) error {
		if ev.Kind != EventDelta {
			w.Watch(req, ev)
		}
		return emit(ev)
	}
}
