package terminal

import (
	"context"

	"github.com/orchestrator-dev/orchestrator/surfaces"
)

var _ surfaces.Noticer = (*Surface)(nil)

// Notice prints text; serve's terminal (Passive) logs it instead. The
// terminal keeps no record: the caller posts a notice once.
func (s *Surface) Notice(_ context.Context, runID, key, text string) error {
	if s.opts.Passive {
		s.log.Warn("notice", "run", runID, "key", key, "text", text)
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.write("\n" + text + "\n")
	return nil
}
