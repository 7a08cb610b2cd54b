package main

import (
	"fmt"
	"os"
	"runtime/debug"
)

// version describes the binary from its build info: the module version
// (a pseudo-version or "(devel)" for a local build) and, when the build
// recorded them, the VCS revision and whether the tree was modified.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "chainproxy (no build info)"
	}
	v := "chainproxy " + bi.Main.Version + " " + bi.GoVersion
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+dirty"
			}
		}
	}
	if rev != "" {
		v += " " + rev + modified
	}
	return v
}

// checkToolsRoot fails when the file tools' root is not a directory: every
// tool call would fail, visible only in traces, so it is a startup error.
func checkToolsRoot(root string) error {
	fi, err := os.Stat(root)
	if err != nil {
		return fmt.Errorf("config: tools.root: %w (create it or set tools.root)", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("config: tools.root: %s is not a directory", root)
	}
	return nil
}
