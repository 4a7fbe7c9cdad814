// node-postgres through pgcrew (see test/drivers/README.md): named queries
// ({name, text}: prepared once per connection by the driver), COPY with
// pg-copy-streams, a large result, query cancellation, each result checked.
// usage: NODE_PATH=.cache/drivers/node/node_modules node check.js CONNINFO TABLE
'use strict';
const { Client, Query } = require('pg');
const { from: copyFrom, to: copyTo } = require('pg-copy-streams');
const { pipeline } = require('stream/promises');
const { Readable, Writable } = require('stream');

const REUSE = parseInt(process.env.REUSE || '3000', 10);

function check(cond, what) {
  if (!cond) {
    console.error(`node-postgres check failed: ${what}`);
    process.exit(1);
  }
}

function config(conninfo) {
  const kv = Object.fromEntries(conninfo.split(/\s+/).map((p) => p.split(/=(.*)/s).slice(0, 2)));
  return { host: kv.host, port: +kv.port, user: kv.user, password: kv.password, database: kv.dbname };
}

async function expectError(promise, code, what) {
  try {
    await promise;
  } catch (e) {
    check(e.code === code, `${what}: ${e.code} ${e.message}`);
    return;
  }
  check(false, `${what}: no error`);
}

async function main(conninfo, table) {
  const out = { driver: 'node-postgres' };
  const tbl = `"${table}"`;
  const ins = { name: 'ins', text: `INSERT INTO ${tbl} VALUES ($1, $2)` };
  const c = new Client(config(conninfo));
  await c.connect();

  let r = await c.query({ name: 'params', text: "SELECT $1::int + $2::int AS s, $3::text || '!' AS t, $4::text IS NULL AS n",
                          values: [40, 2, 'hi', null] });
  check(r.rows[0].s === 42 && r.rows[0].t === 'hi!' && r.rows[0].n === true, `parameters ${JSON.stringify(r.rows)}`);

  const pids = new Set();
  for (let i = 0; i < REUSE; i++) {
    r = await c.query({ name: 'reuse', text: 'SELECT $1::int * 2 AS v, pg_backend_pid() AS pid', values: [i] });
    check(r.rows[0].v === 2 * i, `reuse ${i}`);
    pids.add(r.rows[0].pid);
  }
  out.reused = REUSE;
  out.backends = pids.size;

  await c.query('BEGIN');
  await c.query({ ...ins, values: [1, 'a'] });
  await c.query('ROLLBACK');
  await c.query('BEGIN');
  await c.query({ ...ins, values: [1, 'b'] });
  await c.query('COMMIT');
  r = await c.query({ name: 'byid', text: `SELECT t FROM ${tbl} WHERE id = $1`, values: [1] });
  check(r.rows.length === 1 && r.rows[0].t === 'b', 'rollback then commit');

  await expectError(c.query({ name: 'div', text: 'SELECT 1 / $1::int', values: [0] }), '22012', 'division by zero');
  await c.query('BEGIN');
  await c.query({ ...ins, values: [2, 'c'] });
  await expectError(c.query({ ...ins, values: [1, 'dup'] }), '23505', 'duplicate key');
  await c.query('ROLLBACK');
  r = await c.query({ name: 'count', text: `SELECT count(*)::int AS n FROM ${tbl}` });
  check(r.rows[0].n === 1, 'after errors');

  let data = '';
  for (let i = 1000; i < 2000; i++) data += `${i}\trow ${i}\n`;
  await pipeline(Readable.from([data]), c.query(copyFrom(`COPY ${tbl} (id, t) FROM STDIN`)));
  const chunks = [];
  await pipeline(c.query(copyTo(`COPY (SELECT id, t FROM ${tbl} WHERE id >= 1000 ORDER BY id) TO STDOUT`)),
                 new Writable({ write(chunk, enc, cb) { chunks.push(chunk); cb(); } }));
  check(Buffer.concat(chunks).toString() === data, 'copy out');
  out.copy_rows = 1000;

  let t0 = Date.now();
  r = await c.query({ name: 'large', text: "SELECT i, repeat('x', 500) AS s FROM generate_series(1, $1) i", values: [100000] });
  let total = 0, size = 0;
  for (const row of r.rows) { total += row.i; size += row.s.length; }
  check(r.rows.length === 100000 && total === 5000050000 && size === 50000000, `large ${r.rows.length} ${total} ${size}`);
  out.large_rows = r.rows.length;
  out.large_seconds = (Date.now() - t0) / 1000;
  r = null;

  // Cancellation the driver's way: Client.cancel sends a CancelRequest with
  // this connection's key, on a connection of its own (through pgcrew).
  t0 = Date.now();
  const q = new Query('SELECT pg_sleep(30)');
  const sleeping = new Promise((resolve, reject) => {
    q.on('error', reject);
    q.on('end', resolve);
  });
  c.query(q);
  setTimeout(() => new Client(config(conninfo)).cancel(c, q), 500);
  await expectError(sleeping, '57014', 'cancel');
  out.cancel_seconds = (Date.now() - t0) / 1000;
  check(out.cancel_seconds < 10, 'cancel took too long');
  r = await c.query({ name: 'seven', text: 'SELECT $1::int AS v', values: [7] });
  check(r.rows[0].v === 7, 'after cancel');
  await c.end();
  console.log(JSON.stringify(out));
}

main(process.argv[2], process.argv[3]).catch((e) => { console.error(e); process.exit(1); });
