package crypto_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/plugins/crypto"
	"github.com/loom-kernel/loom/plugins/sqlite"
)

// ExampleNewLogSubjectIndex keeps the subject index in a SQLite file of
// its own beside the kernel's, so erasure and export read a subject's
// executions instead of scanning every execution.
func ExampleNewLogSubjectIndex() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "loom-subject-index")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	// The index's own file: in the kernel's store its streams would be
	// listed and recovered as executions.
	indexStore, err := sqlite.OpenEventStore(filepath.Join(dir, "subjects.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer indexStore.Close()
	index, err := crypto.NewLogSubjectIndex(indexStore)
	if err != nil {
		fmt.Println(err)
		return
	}

	raw, err := sqlite.OpenEventStore(filepath.Join(dir, "loom.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	keys, err := crypto.OpenFileKeyStore(filepath.Join(dir, "keys.json"),
		crypto.FileKeyStoreOptions{MasterKey: bytes.Repeat([]byte{7}, crypto.MasterKeyBytes)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer keys.Close()
	events, err := crypto.NewEventStore(raw, keys, crypto.EventStoreOptions{
		Subject: crypto.SubjectFromInput("user"),
		Index:   index, // one durable append per execution start
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer events.Close() // closes raw

	for _, start := range []struct{ id, user string }{{"order-1", "ada"}, {"order-2", "grace"}, {"order-3", "ada"}} {
		id, user := start.id, start.user
		first := event.Envelope{ID: id + "-0", WorkflowID: "checkout", ExecutionID: id, Type: event.ExecutionStarted,
			Payload: json.RawMessage(`{"input":{"user":"` + user + `"}}`)}
		if err := events.Append(ctx, id, 0, []event.Envelope{first}); err != nil {
			fmt.Println(err)
			return
		}
	}

	erasure, err := events.EraseSubject(ctx, "ada")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("erased ada in", erasure.Executions)
	// Output: erased ada in [order-1 order-3]
}
