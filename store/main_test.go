package store_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The Fallback starts a prober and the Redis client pools connections: no
// goroutine may outlive Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
