//go:build race

package usage

// raceEnabled: under the race detector sync.Pool drops a random share of what is
// put back, so a decoder that pools its state (go-json-experiment/json) allocates
// a random number of times per call, and allocation counts say nothing.
const raceEnabled = true
