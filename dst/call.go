package dst

import "fmt"

// call runs fn, one call into the runtime named what, on a goroutine of
// its own, so a call that does not return to its caller is a violation
// instead of the end of the test. A runtime that broke this is wedged as
// far as the run can tell: the simulator restarts the process before the
// next operation.
func (r *run) call(what, exec string, fn func() error) error {
	var (
		err      error
		returned bool
		panicked any
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { panicked = recover() }()
		err = fn()
		returned = true
	}()
	<-done
	switch {
	case panicked != nil:
		r.violate(InvCallReturns, exec, fmt.Sprintf("Runtime.%s panicked: %v", what, panicked))
	case !returned:
		r.violate(InvCallReturns, exec, fmt.Sprintf("Runtime.%s did not return to its caller: runtime.Goexit ended the caller's goroutine", what))
	default:
		return err
	}
	r.wedged = true
	return fmt.Errorf("dst: Runtime.%s did not return", what)
}
