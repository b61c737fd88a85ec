package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

func (m *Main) newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:         "version",
		Short:       "Print the version",
		Args:        cobra.NoArgs,
		Annotations: skipConfigAnnotation(),
		RunE: func(cmd *cobra.Command, args []string) error {
			v := m.Version
			if v == "" {
				v = "devel"
			}
			extra := runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
			if m.Commit != "" {
				extra = "commit " + m.Commit + ", " + extra
			}
			_, err := fmt.Fprintf(m.Stdout, "orchestrator %s (%s)\n", v, extra)
			return err
		},
	}
}

// buildVersion returns the version and commit set with -ldflags, else the
// module version and VCS revision recorded in the binary.
func buildVersion() (ver, rev string) {
	ver, rev = version, commit
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ver, rev
	}
	if ver == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		ver = info.Main.Version
	}
	if rev == "" {
		var modified bool
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" && modified {
			rev += "-dirty"
		}
	}
	return strings.TrimSpace(ver), rev
}
