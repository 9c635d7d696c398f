package service

import "corral"

// RunLimits is what each of an agent's limits is on this server when the
// agent leaves it 0, and the most it may be set to.
type RunLimits struct {
	// Defaults are the values admission, the runner and the node apply.
	// A zero field has no default: there is no limit (MaxRuns).
	Defaults corral.Limits
	// Max is the most each field may be set to (past it, a value is a
	// typo): what Create and Update accept.
	Max corral.Limits
	// Notes say, by the API's field name, where a default is more than a
	// number.
	Notes map[string]string
}

// Limits returns the defaults and bounds of agents' limits, from the same
// constants that apply them. Any signed-in user may ask.
func (s *Runs) Limits() RunLimits {
	return RunLimits{
		Defaults: corral.Limits{
			MaxPromptBytes: DefaultMaxPrompt,
			RunTimeoutS:    corral.DefaultRunTimeoutS,
			// The runner gives a run one core for its whole time.
			CPUMillis:        corral.DefaultRunTimeoutS * 1000,
			MemoryBytes:      corral.DefaultMemoryBytes,
			Pids:             corral.DefaultPids,
			OutputBytes:      corral.DefaultOutputBytes,
			DiskBytes:        corral.DefaultDiskBytes,
			DiskInodes:       corral.DefaultDiskInodes,
			PendingDiskBytes: DefaultPendingDiskBytes,
		},
		Max: limitMax,
		Notes: map[string]string{
			"max_runs":     "no limit",
			"cpu_millis":   "the run's time limit in CPU time: one core for the whole run",
			"memory_bytes": "a run of an agent CLI gets what its CLI needs, at least this",
			"output_bytes": "what one tool command may write",
		},
	}
}
