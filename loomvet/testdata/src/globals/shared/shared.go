// Package shared has a package-level variable another package writes.
package shared

var Total int
