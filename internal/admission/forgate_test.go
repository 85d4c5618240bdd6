package admission

import "testing"

func TestForGateTakesTheExactEntryThenTheLongestFamily(t *testing.T) {
	m := map[string]string{
		"approve":              "exact approve",
		"approve.*":            "every approve.",
		"approve.deploy:*":     "deploy family",
		"approve.deploy:abc":   "one call",
		"approve.deploy:ab*":   "a longer family",
		"unrelated*":           "other",
		"approve.deploy:abcd*": "",
	}
	cases := map[string]string{
		"approve":             "exact approve",
		"approve.restart:1":   "every approve.",
		"approve.deploy:0f":   "deploy family",
		"approve.deploy:abc":  "one call",
		"approve.deploy:abz":  "a longer family",
		"approve.deploy:abcd": "",
	}
	for gate, want := range cases { //loom:order-independent each gate on its own
		got, ok := ForGate(m, gate)
		if !ok || got != want {
			t.Errorf("ForGate(%q) = %q, %v; want %q", gate, got, ok, want)
		}
	}
	if _, ok := ForGate(m, "deny"); ok {
		t.Error("a gate no entry covers was found")
	}
}
