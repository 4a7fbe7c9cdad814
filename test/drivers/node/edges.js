// node-postgres ending a client right after connect(), without waiting for
// it (run by test/integration/test_driver_edges.py): the driver then writes
// Terminate before the startup packet. No client may see an 'error' event
// or a rejected promise; prints one JSON object of what it saw and exits 0
// only when nothing went wrong.
// usage: NODE_PATH=.cache/drivers/node/node_modules node edges.js CONNINFO [COUNT]
'use strict';
const { Client } = require('pg');

function config(conninfo) {
  const kv = Object.fromEntries(conninfo.split(/\s+/).map((p) => p.split(/=(.*)/s).slice(0, 2)));
  return { host: kv.host, port: +kv.port, user: kv.user, password: kv.password, database: kv.dbname };
}

const problems = [];
// An application that does not wait for connect() does not catch it either:
// a rejection would end the process; record it instead, to report it.
process.on('unhandledRejection', (e) => problems.push(`unhandled rejection: ${e && e.stack || e}`));

async function main(conninfo, count) {
  let ended = 0;
  for (let i = 0; i < count; i++) {
    const c = new Client(config(conninfo));
    c.on('error', (e) => problems.push(`client ${i} 'error' event: ${e && e.stack || e}`));
    c.connect();
    await c.end();
    ended++;
  }
  // end() resolves once the socket closed; callbacks queued by then (the
  // 'end' event, a rejection) run before setImmediate's.
  await new Promise((resolve) => setImmediate(resolve));
  console.log(JSON.stringify({ ended, problems }));
  process.exit(problems.length === 0 && ended === count ? 0 : 1);
}

main(process.argv[2], parseInt(process.argv[3] || '10', 10)).catch((e) => {
  console.error(e && e.stack || e);
  process.exit(1);
});
