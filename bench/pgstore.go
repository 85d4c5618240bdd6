package main

import (
	"context"
	"errors"

	"github.com/loom-kernel/loom/plugins/postgres"
)

// stores opens each workload's store in a fresh schema of the run, with
// the plugin's defaults (its own pool on the DSN). Closing it drops the
// schema through the store's pool before closing the store; a schema a
// failed open left behind is dropped by pgRun.Close.
func (r *pgRun) stores() storeOpener {
	return func(ctx context.Context, name string) (benchStore, error) {
		schema := r.newSchema(name)
		st, err := postgres.Storage(ctx, postgres.Options{DSN: r.dsn, Schema: schema})
		if err != nil {
			return benchStore{}, err
		}
		return benchStore{
			events:       st.Events,
			snapshots:    st.Snapshots,
			transactions: func() int64 { return st.DB.WriteStats().Transactions },
			close: func() error {
				return errors.Join(dropSchema(ctx, st.DB.Pool(), schema), st.Close())
			},
		}, nil
	}
}
