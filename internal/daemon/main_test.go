package daemon

import (
	"os"
	"testing"

	"github.com/orchestrator-dev/orchestrator/internal/pgtest"
)

// TestMain stops the PostgreSQL cluster the cluster tests started, one per
// test binary.
func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.StopShared()
	os.Exit(code)
}
