package store

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/loom-kernel/loom/event"
)

// Tenancy (K12). An execution's tenant is the "tenant" member of the
// principal recorded on its EXECUTION_STARTED (loom.WithPrincipal with a
// loom.Principal{Tenant: …} at Start), fixed for the life of the log. A
// TenantView is a read view of an event store that holds only one
// tenant's executions: the others are not found and not listed.

// MaxTenantLen bounds a tenant id, in bytes (as a queue name).
const MaxTenantLen = MaxQueueNameLen

// TenantError refuses a tenant id: empty where one is required, too long,
// or not a valid id.
type TenantError struct {
	Tenant  string
	Problem string
}

func (e *TenantError) Error() string {
	return "loom: tenant " + strconv.Quote(e.Tenant) + " " + e.Problem
}

// ValidateTenant refuses a tenant id longer than MaxTenantLen bytes or one
// event.ValidateID refuses ("" is no tenant and passes).
func ValidateTenant(tenant string) error {
	if tenant == "" {
		return nil
	}
	if len(tenant) > MaxTenantLen {
		return &TenantError{Tenant: tenant[:32] + "…", Problem: "is longer than " + strconv.Itoa(MaxTenantLen) + " bytes"}
	}
	if err := event.ValidateID("tenant", tenant); err != nil {
		return &TenantError{Tenant: tenant, Problem: "is not a valid id: " + err.Error()}
	}
	return nil
}

// TenantOf reads the tenant an execution's first event records: the
// "tenant" member of EXECUTION_STARTED's principal object; "" for a log
// that starts otherwise or records none.
func TenantOf(first event.Envelope) string {
	if first.Type != event.ExecutionStarted || len(first.Payload) == 0 {
		return ""
	}
	var p struct {
		Principal json.RawMessage `json:"principal"`
	}
	if event.UnmarshalExact(first.Payload, &p) != nil {
		return ""
	}
	return TenantOfPrincipal(p.Principal)
}

// TenantOfPrincipal reads the "tenant" member of a recorded principal
// object (a folded state's Variables.Principal); "" for another shape.
func TenantOfPrincipal(principal json.RawMessage) string {
	if len(principal) == 0 || principal[0] != '{' {
		return ""
	}
	var who struct {
		Tenant string `json:"tenant"`
	}
	if event.UnmarshalExact(principal, &who) != nil {
		return ""
	}
	return who.Tenant
}

// ReadTenant reads the tenant of executionID from s; found is false for
// an execution with no log.
func ReadTenant(ctx context.Context, s EventStore, executionID string) (tenant string, found bool, err error) {
	first, err := ReadRange(ctx, s, executionID, 0, 1)
	if err != nil || len(first) == 0 {
		return "", false, err
	}
	return TenantOf(first[0]), true, nil
}

// ErrTenantViewReadOnly refuses an append through a TenantView: write
// through the runtime, which records the tenant at Start.
var ErrTenantViewReadOnly = errors.New("loom: a tenant view is read-only; write through the runtime")

// TenantView is one tenant's read view of an event store: ReadFrom,
// ReadRange and Subscribe of another tenant's execution find no events,
// ListExecutions lists only the tenant's, and Append is refused with
// ErrTenantViewReadOnly, writing nothing. Build it with ForTenant.
type TenantView struct {
	inner  EventStore
	tenant string
}

var (
	_ EventStore  = (*TenantView)(nil)
	_ RangeReader = (*TenantView)(nil)
	_ Subscriber  = (*TenantView)(nil)
)

// ForTenant scopes s to tenant's executions. It refuses an empty or
// invalid tenant with *TenantError.
func ForTenant(s EventStore, tenant string) (*TenantView, error) {
	if tenant == "" {
		return nil, &TenantError{Tenant: tenant, Problem: "is required for a tenant view"}
	}
	if err := ValidateTenant(tenant); err != nil {
		return nil, err
	}
	return &TenantView{inner: s, tenant: tenant}, nil
}

// Tenant is the view's tenant.
func (v *TenantView) Tenant() string { return v.tenant }

// owns reports whether executionID is the view's tenant's.
func (v *TenantView) owns(ctx context.Context, executionID string) (bool, error) {
	tenant, found, err := ReadTenant(ctx, v.inner, executionID)
	return found && tenant == v.tenant, err
}

// Append refuses: a tenant view is read-only.
func (v *TenantView) Append(context.Context, string, int64, []event.Envelope) error {
	return ErrTenantViewReadOnly
}

// ReadFrom reads the tenant's execution; another tenant's has no events.
func (v *TenantView) ReadFrom(ctx context.Context, executionID string, from int64) ([]event.Envelope, error) {
	if ok, err := v.owns(ctx, executionID); !ok || err != nil {
		return nil, err
	}
	return v.inner.ReadFrom(ctx, executionID, from)
}

// ReadRange reads a range of the tenant's execution; another tenant's has
// no events.
func (v *TenantView) ReadRange(ctx context.Context, executionID string, from, to int64) ([]event.Envelope, error) {
	if ok, err := v.owns(ctx, executionID); !ok || err != nil {
		return nil, err
	}
	return ReadRange(ctx, v.inner, executionID, from, to)
}

// Subscribe follows the tenant's execution. Another tenant's (or one not
// started yet) is refused with *TenantError: a view cannot follow a log
// whose tenant it cannot check.
func (v *TenantView) Subscribe(ctx context.Context, executionID string, from int64) (*Subscription, error) {
	sub, ok := v.inner.(Subscriber)
	if !ok {
		return nil, errors.New("loom: the event store under the tenant view cannot be followed")
	}
	if owned, err := v.owns(ctx, executionID); err != nil {
		return nil, err
	} else if !owned {
		return nil, &TenantError{Tenant: v.tenant, Problem: "holds no execution " + strconv.Quote(executionID)}
	}
	return sub.Subscribe(ctx, executionID, from)
}

// ListExecutions lists the tenant's executions after after, up to limit:
// it pages through the store until the page is full or the store ends.
func (v *TenantView) ListExecutions(ctx context.Context, after string, limit int) (ExecutionPage, error) {
	if limit < 1 {
		limit = 1
	}
	var out ExecutionPage
	for {
		page, err := v.inner.ListExecutions(ctx, after, limit)
		if err != nil {
			return ExecutionPage{}, err
		}
		for i, info := range page.Executions {
			ok, err := v.owns(ctx, info.ExecutionID)
			if err != nil {
				return ExecutionPage{}, err
			}
			if !ok {
				continue
			}
			out.Executions = append(out.Executions, info)
			if len(out.Executions) == limit {
				if i < len(page.Executions)-1 || page.Next != "" {
					out.Next = info.ExecutionID
				}
				return out, nil
			}
		}
		if page.Next == "" {
			return out, nil
		}
		after = page.Next
	}
}

// Close closes nothing: the view does not own the store.
func (v *TenantView) Close() error { return nil }
