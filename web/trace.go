package web

import "chainproxy/chain"

// encodeTrace encodes tr for a response, with each stage's output and
// reasoning capped, and for the trace store, whole. stored is nil when the
// two would differ, so that storeTrace encodes the whole trace itself; a
// trace with nothing to cut is encoded once.
func encodeTrace(tr *chain.Trace) (resp, stored []byte, err error) {
	capped, cut := tr.Capped(chain.OutputCap)
	if resp, err = marshal(&capped); err != nil || cut {
		return resp, nil, err
	}
	return resp, resp, nil
}

// cappedStage is st as responses show it: output and reasoning capped.
func cappedStage(st *chain.StageTrace) *chain.StageTrace {
	if st == nil {
		return nil
	}
	tr := chain.Trace{Stages: []chain.StageTrace{*st}}
	c, _ := tr.Capped(chain.OutputCap)
	return &c.Stages[0]
}
