// pgx v5 through pgcrew (see test/drivers/README.md): the default
// QueryExecModeCacheStatement, Batch, CopyFrom/CopyTo, a large result and
// context cancellation, each result checked.
// usage: pgxcheck CONNINFO TABLE
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "pgx check failed: "+format+"\n", args...)
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

func main() {
	if len(os.Args) != 3 {
		fail("usage: pgxcheck CONNINFO TABLE")
	}
	reuse := 3000
	if s := os.Getenv("REUSE"); s != "" {
		reuse, _ = strconv.Atoi(s)
	}
	ctx := context.Background()
	tbl := pgx.Identifier{os.Args[2]}.Sanitize()
	ins := "INSERT INTO " + tbl + " VALUES ($1, $2)"
	out := map[string]any{"driver": "pgx"}
	cfg, err := pgx.ParseConfig(os.Args[1])
	must(err, "config")
	// A cancelled context sends a CancelRequest at once (through pgcrew),
	// and closes the connection only if the server has not answered in 5 s.
	cfg.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, DeadlineDelay: 5 * time.Second}
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	must(err, "connect")

	var sum int
	var txt string
	var isNull bool
	must(conn.QueryRow(ctx, "SELECT $1::int + $2::int, $3::text || '!', $4::text IS NULL",
		40, 2, "hi", nil).Scan(&sum, &txt, &isNull), "parameters")
	if sum != 42 || txt != "hi!" || !isNull {
		fail("parameters: %d %q %v", sum, txt, isNull)
	}

	pids := map[uint32]bool{}
	for i := 0; i < reuse; i++ {
		var v int
		var pid uint32
		must(conn.QueryRow(ctx, "SELECT $1::int * 2, pg_backend_pid()", i).Scan(&v, &pid), "reuse")
		if v != 2*i {
			fail("reuse %d: %d", i, v)
		}
		pids[pid] = true
	}
	out["reused"] = reuse
	out["backends"] = len(pids)

	tx, err := conn.Begin(ctx)
	must(err, "begin")
	_, err = tx.Exec(ctx, ins, 1, "a")
	must(err, "insert")
	must(tx.Rollback(ctx), "rollback")
	must(pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, ins, 1, "b")
		return err
	}), "commit")
	var t string
	must(conn.QueryRow(ctx, "SELECT t FROM "+tbl+" WHERE id = $1", 1).Scan(&t), "select")
	if t != "b" {
		fail("rollback then commit: %q", t)
	}

	var x int
	err = conn.QueryRow(ctx, "SELECT 1 / $1::int", 0).Scan(&x)
	if sqlstate(err) != "22012" {
		fail("division by zero: %v", err)
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, ins, 2, "c"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, ins, 1, "dup")
		return err
	})
	if sqlstate(err) != "23505" {
		fail("duplicate key: %v", err)
	}
	var n int
	must(conn.QueryRow(ctx, "SELECT count(*) FROM "+tbl).Scan(&n), "count")
	if n != 1 {
		fail("after errors %d rows", n)
	}

	rows := make([][]any, 0, 1000)
	for i := 1000; i < 2000; i++ {
		rows = append(rows, []any{i, fmt.Sprintf("row %d", i)})
	}
	copied, err := conn.CopyFrom(ctx, pgx.Identifier{os.Args[2]}, []string{"id", "t"}, pgx.CopyFromRows(rows))
	must(err, "CopyFrom")
	if copied != 1000 {
		fail("CopyFrom: %d", copied)
	}
	var buf bytes.Buffer
	_, err = conn.PgConn().CopyTo(ctx, &buf, "COPY (SELECT id, t FROM "+tbl+" WHERE id >= 1000 ORDER BY id) TO STDOUT")
	must(err, "CopyTo")
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 1000 || lines[0] != "1000\trow 1000" || lines[999] != "1999\trow 1999" {
		fail("copy out: %d lines", len(lines))
	}
	out["copy_rows"] = len(lines)

	t0 := time.Now()
	r, err := conn.Query(ctx, "SELECT i, repeat('x', 500) FROM generate_series(1, $1) i", 100000)
	must(err, "large")
	count, total, size := 0, 0, 0
	for r.Next() {
		var i int
		var s string
		must(r.Scan(&i, &s), "scan")
		count++
		total += i
		size += len(s)
	}
	must(r.Err(), "large rows")
	if count != 100000 || total != 5000050000 || size != 50000000 {
		fail("large: %d %d %d", count, total, size)
	}
	out["large_rows"] = count
	out["large_seconds"] = time.Since(t0).Seconds()

	cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	t0 = time.Now()
	_, err = conn.Exec(cctx, "SELECT pg_sleep(30)")
	cancel()
	out["cancel_seconds"] = time.Since(t0).Seconds()
	if sqlstate(err) != "57014" || time.Since(t0) > 10*time.Second {
		fail("cancel: %v after %v", err, time.Since(t0))
	}
	must(conn.QueryRow(ctx, "SELECT $1::int", 7).Scan(&x), "after cancel")
	if x != 7 {
		fail("after cancel: %d", x)
	}

	batch := &pgx.Batch{}
	for i := 0; i < 200; i++ {
		batch.Queue("SELECT $1::int + 1", i)
	}
	for i := 3000; i < 3500; i++ {
		batch.Queue(ins, i, "p")
	}
	br := conn.SendBatch(ctx, batch)
	for i := 0; i < 200; i++ {
		var v int
		must(br.QueryRow().Scan(&v), "batch select")
		if v != i+1 {
			fail("batch %d: %d", i, v)
		}
	}
	for i := 0; i < 500; i++ {
		_, err := br.Exec()
		must(err, "batch insert")
	}
	must(br.Close(), "batch close")
	must(conn.QueryRow(ctx, "SELECT count(*) FROM "+tbl+" WHERE t = 'p'").Scan(&n), "count p")
	if n != 500 {
		fail("batch inserts: %d", n)
	}
	// An error mid-batch: the rest of the batch fails, the connection goes on.
	batch = &pgx.Batch{}
	batch.Queue("SELECT 1")
	batch.Queue("SELECT 1 / $1::int", 0)
	batch.Queue("SELECT 2")
	br = conn.SendBatch(ctx, batch)
	_, err1 := br.Exec()
	_, err2 := br.Exec()
	if err1 != nil || sqlstate(err2) != "22012" {
		fail("batch error: %v %v", err1, err2)
	}
	br.Close()
	must(conn.QueryRow(ctx, "SELECT $1::int", 8).Scan(&x), "after batch error")
	if x != 8 {
		fail("after batch error: %d", x)
	}
	out["pipelined"] = 700
	must(conn.Close(ctx), "close")
	js, _ := json.Marshal(out)
	fmt.Println(string(js))
}
