// pgx v5 edge cases through the pooler, run by
// test/integration/test_driver_edges.py; prints one JSON object of what it
// saw on its last line and exits 0 only when every check passed.
//
//	pgxedges deallocate CONNINFO
//	    Conn.Prepare("ps"), execute it, then SQL "deallocate ps": the
//	    protocol-level name must be the server's own (session pooling).
//	pgxedges alter CONNINFO DIRECT_CONNINFO TABLE
//	    the default QueryExecModeCacheStatement prepares
//	    "select v from TABLE where id = $1"; a direct connection to
//	    PostgreSQL then changes v from int to text, and the same query on
//	    the same connection must give the text value, after the one 0A000
//	    error with which pgx drops its cached statement (reported as
//	    first_error).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "pgx edges failed: "+format+"\n", args...)
	os.Exit(1)
}

func must(err error, what string) {
	if err != nil {
		fail("%s: %v", what, err)
	}
}

func sqlstate(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func report(out map[string]any) {
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
}

func preparedCount(ctx context.Context, conn *pgx.Conn, name string) int {
	var n int
	// QueryExecModeSimpleProtocol: this check must not prepare anything itself.
	must(conn.QueryRow(ctx, "SELECT count(*) FROM pg_prepared_statements WHERE name = $1",
		pgx.QueryExecModeSimpleProtocol, name).Scan(&n), "pg_prepared_statements")
	return n
}

func deallocate(ctx context.Context, conn *pgx.Conn) map[string]any {
	_, err := conn.Prepare(ctx, "ps", "select $1::int + 1")
	must(err, "prepare ps")
	var v int
	must(conn.QueryRow(ctx, "ps", 41).Scan(&v), "execute ps")
	if v != 42 {
		fail("execute ps: %d", v)
	}
	before := preparedCount(ctx, conn, "ps")
	_, err = conn.Exec(ctx, "deallocate ps")
	must(err, "deallocate ps")
	after := preparedCount(ctx, conn, "ps")
	if before != 1 || after != 0 {
		fail("ps in pg_prepared_statements: %d before deallocate, %d after", before, after)
	}
	return map[string]any{"value": v, "before": before, "after": after}
}

func alter(ctx context.Context, conn *pgx.Conn, direct, table string) map[string]any {
	query := "select v from " + pgx.Identifier{table}.Sanitize() + " where id = $1"
	var got any
	// Twice: the second run uses the statement the first one prepared.
	for i := 0; i < 2; i++ {
		must(conn.QueryRow(ctx, query, 1).Scan(&got), "select before alter")
		if got != int32(7) {
			fail("before alter: %#v", got)
		}
	}
	dc, err := pgx.Connect(ctx, direct)
	must(err, "direct connect")
	_, err = dc.Exec(ctx, "ALTER TABLE "+pgx.Identifier{table}.Sanitize()+" ALTER COLUMN v TYPE text")
	must(err, "alter table")
	must(dc.Close(ctx), "direct close")

	firstError := ""
	err = conn.QueryRow(ctx, query, 1).Scan(&got)
	if err != nil {
		// pgx does not retry the query itself: the error makes it forget the
		// statement (rows.Close invalidates it), and the next use closes it
		// and prepares it again. An application retries once, as here.
		if sqlstate(err) != "0A000" {
			fail("first select after alter: %v", err)
		}
		firstError = err.Error()
		must(conn.QueryRow(ctx, query, 1).Scan(&got), "select after alter, retried")
	}
	if got != "7" {
		fail("after alter: %#v (%T), want the text \"7\"", got, got)
	}
	// And once more, from the statement prepared again.
	must(conn.QueryRow(ctx, query, 1).Scan(&got), "select after alter, again")
	if got != "7" {
		fail("after alter, again: %#v (%T)", got, got)
	}
	return map[string]any{"value": got, "type": fmt.Sprintf("%T", got), "first_error": firstError}
}

func main() {
	if len(os.Args) < 3 {
		fail("usage: pgxedges deallocate CONNINFO | alter CONNINFO DIRECT_CONNINFO TABLE")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, os.Args[2])
	must(err, "connect")
	var out map[string]any
	switch {
	case os.Args[1] == "deallocate" && len(os.Args) == 3:
		out = deallocate(ctx, conn)
	case os.Args[1] == "alter" && len(os.Args) == 5:
		out = alter(ctx, conn, os.Args[3], os.Args[4])
	default:
		fail("bad arguments %q", os.Args[1:])
	}
	must(conn.Close(ctx), "close")
	out["test"] = os.Args[1]
	report(out)
}
