package loom

// KernelABIVersion is the version of the syscall ABI (spec §2, K1). Adding a
// syscall is a MINOR bump, removing or repurposing one is MAJOR;
// TestKernelABIVersionPinsSyscalls fails when the version and KernelSyscalls
// change apart.
const KernelABIVersion = "1.3.0"

// KernelSyscalls lists the syscalls *Context implements, in the spec's
// order. A syscall is available iff it is listed here; the wire handshake
// advertises this list next to KernelABIVersion, so clients feature-detect
// against it. receive, select and continueAsNew are reserved by 1.3.0 and
// each works only behind its kernel.features flag (Config.Features). ui left
// the kernel (ADR 0114).
var KernelSyscalls = []string{
	"execute", "run", "decide", "parallel", "suspend", "sleep", "sleepUntil",
	"emit", "stream", "negotiateBudget", "continueAsNew", "receive", "select",
}
