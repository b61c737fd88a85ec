package config

import (
	"strings"
	"testing"
)

// TestDatabaseURLDefaultsToTheEnvironment: database_url defaults to
// $ORCHESTRATOR_DATABASE_URL, a value in the file wins, and an empty one
// (the SQLite database in state_dir) is the default without either.
func TestDatabaseURLDefaultsToTheEnvironment(t *testing.T) {
	t.Parallel()
	env := func(vars map[string]string) LookupFunc {
		return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	}
	fromEnv := "postgres://orch@db.example:5432/orch"
	for _, tc := range []struct {
		name, yaml string
		vars       map[string]string
		want       string
	}{
		{"neither", "state_dir: /s\n", nil, ""},
		{"environment", "state_dir: /s\n", map[string]string{EnvDatabaseURL: fromEnv}, fromEnv},
		{"file wins", "state_dir: /s\ndatabase_url: postgresql://other/db\n", map[string]string{EnvDatabaseURL: fromEnv}, "postgresql://other/db"},
		{"example's expansion", "state_dir: /s\ndatabase_url: ${ORCHESTRATOR_DATABASE_URL:-}\n", map[string]string{EnvDatabaseURL: fromEnv}, fromEnv},
		{"example's expansion, unset", "state_dir: /s\ndatabase_url: ${ORCHESTRATOR_DATABASE_URL:-}\n", nil, ""},
	} {
		cfg, err := ParseEnv(strings.NewReader(tc.yaml), "o.yaml", env(tc.vars))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if cfg.DatabaseURL != tc.want {
			t.Errorf("%s: database_url = %q, want %q", tc.name, cfg.DatabaseURL, tc.want)
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// TestDatabaseURLNotPostgresIsRefusedUnshown: a database_url that is not
// PostgreSQL's is refused at its line, without showing the value (it may
// hold a password).
func TestDatabaseURLNotPostgresIsRefusedUnshown(t *testing.T) {
	t.Parallel()
	cfg, err := ParseEnv(strings.NewReader("state_dir: /s\ndatabase_url: mysql://u:s3cret@h/db\n"), "o.yaml",
		func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "o.yaml:2: database_url") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("Validate: %v", err)
	}
}
