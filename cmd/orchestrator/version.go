package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

func (m *Main) newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version and the VCS revision the binary was built from",
		Long: `version prints the module version and the git revision the binary was built
from (recorded by go build in a git checkout; "-dirty" when it had local
changes), or those set with -ldflags "-X main.version=… -X main.commit=…".
A build that recorded neither says so. --json prints them as data (docs/json.md).`,
		Args:        cobra.NoArgs,
		Annotations: skipConfigAnnotation(),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep := newVersionReport(m.Version, m.Commit)
			if asJSON {
				return writeJSON(m.Stdout, rep)
			}
			_, err := fmt.Fprintln(m.Stdout, rep.line())
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// versionReport is the output of version --json (docs/json.md). Version
// and Commit are never empty: "devel" and "unknown" when the build
// recorded nothing.
type versionReport struct {
	V        int    `json:"v"`
	Version  string `json:"version"`
	Commit   string `json:"commit"`
	Modified bool   `json:"modified"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
	// License is the license the orchestrator is distributed under
	// (LICENSE): Apache-2.0.
	License string `json:"license"`
}

// License is the SPDX identifier of the orchestrator's license (LICENSE).
const License = "Apache-2.0"

func newVersionReport(ver, rev string) versionReport {
	rep := versionReport{V: jsonVersion, Version: ver, Commit: strings.TrimSuffix(rev, "-dirty"), Modified: strings.HasSuffix(rev, "-dirty"),
		Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH, License: License}
	if rep.Version == "" {
		rep.Version = "devel"
	}
	if rep.Commit == "" {
		rep.Commit = "unknown"
	}
	return rep
}

// line is the text version prints.
func (r versionReport) line() string {
	extra := r.Go + " " + r.Platform
	switch {
	case r.Commit != "unknown" && r.Modified:
		extra = "commit " + r.Commit + " with local changes, " + extra
	case r.Commit != "unknown":
		extra = "commit " + r.Commit + ", " + extra
	case r.Version == "devel":
		extra = "no module version or VCS revision was recorded: built outside a git checkout or with -buildvcs=false; " + extra
	}
	return fmt.Sprintf("orchestrator %s (%s)", r.Version, extra)
}

// buildVersion returns the version and commit set with -ldflags, else the
// module version and VCS revision recorded in the binary.
func buildVersion() (ver, rev string) {
	info, ok := debug.ReadBuildInfo()
	return versionOf(version, commit, info, ok)
}

// versionOf picks the version and revision: those set with -ldflags win,
// then the build info's main module version (not "(devel)") and
// vcs.revision (shortened to 12 characters, "-dirty" when vcs.modified).
func versionOf(ver, rev string, info *debug.BuildInfo, ok bool) (string, string) {
	ver, rev = strings.TrimSpace(ver), strings.TrimSpace(rev)
	if !ok || info == nil {
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
	return ver, rev
}
