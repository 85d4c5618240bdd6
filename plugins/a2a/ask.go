package a2a

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/effect"
)

// GatePrefix starts the name of every local gate Ask parks on; a flow can
// declare one schema for all of them with
// loom.WithResumeSchema(GatePrefix+"*", schema).
const GatePrefix = "a2a.input:"

// MaxAskRounds bounds the input-required rounds of one Ask.
const MaxAskRounds = 64

// ErrTooManyRounds is Ask's failure once the remote task asked for input
// MaxAskRounds times.
var ErrTooManyRounds = errors.New("a2a: the remote task asked for input too many times")

// Ask sends text to peer as a durable step with id, and follows the remote
// task to its end. Each time the remote task answers input-required, the
// flow parks on the local gate AskGate(taskId, round) (the remote's
// question is in the Outcome recorded by the step before it); the gate's
// answer — a JSON string is sent as text, any other JSON as a data part —
// goes to the same remote task in the next step, "<id>/reply:<n>". It
// returns the Outcome of the last step: completed, failed, canceled,
// rejected, or another state the agent stopped in (auth-required, or
// working after MaxPolls reads). Every step id and gate name is derived
// from id and the recorded task id, so a replay makes no remote call for a
// send the log holds. A remote or transport failure is the step's error
// (*loom.StepError wrapping *RemoteError).
func Ask(ctx *loom.Context, id string, peer *Peer, text string) (Outcome, error) {
	if peer == nil {
		return Outcome{}, fmt.Errorf("%w: nil peer", ErrUnknownPeer)
	}
	in := SendInput{Agent: peer.name, Message: text}
	for round := 1; round <= MaxAskRounds; round++ {
		stepID := id
		if round > 1 {
			stepID = id + "/reply:" + strconv.Itoa(round-1)
		}
		out, err := sendStep(ctx, stepID, peer, in)
		if err != nil || out.State != StateInputRequired {
			return out, err
		}
		answer, err := ctx.Suspend(AskGate(out.TaskID, round))
		if err != nil {
			return out, err
		}
		in = SendInput{Agent: peer.name, TaskID: out.TaskID, ContextID: out.ContextID}
		var s string
		if json.Unmarshal(answer, &s) == nil {
			in.Message = s
		} else {
			in.Data = answer
		}
		if in.Message == "" && len(in.Data) == 0 {
			in.Data = json.RawMessage("null")
		}
	}
	return Outcome{}, ErrTooManyRounds
}

// AskGate is the local gate Ask parks on in round (1, 2, …) of the remote
// task taskID: "a2a.input:<taskId>", then "a2a.input:<taskId>#<round>".
// A task id that is not made of letters, digits, '.', '_' and '-' (or is
// longer than 128 bytes) is replaced by a digest of it.
func AskGate(taskID string, round int) string {
	g := GatePrefix + gateSafe(taskID)
	if round > 1 {
		g += "#" + strconv.Itoa(round)
	}
	return g
}

// gateSafe keeps a remote task id that is safe in a gate name and digests
// any other.
func gateSafe(id string) string {
	ok := id != "" && len(id) <= 128
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
	}
	if ok {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "sha256-" + hex.EncodeToString(sum[:16])
}

// sendStep runs one a2a.send to peer as the step stepID.
func sendStep(ctx *loom.Context, stepID string, peer *Peer, in SendInput) (Outcome, error) {
	task := &loom.Task{ID: stepID, Kind: "tool", ToolID: peer.ToolID(),
		Invoke: func(c context.Context, raw json.RawMessage) (any, error) {
			ec := effect.FromContext(c)
			if ec == nil {
				return nil, errors.New("a2a: a send runs only as a step")
			}
			in, err := decodeSend(raw)
			if err != nil {
				return nil, err
			}
			return peer.send(ec, in)
		}}
	raw, err := ctx.Execute(task, in)
	if err != nil {
		return Outcome{}, err
	}
	var out Outcome
	if err := json.Unmarshal(raw, &out); err != nil {
		return Outcome{}, fmt.Errorf("a2a: step %q: decoding the outcome: %w", stepID, err)
	}
	return out, nil
}
