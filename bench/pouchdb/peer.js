// The PouchDB peer of memsync's bench (issue 21): a local leveldb PouchDB replicating to
// an express-pouchdb server (leveldb too) on loopback, both in this one node process, as
// memsync's device and cloud share one Python process in the bench.
//
// Invariants: the server binds 127.0.0.1 only, on a port the OS picks; every job works on
// fresh databases under the folder given as argv[2]; nothing is fetched from anywhere.
// Protocol: one JSON command per line on stdin, one JSON answer per line on stdout;
// wall times from process.hrtime, CPU from process.cpuUsage (user + system, this
// process: client and server together). An error answers {"error": "..."} and the
// peer keeps serving.
'use strict';

const path = require('path');
const readline = require('readline');
const express = require('express');
const PouchDB = require('pouchdb');
const expressPouchDB = require('express-pouchdb');

const folder = argvFolder();
const fs = require('fs');
fs.mkdirSync(path.join(folder, 'server'), { recursive: true });
fs.mkdirSync(path.join(folder, 'local'), { recursive: true });
const ServerDB = PouchDB.defaults({ prefix: path.join(folder, 'server') + path.sep });
const BATCH = 500;
let counter = 0;

function argvFolder() {
  if (process.argv.length < 3) {
    process.stderr.write('usage: node peer.js <folder>\n');
    process.exit(2);
  }
  return process.argv[2];
}

function now() {
  return { wall: process.hrtime.bigint(), cpu: process.cpuUsage() };
}

function since(start) {
  const cpu = process.cpuUsage(start.cpu);
  return {
    s: Number(process.hrtime.bigint() - start.wall) / 1e9,
    cpu_s: (cpu.user + cpu.system) / 1e6,
  };
}

// A body of about `bytes` characters, like the bench's ~200-byte sentences.
function body(i, bytes) {
  const text = `I keep note number ${i} about the garden, the bikes and the long trip north`;
  return (text + ' and so on'.repeat(20)).slice(0, bytes - 1) + '.';
}

function docs(first, n, bytes) {
  const out = [];
  for (let i = first; i < first + n; i++) {
    out.push({ _id: `doc-${String(i).padStart(9, '0')}`, text: body(i, bytes), n: i });
  }
  return out;
}

async function bulk(db, first, n, bytes) {
  for (let start = first; start < first + n; start += BATCH) {
    await db.bulkDocs(docs(start, Math.min(BATCH, first + n - start), bytes));
  }
}

// The server's databases are reached over HTTP only (fills and the one change too,
// untimed): a second PouchDB instance on the server's leveldb in this process would
// share its files with express-pouchdb's and stall replication's checkpoints.
async function fresh(name) {
  counter += 1;
  const id = `${name}-${counter}`;
  const remote = new PouchDB(`http://127.0.0.1:${port}/${id}`);
  await remote.info(); // created on the server before anything is timed
  return { local: new PouchDB(path.join(folder, 'local', id)), remote, id };
}

async function closeAll(pair) {
  await pair.remote.destroy();
  await pair.local.destroy();
}

let port = 0;
let pending = null; // the pair kept between "initial" and "one_change"

async function push({ n, bytes }) {
  const pair = await fresh('push');
  const q = now();
  await bulk(pair.local, 0, n, bytes);
  const queued = since(q);
  const p = now();
  const result = await pair.local.replicate.to(pair.remote, { batch_size: BATCH });
  const pushed = since(p);
  const info = await pair.remote.info();
  await closeAll(pair);
  if (info.doc_count !== n) throw new Error(`push: server holds ${info.doc_count} of ${n} docs`);
  return {
    docs: n,
    queue_s: queued.s,
    queue_cpu_s: queued.cpu_s,
    push_s: pushed.s,
    push_cpu_s: pushed.cpu_s,
    docs_written: result.docs_written,
  };
}

async function initial({ n, bytes }) {
  if (pending) await closeAll(pending);
  const pair = await fresh('initial');
  await bulk(pair.remote, 0, n, bytes);
  const t = now();
  const result = await pair.local.replicate.from(pair.remote, { batch_size: BATCH });
  const took = since(t);
  const info = await pair.local.info();
  if (info.doc_count !== n) throw new Error(`initial: local holds ${info.doc_count} of ${n}`);
  pending = { ...pair, next: n, bytes };
  return { docs: n, sync_s: took.s, sync_cpu_s: took.cpu_s, docs_written: result.docs_written };
}

// One more doc on the server, then one replicate.from: the local side brings exactly it.
async function oneChange() {
  if (!pending) throw new Error('one_change: run "initial" first');
  const doc = docs(pending.next, 1, pending.bytes)[0];
  pending.next += 1;
  await pending.remote.put(doc);
  const t = now();
  const result = await pending.local.replicate.from(pending.remote, { batch_size: BATCH });
  const took = since(t);
  if (result.docs_written !== 1) {
    throw new Error(`one_change: brought ${result.docs_written} docs, expected 1`);
  }
  return { sync_s: took.s, sync_cpu_s: took.cpu_s };
}

async function handle(command) {
  switch (command.job) {
    case 'push':
      return push(command);
    case 'initial':
      return initial(command);
    case 'one_change':
      return oneChange();
    case 'close':
      if (pending) await closeAll(pending);
      pending = null;
      return { closed: true };
    default:
      throw new Error(`unknown job ${JSON.stringify(command.job).slice(0, 40)}`);
  }
}

function main() {
  const app = express();
  app.use(
    '/',
    expressPouchDB(ServerDB, {
      mode: 'minimumForPouchDB',
      configPath: path.join(folder, 'config.json'),
      logPath: path.join(folder, 'log.txt'),
    }),
  );
  // stdin is read only once the server listens: no job runs before the port is known
  const server = app.listen(0, '127.0.0.1', () => {
    port = server.address().port;
    process.stdout.write(JSON.stringify({ ready: true, port, node: process.version }) + '\n');
    serve(server);
  });
}

function serve(server) {
  const lines = readline.createInterface({ input: process.stdin });
  let chain = Promise.resolve();
  lines.on('line', (line) => {
    chain = chain.then(async () => {
      let answer;
      try {
        answer = await handle(JSON.parse(line));
      } catch (err) {
        answer = { error: String((err && err.message) || err).slice(0, 500) };
      }
      process.stdout.write(JSON.stringify(answer) + '\n');
    });
  });
  lines.on('close', () => {
    chain.then(async () => {
      if (pending) await closeAll(pending);
      server.close();
      process.exit(0);
    });
  });
}

main();
