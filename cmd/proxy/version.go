package main

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"runtime/debug"

	"chainproxy/config"
)

// version describes the binary from its build info: the module version
// (a pseudo-version or "(devel)" for a local build), when the build
// recorded them the VCS revision and whether the tree was modified, and its
// build tags (a release build has grpcnotrace,nomsgpack: README).
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "chainproxy (no build info)"
	}
	v := "chainproxy " + bi.Main.Version + " " + bi.GoVersion
	var rev, modified, tags string
	for _, s := range bi.Settings {
		switch s.Key {
		case "-tags":
			tags = s.Value
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
	if tags != "" {
		v += " tags=" + tags
	}
	return v
}

// settleToolsRoot decides whether the built-in file tools run. An empty
// root turns them off. A root the file sets must be a directory: every tool
// call would fail, visible only in traces, so it is a startup error, placed
// at its line. The default root (./workspace) is optional: without it the
// proxy starts with the file tools off and says so once, so a config with
// no file tools (a relay, HTTP or MCP tools only) needs no folder.
func settleToolsRoot(cfg *config.Config, logger *slog.Logger) error {
	root := cfg.Tools.Root
	if root == "" {
		logger.Info("built-in file tools off: tools.root is empty")
		return nil
	}
	fi, err := os.Stat(root)
	where := cfg.Where("tools.root")
	switch {
	case err != nil && where == "":
		logger.Info("built-in file tools off: the default tools.root does not exist; create it or set tools.root", "root", root)
		cfg.Tools.Root = ""
		return nil
	case err != nil && errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: tools.root: %q does not exist: create it, or set tools.root: \"\" to turn the built-in file tools off", where, root)
	case err != nil:
		return fmt.Errorf("%s: tools.root: %w", where, err)
	case !fi.IsDir():
		return fmt.Errorf("%s: tools.root: %q is not a directory", cmp.Or(where, "config"), root)
	}
	return nil
}
