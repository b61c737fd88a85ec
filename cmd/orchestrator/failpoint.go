package main

import "os"

// EnvFailpoint names the environment variable that makes the process kill
// itself with SIGKILL at a step of the run loop (see runner.Config.Failpoint).
// It exists for the crash tests; never set it otherwise.
const EnvFailpoint = "ORCHESTRATOR_FAILPOINT"

func (m *Main) failpoint() func(string) {
	want, ok := m.LookupEnv(EnvFailpoint)
	if !ok || want == "" {
		return nil
	}
	return func(point string) {
		if point == want {
			m.Logger.Warn("failpoint: killing the process", "point", point)
			if p, err := os.FindProcess(os.Getpid()); err == nil {
				p.Kill() // SIGKILL on unix: no deferred function runs
			}
			select {} // the signal is on its way
		}
	}
}
