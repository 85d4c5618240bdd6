// Package dispatchtest is the conformance kit of the Dispatcher SPI (spec
// §7, dispatch.DispatcherSPIVersion; runExecutionDispatcherConformance in
// the original): RunDispatcher drives a Dispatcher under test through
// starts, gate answers, duplicates, refusals and concurrent load, over a real
// loom.Runtime the factory builds with the kit's flows.
//
// A dispatcher is conformant when the kit passes with no skips under -race.
// Every dispatcher of this module runs it: dispatch.LocalDispatcher over a
// LocalWorker, the SupervisingDispatcher around it, and
// plugins/workerhttp's RemoteWorker across a loopback HTTP server. A
// third-party dispatcher calls it the same way:
//
//	func TestMyDispatcher(t *testing.T) {
//		dispatchtest.RunDispatcher(t, func(t *testing.T, flows []*loom.Flow) dispatch.Dispatcher {
//			rt, _ := loom.New(loom.Config{Events: memstore.NewEventStore(), Flows: flows})
//			t.Cleanup(func() { rt.Close() })
//			return newMyDispatcher(&dispatch.LocalWorker{Runtime: rt})
//		})
//	}
//
// The kit asserts outcomes a caller can observe through the SPI only — the
// reported ExecutionResult, typed errors (errors.Is / errors.As through any
// transport), dispatch.IsRetryable — plus how many times each step's effect
// ran, which its flows count in process. Execution ids carry a random
// prefix per subtest, so a factory may share one store across subtests.
package dispatchtest
