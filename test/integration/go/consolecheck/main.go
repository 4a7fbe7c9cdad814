// consolecheck runs SHOW commands against pgcrew's admin console the way
// monitoring programs do, with github.com/lib/pq (database/sql, the simple
// query protocol, as the community pgbouncer_exporter) or
// github.com/jackc/pgx/v5 (the extended protocol, binary results), and reads
// every column by name into a Go value of the column's type. One JSON line
// per command on stdout; a driver or scan error is an "error" field.
//
//	consolecheck pq|pgx <conninfo> <command>...
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/lib/pq"
)

type column struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

type result struct {
	Command string           `json:"command"`
	Columns []column         `json:"columns"`
	Rows    []map[string]any `json:"rows"`
	Error   string           `json:"error,omitempty"`
}

// A typed destination for a column of this PostgreSQL type.
func dest(typ string) any {
	switch typ {
	case "INT4", "INT8", "INT2":
		return new(sql.NullInt64)
	case "BYTEA":
		return new([]byte)
	default:
		return new(sql.NullString)
	}
}

// The scanned value, nil for SQL NULL.
func value(d any) any {
	switch v := d.(type) {
	case *sql.NullInt64:
		if v.Valid {
			return v.Int64
		}
	case *sql.NullString:
		if v.Valid {
			return v.String
		}
	case *[]byte:
		if *v != nil {
			return fmt.Sprintf("%x", *v)
		}
	}
	return nil
}

func withPq(conninfo string, cmds []string) []result {
	db, err := sql.Open("postgres", conninfo)
	if err != nil {
		return []result{{Error: err.Error()}}
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	var out []result
	for _, cmd := range cmds {
		out = append(out, pqOne(db, cmd))
	}
	return out
}

func pqOne(db *sql.DB, cmd string) result {
	r := result{Command: cmd, Columns: []column{}, Rows: []map[string]any{}}
	rows, err := db.Query(cmd)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	defer rows.Close()
	types, err := rows.ColumnTypes()
	if err != nil {
		r.Error = err.Error()
		return r
	}
	for _, t := range types {
		r.Columns = append(r.Columns, column{t.Name(), t.DatabaseTypeName()})
	}
	for rows.Next() {
		dests := make([]any, len(types))
		for i, t := range types {
			dests[i] = dest(t.DatabaseTypeName())
		}
		if err := rows.Scan(dests...); err != nil {
			r.Error = err.Error()
			return r
		}
		row := map[string]any{}
		for i, t := range types {
			row[t.Name()] = value(dests[i])
		}
		r.Rows = append(r.Rows, row)
	}
	if err := rows.Err(); err != nil {
		r.Error = err.Error()
	}
	return r
}

func withPgx(conninfo string, cmds []string) []result {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, conninfo)
	if err != nil {
		return []result{{Error: err.Error()}}
	}
	defer conn.Close(ctx)
	var out []result
	for _, cmd := range cmds {
		out = append(out, pgxOne(ctx, conn, cmd))
	}
	return out
}

func pgxOne(ctx context.Context, conn *pgx.Conn, cmd string) result {
	r := result{Command: cmd, Columns: []column{}, Rows: []map[string]any{}}
	rows, err := conn.Query(ctx, cmd)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	defer rows.Close()
	tm := conn.TypeMap()
	fields := rows.FieldDescriptions()
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = "UNKNOWN"
		if t, ok := tm.TypeForOID(f.DataTypeOID); ok {
			names[i] = map[string]string{"text": "TEXT", "int4": "INT4", "int8": "INT8",
				"int2": "INT2", "bytea": "BYTEA"}[t.Name]
		}
		r.Columns = append(r.Columns, column{f.Name, names[i]})
	}
	for rows.Next() {
		dests := make([]any, len(fields))
		for i := range fields {
			dests[i] = dest(names[i])
		}
		if err := rows.Scan(dests...); err != nil {
			r.Error = err.Error()
			return r
		}
		row := map[string]any{}
		for i, f := range fields {
			row[f.Name] = value(dests[i])
		}
		r.Rows = append(r.Rows, row)
	}
	if err := rows.Err(); err != nil {
		r.Error = err.Error()
	}
	return r
}

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: consolecheck pq|pgx <conninfo> <command>...")
		os.Exit(2)
	}
	var res []result
	switch os.Args[1] {
	case "pq":
		res = withPq(os.Args[2], os.Args[3:])
	case "pgx":
		res = withPgx(os.Args[2], os.Args[3:])
	default:
		fmt.Fprintln(os.Stderr, "driver must be pq or pgx")
		os.Exit(2)
	}
	enc := json.NewEncoder(os.Stdout)
	for _, r := range res {
		if err := enc.Encode(r); err != nil {
			os.Exit(1)
		}
	}
}
