package main

import (
	"errors"
	"fmt"
	"time"

	"chainproxy/config"
	"chainproxy/web"
)

// errExposed refuses to serve every interface with no key: anyone on the
// network could run the chain and its file tools.
var errExposed = errors.New("refusing to start")

// checkExposure is the secure default on a network: a non-loopback
// server.addr needs server.api_keys, or server.allow_unauthenticated to say
// the operator means it.
func checkExposure(s config.Server) error {
	if web.LoopbackAddr(s.Addr) || len(s.APIKeys) > 0 || s.AllowUnauthenticated {
		return nil
	}
	return fmt.Errorf("%w: server.addr %q is reachable from the network and server.api_keys is empty; "+
		"set server.api_keys, bind to 127.0.0.1, or set server.allow_unauthenticated: true to insist", errExposed, s.Addr)
}

// drainBefore is when, within the shutdown grace period, streams still
// running are ended with an error event and [DONE]: late enough to let most
// finish, early enough to write the ending before connections are cut.
func drainBefore(grace time.Duration) time.Duration {
	return grace - min(grace/2, time.Second)
}
