// Package anthropictest is a local fake of Anthropic's Messages API for
// tests: Server speaks the API's wire format (its JSON, its server-sent
// events, its error bodies and statuses) on loopback, decodes every request
// back into an llm.Request, and answers from an llmtest.Script. The
// anthropic package passes the llm/llmtest conformance kit against it.
//
// In a test:
//
//	srv := anthropictest.NewServer(t)
//	srv.Enqueue(llmtest.Reply{Response: llm.Response{Model: "claude-sonnet-4-6", Text: "hi", StopReason: llm.StopEnd}})
//	resp, err := srv.Provider(t, "sk-ant-test").Complete(ctx, req, nil)
//	got := srv.Requests()[0].Request // what the API would have read
//
// Outside a test (an Example, a demo), Start starts one whose Close
// reports what would have failed the test.
package anthropictest
