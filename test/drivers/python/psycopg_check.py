"""psycopg 3 through pgcrew (see test/drivers/README.md): every query
prepared (prepare_threshold=0), libpq's pipeline mode, COPY, a large result
and cancellation, each result checked. usage: psycopg_check.py CONNINFO TABLE"""

import json
import os
import sys
import threading
import time

import psycopg
from psycopg import errors, sql

REUSE = int(os.environ.get("REUSE", "3000"))


def check(cond, what):
    if not cond:
        raise SystemExit(f"psycopg check failed: {what}")


def main(conninfo, table):
    out = {"driver": "psycopg"}
    tbl = sql.Identifier(table)
    conn = psycopg.connect(conninfo, autocommit=True, prepare_threshold=0)

    row = conn.execute("SELECT %s::int + %s::int, %s::text || '!', %s::text IS NULL",
                       (40, 2, "hi", None)).fetchone()
    check(row == (42, "hi!", True), f"parameters: {row}")

    pids = set()
    for i in range(REUSE):
        v, pid = conn.execute("SELECT %s::int * 2, pg_backend_pid()", (i,)).fetchone()
        check(v == 2 * i, f"reuse {i}: {v}")
        pids.add(pid)
    out["reused"] = REUSE
    out["backends"] = len(pids)

    with conn.transaction(force_rollback=True):
        conn.execute(sql.SQL("INSERT INTO {} VALUES (%s, %s)").format(tbl), (1, "a"))
    with conn.transaction():
        conn.execute(sql.SQL("INSERT INTO {} VALUES (%s, %s)").format(tbl), (1, "b"))
    rows = conn.execute(sql.SQL("SELECT id, t FROM {} WHERE id = %s").format(tbl), (1,)).fetchall()
    check(rows == [(1, "b")], f"rollback then commit: {rows}")

    try:
        conn.execute("SELECT 1 / %s::int", (0,))
        check(False, "division by zero raised nothing")
    except errors.DivisionByZero:
        pass
    try:
        with conn.transaction():
            conn.execute(sql.SQL("INSERT INTO {} VALUES (%s, %s)").format(tbl), (2, "c"))
            conn.execute(sql.SQL("INSERT INTO {} VALUES (%s, %s)").format(tbl), (1, "dup"))
        check(False, "duplicate key raised nothing")
    except errors.UniqueViolation:
        pass
    n = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(tbl)).fetchone()[0]
    check(n == 1, f"after errors {n} rows")

    with conn.cursor() as cur:
        with cur.copy(sql.SQL("COPY {} (id, t) FROM STDIN").format(tbl)) as copy:
            for i in range(1000, 2000):
                copy.write_row((i, f"row {i}"))
        got = []
        with cur.copy(sql.SQL("COPY (SELECT id, t FROM {} WHERE id >= 1000 ORDER BY id) "
                              "TO STDOUT").format(tbl)) as copy:
            got = list(copy.rows())
    check(len(got) == 1000 and got[0] == ("1000", "row 1000") and got[-1] == ("1999", "row 1999"),
          f"copy out: {len(got)} {got[:1]}")
    out["copy_rows"] = len(got)

    t0 = time.monotonic()
    with conn.cursor() as cur:
        cur.execute("SELECT i, repeat('x', 500) FROM generate_series(1, %s) i", (100000,))
        count = total = size = 0
        for i, s in cur:
            count += 1
            total += i
            size += len(s)
    check((count, total, size) == (100000, 5000050000, 50000000), f"large: {count} {total} {size}")
    out["large_rows"] = count
    out["large_seconds"] = round(time.monotonic() - t0, 2)

    timer = threading.Timer(0.5, conn.cancel)
    timer.start()
    t0 = time.monotonic()
    try:
        conn.execute("SELECT pg_sleep(%s)", (30,))
        check(False, "pg_sleep was not cancelled")
    except errors.QueryCanceled:
        pass
    out["cancel_seconds"] = round(time.monotonic() - t0, 2)
    check(out["cancel_seconds"] < 10, "cancel took too long")
    check(conn.execute("SELECT %s::int", (7,)).fetchone() == (7,), "after cancel")

    # libpq pipeline mode: 200 prepared statements before one Sync.
    with conn.pipeline():
        curs = [conn.execute("SELECT %s::int + 1", (i,)) for i in range(200)]
    check([c.fetchone()[0] for c in curs] == list(range(1, 201)), "pipeline results")
    with conn.pipeline():
        with conn.cursor() as cur:
            cur.executemany(sql.SQL("INSERT INTO {} VALUES (%s, %s)").format(tbl),
                            [(i, "p") for i in range(3000, 3500)])
    n = conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE t = 'p'").format(tbl)).fetchone()[0]
    check(n == 500, f"pipelined executemany: {n}")
    # An error mid-pipeline aborts the rest up to the Sync; the connection goes on.
    try:
        with conn.pipeline():
            conn.execute("SELECT 1")
            conn.execute("SELECT 1 / %s::int", (0,))
            conn.execute("SELECT 2")
        check(False, "pipeline error raised nothing")
    except errors.DivisionByZero:
        pass
    check(conn.execute("SELECT %s::int", (8,)).fetchone() == (8,), "after pipeline error")
    out["pipelined"] = 700
    conn.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
