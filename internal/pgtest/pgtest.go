// Package pgtest gives tests a PostgreSQL database: a throwaway cluster
// started with Debian's server binaries (package postgresql: initdb and
// pg_ctl under /usr/lib/postgresql/*/bin), or the database named by
// ORCHESTRATOR_TEST_DATABASE_URL. Schema makes a schema of its own for a
// test, so tests share one cluster per test binary and run in parallel.
package pgtest

import (
	"database/sql"
	"fmt"
	neturl "net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the database/sql driver "pgx"
)

// EnvURL names a PostgreSQL database the tests may fill with schemas of
// their own instead of starting a cluster.
const EnvURL = "ORCHESTRATOR_TEST_DATABASE_URL"

// Start returns a database for tests: ORCHESTRATOR_TEST_DATABASE_URL
// (stop is then nil), or a new cluster in a temporary directory listening
// only on a unix socket there, which stop removes. As root the server runs
// as the user postgres (it refuses to run as root).
func Start() (url string, stop func(), err error) {
	if u := os.Getenv(EnvURL); u != "" {
		return u, nil, nil
	}
	bin, err := Bin(BinGlob)
	if err != nil {
		return "", nil, err
	}
	start := time.Now()
	dir, err := os.MkdirTemp("", "orchestrator-pg-")
	if err != nil {
		return "", nil, err
	}
	var runAs []string
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return "", nil, fmt.Errorf("running as root, PostgreSQL's server needs the user postgres: %v (apt-get install -y postgresql makes it)", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return "", nil, err
		}
		runAs = []string{"runuser", "-u", "postgres", "--"}
	}
	run := func(name string, args ...string) error {
		argv := append(append(append([]string{}, runAs...), filepath.Join(bin, name)), args...)
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %v\n%s", strings.Join(argv, " "), err, out)
		}
		return nil
	}
	data := filepath.Join(dir, "data")
	if err := run("initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-locale", "-E", "UTF8", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	opts := fmt.Sprintf("-k %s -c listen_addresses='' -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=400", dir)
	if err := run("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "-s", "start"); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	fmt.Fprintf(os.Stderr, "PostgreSQL test cluster started in %v\n", time.Since(start).Round(time.Millisecond))
	u := "postgres://postgres@/postgres?host=" + neturl.QueryEscape(dir) + "&sslmode=disable"
	return u, func() {
		run("pg_ctl", "-D", data, "-m", "immediate", "-s", "stop")
		os.RemoveAll(dir)
	}, nil
}

// BinGlob is where Debian's postgresql package puts initdb.
const BinGlob = "/usr/lib/postgresql/*/bin/initdb"

// Bin finds the newest Debian PostgreSQL server's binaries (glob matches
// their initdb).
func Bin(glob string) (string, error) {
	found, _ := filepath.Glob(glob)
	sort.Slice(found, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(found[i]))))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(found[j]))))
		return vi > vj
	})
	for _, initdb := range found {
		bin := filepath.Dir(initdb)
		if _, err := os.Stat(filepath.Join(bin, "pg_ctl")); err == nil {
			return bin, nil
		}
	}
	return "", fmt.Errorf("PostgreSQL's server binaries (initdb, pg_ctl under /usr/lib/postgresql/*/bin) are missing: install them with `apt-get install -y postgresql`, or set %s to a database the tests may use", EnvURL)
}

var shared struct {
	once sync.Once
	url  string
	stop func()
	err  error
	n    atomic.Int64
}

// Shared is the test binary's database, started on first use; the test
// fails, saying how to install PostgreSQL, when there is none.
func Shared(t testing.TB) string {
	t.Helper()
	shared.once.Do(func() { shared.url, shared.stop, shared.err = Start() })
	if shared.err != nil {
		t.Fatalf("no PostgreSQL for the tests: %v", shared.err)
	}
	return shared.url
}

// StopShared stops the cluster Shared started, if any (TestMain calls it).
func StopShared() {
	if shared.stop != nil {
		shared.stop()
	}
}

// Schema makes a new schema in the Shared database, dropped when the test
// ends, and returns the URL of the database with that schema first on the
// search path; application_name is the schema's name too.
func Schema(t testing.TB) string {
	t.Helper()
	base := Shared(t)
	schema := fmt.Sprintf("t%d_%d", os.Getpid(), shared.n.Add(1))
	db, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE SCHEMA ` + schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("pgx", base)
		if err != nil {
			return
		}
		defer db.Close()
		db.Exec(`DROP SCHEMA ` + schema + ` CASCADE`)
	})
	u, err := neturl.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", EnvURL, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	q.Set("application_name", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
