//go:build !linux

package mcp

import "os/exec"

// setParentDeathSignal has no portable equivalent off Linux; Close still
// ends the child.
func setParentDeathSignal(*exec.Cmd) {}
