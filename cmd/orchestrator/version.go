package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func (m *Main) newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, the commit and its date the binary was built from",
		Long: `version prints the version, the git commit and the commit's date the binary
was built from. Release builds and make build set them at link time
(-ldflags "-X main.version=… -X main.commit=… -X main.date=…"), so they are
known also with -buildvcs=false; otherwise they are what go build recorded in
a git checkout ("-dirty"/"with local changes" when it had local changes). A
build that recorded none says so. --json prints them as data (docs/json.md).`,
		Args:        cobra.NoArgs,
		Annotations: skipConfigAnnotation(),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep := newVersionReport(m.Version, m.Commit, m.Date)
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

// versionReport is the output of version --json (docs/json.md). Version,
// Commit and Date are never empty: "devel", "unknown" and "unknown" when the
// build recorded nothing.
type versionReport struct {
	V        int    `json:"v"`
	Version  string `json:"version"`
	Commit   string `json:"commit"`
	Modified bool   `json:"modified"`
	// Date is the time of the commit built, RFC 3339 in UTC.
	Date     string `json:"date"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
	// License is the license the orchestrator is distributed under
	// (LICENSE): Apache-2.0.
	License string `json:"license"`
}

// License is the SPDX identifier of the orchestrator's license (LICENSE).
const License = "Apache-2.0"

func newVersionReport(ver, rev, date string) versionReport {
	rep := versionReport{V: jsonVersion, Version: ver, Commit: strings.TrimSuffix(rev, "-dirty"), Modified: strings.HasSuffix(rev, "-dirty"),
		Date: date, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH, License: License}
	if rep.Version == "" {
		rep.Version = "devel"
	}
	if rep.Commit == "" {
		rep.Commit = "unknown"
	}
	if rep.Date == "" {
		rep.Date = "unknown"
	}
	return rep
}

// line is the text version prints.
func (r versionReport) line() string {
	extra := r.Go + " " + r.Platform
	commit := "commit " + r.Commit
	if r.Date != "unknown" {
		commit += " of " + r.Date
	}
	switch {
	case r.Commit != "unknown" && r.Modified:
		extra = commit + " with local changes, " + extra
	case r.Commit != "unknown":
		extra = commit + ", " + extra
	case r.Version == "devel":
		extra = "no module version or VCS revision was recorded: built outside a git checkout or with -buildvcs=false; " + extra
	}
	return fmt.Sprintf("orchestrator %s (%s)", r.Version, extra)
}

// buildVersion returns the version, commit and commit date set with
// -ldflags, else those recorded in the binary's build info.
func buildVersion() (string, string, string) {
	info, ok := debug.ReadBuildInfo()
	return versionOf(version, commit, date, info, ok)
}

// versionOf picks the version, revision and commit date: each set with
// -ldflags wins, else the build info's main module version (not
// "(devel)"), vcs.revision ("-dirty" when vcs.modified) and vcs.time. The
// revision is shortened to 12 characters (keeping "-dirty"), and the date
// is printed as RFC 3339 in UTC when it is one (a date that is not is
// kept as given: version never fails on what the build stamped).
func versionOf(ver, rev, date string, info *debug.BuildInfo, ok bool) (string, string, string) {
	ver, rev, date = strings.TrimSpace(ver), strings.TrimSpace(rev), strings.TrimSpace(date)
	if ok && info != nil {
		if ver == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			ver = info.Main.Version
		}
		var vcsRev, vcsTime string
		var modified bool
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				vcsRev = s.Value
			case "vcs.time":
				vcsTime = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if rev == "" && vcsRev != "" {
			rev = vcsRev
			if modified {
				rev += "-dirty"
			}
			// The build's own time goes with the build's own revision
			// only: a stamped commit keeps a stamped date (or none).
			if date == "" {
				date = vcsTime
			}
		}
	}
	if hash, dirty := strings.CutSuffix(rev, "-dirty"); len(hash) > 12 {
		rev = hash[:12]
		if dirty {
			rev += "-dirty"
		}
	}
	if t, err := time.Parse(time.RFC3339, date); err == nil {
		date = t.UTC().Format(time.RFC3339)
	}
	return ver, rev, date
}
