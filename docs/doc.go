// Package docs holds no code for programs to import: it is the home of the
// guides in this directory, and its tests keep them, and the README, true.
//
//   - TestGoBlocksCompile type-checks every ```go block of README.md and
//     docs/*.md against the module as it is, and logs how many blocks it
//     compiled and how many fragments it skipped;
//   - TestReadmeHelloIsTheExample checks that the README's hello world is
//     examples/hello/main.go, character for character, from its package
//     clause on;
//   - TestRelativeLinksResolve checks that every relative link points at a
//     file that exists, and that the README links every page of the tour;
//   - TestConformanceIndexNamesRealTests checks that every test
//     conformance.md cites for a clause of the kernel spec exists in the
//     package it names, and that the page's counts match its rows.
//
// A block that is deliberately partial (an excerpt with …) is marked with an
// HTML comment on the line right before its fence, and is skipped:
//
//	<!-- fragment -->
//	```go
//	if err != nil { … }
//	```
//
// Every other block must compile. A block that starts with a package clause
// is a Go file; the blocks of one document with the same package clause are
// the files of one package (a flow and its tests, say). A block without one
// is a run of declarations, a package of its own, to which the test adds a
// package clause and the imports of the packages it names (loom, sqlite,
// memstore, context, time… see knownImports in docs_test.go).
package docs
