package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
)

// rawConn is the write connection at the driver level: statements are
// prepared once and kept, and calls skip database/sql's per-call locking and
// argument conversion. Only the current leader touches it, inside the
// sql.Conn.Raw call that lends it the driver connection.
type rawConn struct {
	prep    driver.ConnPrepareContext
	stmts   map[string]driver.Stmt
	args    []driver.NamedValue // reused argument buffer
	lengths *lengthCache        // nil outside the writer (benchmarks)
}

func newRawConn(dc any) (*rawConn, error) {
	prep, ok := dc.(driver.ConnPrepareContext)
	if !ok {
		return nil, fmt.Errorf("sqlite: driver connection %T cannot prepare with a context", dc)
	}
	return &rawConn{prep: prep, stmts: make(map[string]driver.Stmt)}, nil
}

// stmt returns the prepared statement for q, preparing it on first use.
func (c *rawConn) stmt(q string) (driver.Stmt, error) {
	if s, ok := c.stmts[q]; ok {
		return s, nil
	}
	s, err := c.prep.PrepareContext(context.Background(), q)
	if err != nil {
		return nil, err
	}
	c.stmts[q] = s
	return s, nil
}

// bind fills the reused argument buffer with vals.
func (c *rawConn) bind(vals []any) []driver.NamedValue {
	c.args = c.args[:0]
	for i, v := range vals {
		c.args = append(c.args, driver.NamedValue{Ordinal: i + 1, Value: v})
	}
	return c.args
}

// exec runs q with vals and returns the number of rows it changed.
func (c *rawConn) exec(q string, vals ...any) (int64, error) {
	return c.execNamed(q, c.bind(vals))
}

// execNamed runs q with already bound arguments.
func (c *rawConn) execNamed(q string, args []driver.NamedValue) (int64, error) {
	s, err := c.stmt(q)
	if err != nil {
		return 0, err
	}
	res, err := s.(driver.StmtExecContext).ExecContext(context.Background(), args)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// queryRow returns the first row of q, and false when q returns no row.
func (c *rawConn) queryRow(q string, vals ...any) (row []driver.Value, found bool, err error) {
	s, err := c.stmt(q)
	if err != nil {
		return nil, false, err
	}
	rows, err := s.(driver.StmtQueryContext).QueryContext(context.Background(), c.bind(vals))
	if err != nil {
		return nil, false, err
	}
	row = make([]driver.Value, len(rows.Columns()))
	switch err := rows.Next(row); {
	case errors.Is(err, io.EOF):
		return nil, false, rows.Close()
	case err != nil:
		return nil, false, errors.Join(err, rows.Close())
	}
	return row, true, rows.Close()
}

// queryInt64 returns the first column of the first row of q as an integer,
// and false when q returns no row.
func (c *rawConn) queryInt64(q string, vals ...any) (int64, bool, error) {
	row, found, err := c.queryRow(q, vals...)
	if err != nil || !found {
		return 0, false, err
	}
	n, ok := row[0].(int64)
	if !ok {
		return 0, false, fmt.Errorf("sqlite: %q returned %T, not an integer", q, row[0])
	}
	return n, true, nil
}

// begin, commit and rollback bracket a write transaction. BEGIN IMMEDIATE
// takes the write lock up front, so a transaction never fails half-way for
// want of it.
func (c *rawConn) begin() error {
	if _, err := c.exec("BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	if c.lengths != nil {
		if err := c.lengths.began(); err != nil {
			return c.rollback(err)
		}
	}
	return nil
}

func (c *rawConn) commit() error {
	if _, err := c.exec("COMMIT"); err != nil {
		return fmt.Errorf("sqlite: commit: %w", err)
	}
	if c.lengths != nil {
		c.lengths.committed()
	}
	return nil
}

// rollback ends the open transaction and joins its own failure, if any, to
// cause.
func (c *rawConn) rollback(cause error) error {
	if c.lengths != nil {
		c.lengths.reset()
	}
	if _, err := c.exec("ROLLBACK"); err != nil {
		return errors.Join(cause, fmt.Errorf("sqlite: rollback: %w", err))
	}
	return cause
}

// inTx runs fn in one write transaction and commits it, or rolls it back
// when fn or the commit fails.
func (c *rawConn) inTx(fn func() error) error {
	if err := c.begin(); err != nil {
		return err
	}
	if err := fn(); err != nil {
		return c.rollback(err)
	}
	if err := c.commit(); err != nil {
		return c.rollback(err)
	}
	return nil
}

// close finalizes every prepared statement.
func (c *rawConn) close() error {
	var errs []error
	for q, s := range c.stmts {
		if err := s.Close(); err != nil {
			errs = append(errs, err)
		}
		delete(c.stmts, q)
	}
	return errors.Join(errs...)
}
