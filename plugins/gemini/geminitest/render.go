package geminitest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
)

// textFragments is how many pieces a streamed text is cut into.
const textFragments = 4

// signature is the opaque thoughtSignature the fake puts on an answer's
// first function call, as Gemini's thinking models do.
var signature = base64.StdEncoding.EncodeToString([]byte("geminitest-thought-signature"))

// parts renders a response's content: its text, then one functionCall part
// per tool call (with its id; the first carries a thought signature).
func parts(r llm.Response) []wirePart {
	var out []wirePart
	if r.Text != "" {
		out = append(out, wirePart{Text: r.Text})
	}
	for i, c := range r.ToolCalls {
		p := wirePart{FunctionCall: &wireFunctionCall{ID: c.ID, Name: c.Name, Args: c.Arguments}}
		if i == 0 {
			p.ThoughtSignature = signature
		}
		out = append(out, p)
	}
	return out
}

// finishReason is the API's name for a stop reason: Gemini says STOP for
// the end of a turn, a function call and a stop sequence alike.
func finishReason(s llm.StopReason) string {
	if s == llm.StopMaxTokens {
		return "MAX_TOKENS"
	}
	return "STOP"
}

// usage renders llm.Usage the way Gemini counts: promptTokenCount includes
// the cached tokens, which cachedContentTokenCount repeats.
func usage(u llm.Usage) *wireUsage {
	prompt := u.InputTokens + u.CacheReadTokens
	return &wireUsage{PromptTokenCount: prompt, CandidatesTokenCount: u.OutputTokens,
		TotalTokenCount: prompt + u.OutputTokens, CachedContentTokenCount: u.CacheReadTokens}
}

// answerBody is a whole generateContent answer.
func answerBody(r llm.Response, id string) wireResponse {
	return wireResponse{
		Candidates:    []wireCandidate{{Content: &wireContent{Role: "model", Parts: parts(r)}, FinishReason: finishReason(r.StopReason)}},
		UsageMetadata: usage(r.Usage),
		ModelVersion:  r.Model,
		ResponseID:    id,
	}
}

// streamChunks is the answer as streamGenerateContent sends it: the text in
// fragments, then each function call whole in its own chunk (the Gemini API
// never splits a call's args), the last chunk carrying the finish reason
// and the final usage; every earlier chunk carries the running usage
// (prompt tokens only).
func streamChunks(r llm.Response, id string) []wireResponse {
	var ps []wirePart
	if r.Text != "" {
		for _, f := range llmtest.Chunks(r.Text, textFragments) {
			ps = append(ps, wirePart{Text: f})
		}
	}
	ps = append(ps, parts(llm.Response{ToolCalls: r.ToolCalls})...)
	if len(ps) == 0 {
		ps = []wirePart{{Text: ""}}
	}
	running := usage(llm.Usage{InputTokens: r.Usage.InputTokens, CacheReadTokens: r.Usage.CacheReadTokens})
	chunks := make([]wireResponse, 0, len(ps))
	for i, p := range ps {
		c := wireResponse{
			Candidates:    []wireCandidate{{Content: &wireContent{Role: "model", Parts: []wirePart{p}}}},
			UsageMetadata: running,
			ModelVersion:  r.Model,
			ResponseID:    id,
		}
		if i == len(ps)-1 {
			c.Candidates[0].FinishReason = finishReason(r.StopReason)
			c.UsageMetadata = usage(r.Usage)
		}
		chunks = append(chunks, c)
	}
	return chunks
}

// refusal is Gemini's answer to a blocked prompt: a 200 with prompt
// feedback and no candidate.
func refusal(model, id string, prompt int64) wireResponse {
	return wireResponse{PromptFeedback: &wirePromptFeedback{BlockReason: "PROHIBITED_CONTENT"},
		UsageMetadata: &wireUsage{PromptTokenCount: prompt, TotalTokenCount: prompt}, ModelVersion: model, ResponseID: id}
}

// apiError is the API's error for a scripted failure kind: its HTTP status
// and {"error":{"code","message","status","details"}} body. ok is false for
// a kind the fake has no error for.
func apiError(r llmtest.Reply) (int, wireError, bool) {
	msg := r.Message
	body := func(code int, status, fallback string, details ...map[string]any) wireError {
		if msg == "" {
			msg = fallback
		}
		return wireError{Error: wireErrorBody{Code: code, Message: msg, Status: status, Details: details}}
	}
	switch r.Fail {
	case llm.KindRateLimited:
		var details []map[string]any
		if s, err := strconv.Atoi(strings.TrimSpace(r.RetryAfter)); err == nil {
			details = append(details, map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": fmt.Sprintf("%ds", s)})
		}
		return http.StatusTooManyRequests, body(429, "RESOURCE_EXHAUSTED",
			"You exceeded your current quota, please check your plan and billing details.", details...), true
	case llm.KindUnavailable:
		return http.StatusServiceUnavailable, body(503, "UNAVAILABLE", "The model is overloaded. Please try again later."), true
	case llm.KindInvalidRequest:
		return http.StatusBadRequest, body(400, "INVALID_ARGUMENT", "Request contains an invalid argument."), true
	case llm.KindContextOverflow:
		switch {
		case msg == "":
			msg = "The input token count (1048577) exceeds the maximum number of tokens allowed (1048576)."
		case !strings.Contains(msg, "input token count"):
			msg = "The input token count exceeds the maximum number of tokens allowed (" + msg + ")."
		}
		return http.StatusBadRequest, body(400, "INVALID_ARGUMENT", ""), true
	case llm.KindUnauthorized:
		// Gemini answers a bad key with 400, not 401: the reason says why.
		return http.StatusBadRequest, body(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.",
			map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
				"domain": "googleapis.com", "metadata": map[string]any{"service": "generativelanguage.googleapis.com"}}), true
	}
	return 0, wireError{}, false
}

// writeJSON sends v as a JSON body with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":500,"message":"geminitest: cannot render","status":"INTERNAL"}}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeEvent sends one server-sent event holding v, as the API frames it
// ("data: {json}" and a blank line, CRLF), and flushes it.
func writeEvent(w http.ResponseWriter, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "data: %s\r\n\r\n", b); err != nil {
		return err
	}
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	return nil
}
