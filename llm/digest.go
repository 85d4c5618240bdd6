package llm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/loom-kernel/loom/event"
)

// digestDomain separates request digests from every other SHA-256 Loom
// takes; its version changes if the construction does.
const digestDomain = "loom.llm.request/1\n"

// Digest is the request's identity, "sha256:<hex>", the same in every
// process and language: the SHA-256 chain
//
//	c₀ = SHA-256(domain ‖ canonical JSON of the request without its messages)
//	cᵢ = SHA-256(cᵢ₋₁ ‖ SHA-256(canonical JSON of message i))
//
// over RFC 8785 canonical JSON, so member order and spacing never matter,
// and a conversation that grows by a message extends its chain by one link
// (see Chain) instead of hashing everything again.
func Digest(req Request) (string, error) {
	var c Chain
	if err := c.Extend(req.Messages); err != nil {
		return "", err
	}
	return c.Digest(req)
}

// Chain is the running digest of a conversation's messages: Extend hashes
// only the messages it has not seen. Its zero value is an empty
// conversation. It is not safe for concurrent use.
type Chain struct {
	links [][32]byte // links[i] = SHA-256 of the canonical JSON of message i
}

// Len is the number of messages the chain has seen.
func (c *Chain) Len() int { return len(c.links) }

// Extend hashes msgs[c.Len():]: msgs must begin with the messages the chain
// has already seen (they are not compared). Fewer messages than it has
// seen is an error: start a new Chain when a conversation is rewritten (a
// compaction).
func (c *Chain) Extend(msgs []Message) error {
	if len(msgs) < len(c.links) {
		return fmt.Errorf("llm: a digest chain over %d messages cannot digest %d: start a new Chain after rewriting a conversation", len(c.links), len(msgs))
	}
	for _, m := range msgs[len(c.links):] {
		canon, err := canonical(m)
		if err != nil {
			return fmt.Errorf("llm: digesting message %d: %w", len(c.links), err)
		}
		c.links = append(c.links, sha256.Sum256(canon))
	}
	return nil
}

// Digest is Digest(req) for a req whose messages are exactly the ones the
// chain has seen.
func (c *Chain) Digest(req Request) (string, error) {
	if len(req.Messages) != len(c.links) {
		return "", fmt.Errorf("llm: the digest chain has seen %d messages, the request holds %d", len(c.links), len(req.Messages))
	}
	head := req
	head.Messages = nil
	canon, err := canonical(head)
	if err != nil {
		return "", fmt.Errorf("llm: digesting the request: %w", err)
	}
	sum := sha256.Sum256(append([]byte(digestDomain), canon...))
	for _, link := range c.links {
		sum = sha256.Sum256(append(sum[:], link[:]...))
	}
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// canonical is v's RFC 8785 canonical JSON.
func canonical(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return event.Canonical(raw)
}
