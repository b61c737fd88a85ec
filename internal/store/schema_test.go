package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
)

// describeSchema writes down the store's schema as a text that does not
// depend on how the migrations were written (whitespace) nor where the
// database is (the PostgreSQL schema's name): what the tables, columns,
// indexes and constraints are, and the version record.
func describeSchema(t testing.TB, s *Store) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	if _, ok := s.d.(*pgDialect); ok {
		describePostgres(t, ctx, s.db.DB, &b)
	} else {
		describeSQLite(t, ctx, s.db.DB, &b)
	}
	return b.String()
}

func describeSQLite(t testing.TB, ctx context.Context, db *sql.DB, b *strings.Builder) {
	var version int
	if err := db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(b, "user_version %d\n", version)
	var tables []string
	queryLines(t, ctx, db, b, func(cols []string) {
		if cols[0] == "table" {
			tables = append(tables, cols[1])
		}
		cols[3] = strings.Join(strings.Fields(cols[3]), " ")
	}, `SELECT type, name, tbl_name, COALESCE(sql, '') FROM sqlite_master ORDER BY type, name`)
	for _, table := range tables {
		fmt.Fprintf(b, "columns of %s\n", table)
		queryLines(t, ctx, db, b, nil, `SELECT cid, name, type, "notnull", COALESCE(dflt_value, ''), pk FROM pragma_table_info(?) ORDER BY cid`, table)
	}
}

func describePostgres(t testing.TB, ctx context.Context, db *sql.DB, b *strings.Builder) {
	var schema string
	if err := db.QueryRowContext(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	unqualify := func(cols []string) {
		for i := range cols {
			cols[i] = strings.ReplaceAll(cols[i], schema+".", "")
		}
	}
	b.WriteString("schema_migrations versions\n")
	queryLines(t, ctx, db, b, nil, `SELECT version FROM schema_migrations ORDER BY version`)
	b.WriteString("columns\n")
	queryLines(t, ctx, db, b, nil, `SELECT table_name, ordinal_position, column_name, data_type, is_nullable, COALESCE(column_default, '')
		FROM information_schema.columns WHERE table_schema = $1 ORDER BY table_name, ordinal_position`, schema)
	b.WriteString("constraints\n")
	queryLines(t, ctx, db, b, unqualify, `SELECT c.relname, k.conname, k.contype, pg_get_constraintdef(k.oid)
		FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 ORDER BY c.relname, k.conname`, schema)
	b.WriteString("indexes\n")
	queryLines(t, ctx, db, b, unqualify, `SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = $1 ORDER BY tablename, indexname`, schema)
	b.WriteString("triggers\n")
	queryLines(t, ctx, db, b, unqualify, `SELECT c.relname, g.tgname, pg_get_triggerdef(g.oid)
		FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND NOT g.tgisinternal ORDER BY c.relname, g.tgname`, schema)
	b.WriteString("functions\n")
	queryLines(t, ctx, db, b, func(cols []string) {
		unqualify(cols)
		// the functions keep the search path they were made with, the schema
		cols[1] = strings.ReplaceAll(strings.Join(strings.Fields(cols[1]), " "), schema, "<schema>")
	}, `SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname = $1 ORDER BY p.proname`, schema)
}

// queryLines writes each row of q as a line of tab-separated columns,
// after edit (when not nil) has had its say on them.
func queryLines(t testing.TB, ctx context.Context, db *sql.DB, b *strings.Builder, edit func([]string), q string, args ...any) {
	t.Helper()
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	names, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		vals := make([]sql.NullString, len(names))
		ptrs := make([]any, len(names))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		cols := make([]string, len(vals))
		for i, v := range vals {
			cols[i] = v.String
		}
		if edit != nil {
			edit(cols)
		}
		b.WriteString("\t" + strings.Join(cols, "\t") + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// sqliteFixture and postgresFixture name the databases of testdata made by
// the orchestrator of before the migrations were files (testdata/README.md),
// at the given schema version.
func sqliteFixture(version int) string   { return fmt.Sprintf("sqlite-v%d.db", version) }
func postgresFixture(version int) string { return fmt.Sprintf("postgres-v%d.sql", version) }
