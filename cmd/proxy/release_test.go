package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// releaseTags are the build tags of a release build, as README's
// "Operating it" gives them and as bench/load builds the proxy it measures.
//
//   - grpcnotrace (gRPC's switch) leaves out golang.org/x/net/trace, which
//     the OTLP gRPC exporter would otherwise bring. Its init registers
//     /debug/requests on http.DefaultServeMux (never served here) through
//     html/template, and text/template calls methods by name through
//     reflection: with it in the binary the linker must keep every exported
//     method of every reachable type (gin's unused RunQUIC, and with it
//     quic-go).
//   - nomsgpack (gin's switch) leaves out msgpack binding and rendering,
//     which the proxy never uses, and the ugorji codec with them.
//
// Together they take the binary from 61 to 33 MB and the resident memory
// of a running proxy down by about 7 MB (PERFORMANCE.md).
const releaseTags = "grpcnotrace,nomsgpack"

// TestReleaseBuildPrunesMethods links the proxy as a release build and
// reads the linker's dependency dump: no function may mark the binary as
// calling methods by name through reflection (a new dependency that does
// would silently bring back every unused method), and neither package the
// tags leave out may be linked.
func TestReleaseBuildPrunesMethods(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "proxy")
	cmd := exec.Command("go", "build", "-tags", releaseTags, "-ldflags=-dumpdep", "-o", bin, ".")
	// The dump goes to the linker's stderr; go build passes it through.
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("cannot run go build, and CI is set so this test may not be skipped: %v", err)
		}
		t.Skipf("skipping: cannot run go build: %v", err)
	}
	banned := []string{"golang.org/x/net/trace.", "github.com/ugorji/go/codec."}
	reflecting := map[string]bool{}
	found := map[string]string{}
	edges := 0
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var other strings.Builder
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, " -> ") {
			other.WriteString(line + "\n")
			continue
		}
		edges++
		for side := range strings.SplitSeq(line, " -> ") {
			if fn, ok := strings.CutSuffix(side, " <ReflectMethod>"); ok {
				reflecting[fn] = true
			}
		}
		for _, b := range banned {
			if _, ok := found[b]; !ok && strings.Contains(line, b) {
				found[b] = line
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("go build -tags %s: %v\n%s", releaseTags, err, other.String())
	}
	if edges < 1000 {
		t.Fatalf("the linker printed %d dependency edges: -ldflags=-dumpdep no longer dumps them here\n%s", edges, other.String())
	}
	for fn := range reflecting {
		t.Errorf("%s calls methods by name through reflection: with it in the release build the linker keeps every exported method", fn)
	}
	for b, l := range found {
		t.Errorf("the release build links %s, which -tags %s should leave out: %s", strings.TrimSuffix(b, "."), releaseTags, l)
	}
	// An operator tells a release build by its -version.
	out, err := exec.Command(bin, "-version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), " tags="+releaseTags) {
		t.Errorf("%s -version = %q, %v; want it to name tags=%s", bin, out, err, releaseTags)
	}
}

// TestReleaseTagsWritten keeps the places that build a release binary on
// the same tags as the test above.
func TestReleaseTagsWritten(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"README.md", "go build -tags " + releaseTags},
		{"docs/replicas.md", "go build -tags " + releaseTags},
		{"bench/load/procs.go", `releaseTags = "` + releaseTags + `"`},
	} {
		b, err := os.ReadFile(filepath.Join("..", "..", c.file))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), c.want) {
			t.Errorf("%s does not contain %q", c.file, c.want)
		}
	}
}
