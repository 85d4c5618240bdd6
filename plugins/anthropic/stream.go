package anthropic

import (
	"context"
	"net/http"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/loom-kernel/loom/llm"
)

// stream makes the call with the SDK's streaming method (stream: true,
// server-sent events). Each text_delta goes to sink as a text Delta, each
// non-empty input_json_delta as an argument Delta of its tool call
// (ToolIndex counts tool calls, not content blocks); the first Delta of a
// call carries its ID and Name, and a call whose arguments never stream
// still gets that one Delta when its block stops. The message is assembled
// with the SDK's Accumulate and translated as an unstreamed one is, so both
// give the same Response. A stream that does not open with message_start
// or ends before message_stop is KindMalformed; an error event is the
// API's error (see failure).
func (p *Provider) stream(ctx context.Context, params sdk.MessageNewParams, opts []option.RequestOption,
	res **http.Response, sink func(llm.Delta)) (llm.Response, error) {
	s := p.messages.NewStreaming(ctx, params, opts...)
	defer s.Close()
	var msg sdk.Message
	calls := map[int64]*streamedCall{} // by content block index
	started, stopped := false, false
	for !stopped && s.Next() {
		ev := s.Current()
		if !started && ev.Type != "message_start" {
			return llm.Response{}, p.malformedStream(*res, "the event stream does not begin with message_start")
		}
		if err := msg.Accumulate(ev); err != nil {
			return llm.Response{}, p.malformedStream(*res, "the event stream is out of order: "+err.Error())
		}
		switch ev.Type {
		case "message_start":
			started = true
		case "content_block_start":
			if ev.ContentBlock.Type == "tool_use" {
				calls[ev.Index] = &streamedCall{index: len(calls), id: ev.ContentBlock.ID, name: ev.ContentBlock.Name}
			}
		case "content_block_delta":
			switch ev.Delta.Type {
			case "text_delta":
				if ev.Delta.Text != "" {
					sink(llm.Delta{Text: ev.Delta.Text})
				}
			case "input_json_delta":
				if c := calls[ev.Index]; c != nil && ev.Delta.PartialJSON != "" {
					sink(c.delta(ev.Delta.PartialJSON))
				}
			}
		case "content_block_stop":
			if c := calls[ev.Index]; c != nil && !c.announced {
				sink(c.delta(""))
			}
		case "message_stop":
			stopped = true
		}
	}
	if err := s.Err(); err != nil {
		return llm.Response{}, p.failure(ctx, err, *res)
	}
	if !stopped {
		if ctx.Err() != nil {
			return llm.Response{}, p.cancelled(ctx)
		}
		return llm.Response{}, p.malformedStream(*res, "the event stream ended before message_stop")
	}
	return p.response(&msg)
}

func (p *Provider) malformedStream(res *http.Response, message string) error {
	return llm.NewError(p.name, llm.KindMalformed, statusOf(res), message, nil)
}

// streamedCall is a tool call being streamed.
type streamedCall struct {
	index     int
	id, name  string
	announced bool
}

// delta is the call's next argument fragment, with its ID and Name the
// first time.
func (c *streamedCall) delta(args string) llm.Delta {
	d := llm.Delta{ToolIndex: c.index, Arguments: args}
	if !c.announced {
		d.ToolID, d.ToolName, c.announced = c.id, c.name, true
	}
	return d
}
