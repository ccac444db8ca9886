// psych mcp as its clients meet it (issue 35's target: a tools/call of run_code `return 1` at a
// median of at most 0.6x a bare `python3 -I -S -c pass`). Driven by the official TypeScript SDK's
// client over stdio, interleaved in one run with the bare interpreter started the same way (node's
// spawn, which is how the client side would start anything). The interpreter is the system's
// (/usr/bin/python3, what psych itself picks: a pyenv shim on PATH is skipped).
//   node benchmarks/mcp_server.cjs --psych PATH --modules DIR [--rounds N] [--python PATH] [--backend NAME]
// Prints BENCH lines: the medians, and the ratio.
'use strict';
const { createRequire } = require('node:module');
const path = require('node:path');
const { spawn } = require('node:child_process');

function option(name, fallback) {
  const at = process.argv.indexOf(name);
  return at > 0 ? process.argv[at + 1] : fallback;
}
const psych = path.resolve(option('--psych'));
const modules = path.resolve(option('--modules'));
const rounds = Number(option('--rounds', '60'));
const python = option('--python', '/usr/bin/python3');
const backend = option('--backend', '');  // none: the strongest local backend, as psych mcp picks
const fromModules = createRequire(path.join(modules, 'package.json'));
const { Client } = fromModules('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = fromModules('@modelcontextprotocol/sdk/client/stdio.js');

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

function bare() {
  return new Promise((resolve, reject) => {
    const began = process.hrtime.bigint();
    const child = spawn(python, ['-I', '-S', '-c', 'pass'], { stdio: 'ignore' });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(Number(process.hrtime.bigint() - began) / 1e6)
                                           : reject(new Error(`${python} exited ${code}`))));
  });
}

(async () => {
  const client = new Client({ name: 'psych-bench', version: '1.0.0' });
  await client.connect(new StdioClientTransport({ command: psych, args: ['mcp', '--pool', '2', ...(backend ? ['--backend', backend] : [])], stderr: 'inherit' }));
  const call = async () => {
    const began = process.hrtime.bigint();
    const result = await client.callTool({ name: 'run_code', arguments: { program: 'return 1' } });
    const took = Number(process.hrtime.bigint() - began) / 1e6;
    if (result.isError || result.structuredContent.value !== 1)
      throw new Error(`run_code did not return 1: ${JSON.stringify(result)}`);
    return took;
  };
  for (let i = 0; i < 3; ++i) await call(), await bare();  // warm: the pool filled, the page cache
  const calls = [], bares = [];
  for (let i = 0; i < rounds; ++i) {
    // Alternating, so a burst of load on this shared machine falls on both alike.
    calls.push(await call());
    bares.push(await bare());
    await new Promise((resolve) => setTimeout(resolve, 20));  // let the pool replace what was claimed
  }
  await client.close();
  const m = median(calls), b = median(bares);
  console.log(`BENCH mcp_run_code_return_1_median ${m.toFixed(2)} ms`);
  console.log(`BENCH bare_python_I_S_pass_median ${b.toFixed(2)} ms`);
  console.log(`BENCH mcp_run_code_to_bare_python ${(m / b).toFixed(3)} x`);
  console.log(`(${backend || 'the strongest local backend'}, ${rounds} rounds, interleaved; target: at most 0.6 x)`);
})().catch((error) => {
  console.error(error);
  process.exit(1);
});
