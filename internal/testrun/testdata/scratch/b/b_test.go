package b

import "testing"

func TestPanic(t *testing.T) { panic("oops") }
