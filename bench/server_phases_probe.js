// Preloaded into a Node MCP server by bench/server_phases.py (NODE_OPTIONS=--require=THIS): the
// process's CPU, and each thread's run time (/proc/self/task/*/schedstat), at the first tools/call
// request read, at the PROBE_N-th, at stdin's end and at exit, written to PROBE_OUT (JSON, replaced
// atomically: a SIGTERM may end the process at any point). It adds a second 'data' listener on
// stdin once the server's own is attached (an earlier one would start the flow before the
// server listens), so every run, floor's or llmc's, pays the same.
'use strict';
const fs = require('fs');
const out = process.env.PROBE_OUT;
const N = Number(process.env.PROBE_N || 1000);
const snaps = {};

function threads() {
  const found = {};
  for (const tid of fs.readdirSync('/proc/self/task')) {
    try {
      const ran = fs.readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').split(' ');
      found[tid] = [Number(ran[0]) / 1e9, Number(ran[1]) / 1e9];  // run time, time waiting to run
    } catch (e) {}  // a thread that ended meanwhile
  }
  return found;
}

function snap(tag) {
  if (snaps[tag]) return;
  const cpu = process.cpuUsage();
  const r = process.resourceUsage();
  snaps[tag] = {
    user: cpu.user / 1e6, system: cpu.system / 1e6, at: Number(process.hrtime.bigint()) / 1e9,
    voluntary: r.voluntaryContextSwitches, involuntary: r.involuntaryContextSwitches, threads: threads(),
  };
  fs.writeFileSync(out + '.tmp', JSON.stringify(snaps));
  fs.renameSync(out + '.tmp', out);
}

let seen = 0;
function onData(chunk) {
  const before = seen;
  for (let i = chunk.indexOf('tools/call'); i >= 0; i = chunk.indexOf('tools/call', i + 1)) seen++;
  if (before === 0 && seen > 0) snap('first');
  if (before < N && seen >= N) snap('last');
}

const attach = setInterval(() => {
  if (process.stdin.listenerCount('data') > 0) {
    clearInterval(attach);
    process.stdin.on('data', onData);
    process.stdin.on('end', () => snap('eof'));
  }
}, 5);
process.on('exit', () => snap('exit'));
