package proxy

import "testing"

// TestCheckPathCost: the check sits on every request, so an ordinary path
// (no '%', or dots only inside names) costs no allocation.
func TestCheckPathCost(t *testing.T) {
	for _, p := range []string{"/anthropic/v1/messages", "/openai/v1/files/report.v2.json"} {
		if n := testing.AllocsPerRun(100, func() {
			if checkPath(p) != nil {
				t.Fatalf("%s refused", p)
			}
		}); n != 0 {
			t.Errorf("%s: %v allocations per check, want 0", p, n)
		}
	}
}
