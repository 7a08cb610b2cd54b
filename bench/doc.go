// Package bench holds benchmarks that span packages: the chain engine's own
// overhead per model turn, over mock models that answer at once, and the
// encoding of a chain trace. The load harness that drives the built proxy
// over HTTP is the command in bench/load; docs/performance-log.md records
// what both measured, PERFORMANCE.md sums it up.
//
// It has no code of its own and nothing imports it.
package bench
