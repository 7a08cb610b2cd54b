package c

import "testing"

func TestX(t *testing.T) { undefined() }
