// Package node is the proxy's node layer: what a configured node is to the
// stage engine above it. It declares the backend contract (Backend, its
// optional capabilities Prober, Describer, WindowReader and Thinker, and
// the neutral Request, Chunk and Message they speak), the errors a node
// call fails with (UpstreamError and its kinds), a node of several hosts
// and the choice among them (Hosts), the clock of one call (CallClock),
// the caps on what an upstream may send (NewHTTPClient) and on what a
// call passes on, masked (Caps), the set of nodes remembered offline and
// their probing (Offline), the splitting of reasoning written in think
// tags (ThinkSplitter), and the admission of calls (Admission, shared
// across replicas by SharedAdmission), which on an Ollama server several
// nodes share schedules them around model loads and loads the later
// stages' models early (ScheduleLoads, Warm, the optional ModelLoader of a
// backend). Build makes the configured nodes' Set, which also remembers
// what their servers said (capabilities, windows, whether they answer):
// the engine reads it to run calls, and web's operational endpoints
// (/readyz, /api/ps, /metrics) read it without the engine. The backends
// of the two protocols live
// below it, in node/ollama and node/openai.
//
// The keep-alive a call asks for stays in the engine (run.keepAlive):
// it is the client's in simple mode and relay, the node's configured one
// in the chain, a choice made on the request's mode, which is the
// engine's state, not the node's; a method here would take the mode as
// an argument and only forward.
//
// It must not import the engine (chain), web, store, tools, classify or
// memory: a backend needs none of them, and the packages that do need a
// node reach it through this contract. imports_test.go checks it.
package node
