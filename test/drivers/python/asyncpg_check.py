"""asyncpg through pgcrew (see test/drivers/README.md): its statement cache
on (the default), executemany, COPY, a large result and a timeout's
cancellation, each result checked. usage: asyncpg_check.py CONNINFO TABLE"""

import asyncio
import json
import os
import sys
import time

import asyncpg

REUSE = int(os.environ.get("REUSE", "3000"))


def check(cond, what):
    if not cond:
        raise SystemExit(f"asyncpg check failed: {what}")


def dsn_kwargs(conninfo):
    kv = dict(part.split("=", 1) for part in conninfo.split())
    return {"host": kv["host"], "port": int(kv["port"]), "user": kv["user"],
            "password": kv.get("password"), "database": kv["dbname"], "ssl": False}


async def main(conninfo, table):
    out = {"driver": "asyncpg"}
    conn = await asyncpg.connect(**dsn_kwargs(conninfo))
    ins = f'INSERT INTO "{table}" VALUES ($1, $2)'

    row = await conn.fetchrow("SELECT $1::int + $2::int, $3::text || '!', $4::text IS NULL",
                              40, 2, "hi", None)
    check(tuple(row) == (42, "hi!", True), f"parameters: {row}")

    pids = set()
    for i in range(REUSE):
        v, pid = await conn.fetchrow("SELECT $1::int * 2, pg_backend_pid()", i)
        check(v == 2 * i, f"reuse {i}: {v}")
        pids.add(pid)
    out["reused"] = REUSE
    out["backends"] = len(pids)
    # A prepared statement object reused directly.
    stmt = await conn.prepare("SELECT $1::int - 1")
    for i in range(200):
        check(await stmt.fetchval(i) == i - 1, "prepared statement object")

    tr = conn.transaction()
    await tr.start()
    await conn.execute(ins, 1, "a")
    await tr.rollback()
    async with conn.transaction():
        await conn.execute(ins, 1, "b")
    rows = await conn.fetch(f'SELECT id, t FROM "{table}" WHERE id = $1', 1)
    check([tuple(r) for r in rows] == [(1, "b")], f"rollback then commit: {rows}")

    try:
        await conn.fetchval("SELECT 1 / $1::int", 0)
        check(False, "division by zero raised nothing")
    except asyncpg.DivisionByZeroError:
        pass
    try:
        async with conn.transaction():
            await conn.execute(ins, 2, "c")
            await conn.execute(ins, 1, "dup")
        check(False, "duplicate key raised nothing")
    except asyncpg.UniqueViolationError:
        pass
    n = await conn.fetchval(f'SELECT count(*) FROM "{table}"')
    check(n == 1, f"after errors {n} rows")

    res = await conn.copy_records_to_table(table, records=[(i, f"row {i}") for i in range(1000, 2000)],
                                           columns=["id", "t"])
    check(res == "COPY 1000", f"copy in: {res}")
    got = []

    async def sink(data):
        got.append(data)
    await conn.copy_from_query(f'SELECT id, t FROM "{table}" WHERE id >= 1000 ORDER BY id',
                               output=sink, format="text")
    lines = b"".join(got).decode().splitlines()
    check(len(lines) == 1000 and lines[0] == "1000\trow 1000" and lines[-1] == "1999\trow 1999",
          f"copy out: {len(lines)}")
    out["copy_rows"] = len(lines)

    t0 = time.monotonic()
    count = total = size = 0
    async with conn.transaction():
        async for i, s in conn.cursor("SELECT i, repeat('x', 500) FROM generate_series(1, $1) i",
                                      100000, prefetch=5000):
            count += 1
            total += i
            size += len(s)
    rows = await conn.fetch("SELECT i, repeat('x', 500) FROM generate_series(1, $1) i", 100000)
    check(len(rows) == 100000 and rows[-1][0] == 100000, "large fetch")
    del rows
    check((count, total, size) == (100000, 5000050000, 50000000), f"large: {count} {total} {size}")
    out["large_rows"] = count
    out["large_seconds"] = round(time.monotonic() - t0, 2)

    t0 = time.monotonic()
    try:
        await conn.execute("SELECT pg_sleep(30)", timeout=0.5)
        check(False, "pg_sleep did not time out")
    except asyncio.TimeoutError:
        pass
    out["cancel_seconds"] = round(time.monotonic() - t0, 2)
    check(out["cancel_seconds"] < 10, "cancel took too long")
    check(await conn.fetchval("SELECT $1::int", 7) == 7, "after cancel")

    await conn.executemany(ins, [(i, "p") for i in range(3000, 3500)])
    n = await conn.fetchval(f"SELECT count(*) FROM \"{table}\" WHERE t = 'p'")
    check(n == 500, f"executemany: {n}")
    out["pipelined"] = 500
    await conn.close()
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
