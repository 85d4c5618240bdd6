package dispatch

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
)

// Queues routes enqueues to an app's queues by name, so a request naming a
// queue the app does not run is refused, typed, before anything is stored.
// Build it with NewQueues; it is safe for concurrent use (it never changes).
type Queues struct {
	byName map[string]*Queue
	names  []string // sorted
}

// ErrUnknownQueue matches *UnknownQueueError.
var ErrUnknownQueue = errors.New("dispatch: unknown queue")

// UnknownQueueError refuses an enqueue to a queue Queues does not hold,
// naming those it does.
type UnknownQueueError struct {
	Queue string
	Known []string
}

func (e *UnknownQueueError) Error() string {
	return "dispatch: unknown queue " + strconv.Quote(e.Queue) + " (this app runs: " + strings.Join(e.Known, ", ") +
		"); enqueue to one of those, or add the queue to NewQueues"
}

// Is makes errors.Is(err, ErrUnknownQueue) true.
func (e *UnknownQueueError) Is(target error) bool { return target == ErrUnknownQueue }

// NewQueues holds qs by their names; two queues of one name are refused
// with *QueueConfigError.
func NewQueues(qs ...*Queue) (*Queues, error) {
	r := &Queues{byName: make(map[string]*Queue, len(qs))}
	for _, q := range qs {
		if q == nil {
			return nil, &QueueConfigError{Field: "Queues", Reason: "a nil queue"}
		}
		name := q.cfg.Name
		if _, dup := r.byName[name]; dup {
			return nil, &QueueConfigError{Field: "Name", Reason: "two queues are named " + strconv.Quote(name)}
		}
		r.byName[name] = q
		r.names = append(r.names, name)
	}
	slices.Sort(r.names)
	return r, nil
}

// Get returns the queue named name, or *UnknownQueueError.
func (r *Queues) Get(name string) (*Queue, error) {
	if q, ok := r.byName[name]; ok {
		return q, nil
	}
	return nil, &UnknownQueueError{Queue: name, Known: slices.Clone(r.names)}
}

// Enqueue enqueues req on the queue named name (Queue.Enqueue); an unknown
// name is refused with *UnknownQueueError, storing nothing.
func (r *Queues) Enqueue(ctx context.Context, name string, req EnqueueRequest) (executionID string, added bool, err error) {
	q, err := r.Get(name)
	if err != nil {
		return "", false, err
	}
	return q.Enqueue(ctx, req)
}

// Names lists the queues, sorted.
func (r *Queues) Names() []string { return slices.Clone(r.names) }
