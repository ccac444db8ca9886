// psych mcp driven by the official TypeScript SDK's client (@modelcontextprotocol/sdk, installed by
// scripts/install-mcp-servers), as an MCP client application drives it: over stdio, and over
// Streamable HTTP against a `psych mcp --listen` this script starts. One case per run:
//   node sdk_client.cjs CASE --psych PATH --modules DIR [--transport stdio|http] [--scratch DIR]
// Prints what it checked; exits 1 with the reason on the first check that fails.
'use strict';
const { createRequire } = require('node:module');
const fs = require('node:fs');
const path = require('node:path');
const { spawn, execFileSync } = require('node:child_process');

function option(name, fallback) {
  const at = process.argv.indexOf(name);
  return at > 0 ? process.argv[at + 1] : fallback;
}
const which = process.argv[2];
const psych = path.resolve(option('--psych'));
const modules = path.resolve(option('--modules'));
const transportKind = option('--transport', 'stdio');
const scratch = fs.mkdtempSync(path.join(option('--scratch', require('node:os').tmpdir()), 'psych-mcp-client-'));
const fromModules = createRequire(path.join(modules, 'package.json'));
const { Client } = fromModules('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = fromModules('@modelcontextprotocol/sdk/client/stdio.js');
const { StreamableHTTPClientTransport } = fromModules('@modelcontextprotocol/sdk/client/streamableHttp.js');
const filesystemServer = path.join(modules, 'node_modules', '.bin', 'mcp-server-filesystem');

let failures = 0;
function check(condition, what, detail) {
  if (condition) {
    console.log(`ok: ${what}`);
    return;
  }
  failures += 1;
  console.log(`FAILED: ${what}${detail === undefined ? '' : `\n  ${typeof detail === 'string' ? detail : JSON.stringify(detail)}`}`);
}

/// The payload of a run_code result: its structuredContent, which must equal its text.
function payload(result) {
  const text = result.content && result.content[0] && result.content[0].text;
  const parsed = JSON.parse(text);
  check(JSON.stringify(parsed) === JSON.stringify(result.structuredContent), 'the text and structuredContent agree',
        { text, structured: result.structuredContent });
  return parsed;
}

/// Starts psych mcp and connects a client to it; `args` are psych mcp's after `mcp`.
async function connect(args) {
  const client = new Client({ name: 'psych-tests', version: '1.0.0' });
  if (transportKind === 'stdio') {
    const transport = new StdioClientTransport({ command: psych, args: ['mcp', ...args], stderr: 'inherit' });
    await client.connect(transport);
    return { client, pid: () => transport.pid, close: async () => client.close() };
  }
  const tokenFile = path.join(scratch, 'tokens');
  fs.writeFileSync(tokenFile, 'tests s3cret-token\n', { mode: 0o600 });
  const server = spawn(psych, ['mcp', '--listen', '127.0.0.1:0', '--token-file', tokenFile, ...args],
                       { stdio: ['ignore', 'inherit', 'pipe'] });
  const port = await new Promise((resolve, reject) => {
    let seen = '';
    server.stderr.on('data', (chunk) => {
      process.stderr.write(chunk);
      seen += chunk.toString();
      const found = /listening on https?:\/\/[^\s]*:(\d+)/.exec(seen);
      if (found) resolve(Number(found[1]));
    });
    server.on('exit', (code) => reject(new Error(`psych mcp --listen exited with ${code}: ${seen}`)));
  });
  const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), {
    requestInit: { headers: { Authorization: 'Bearer s3cret-token' } },
  });
  await client.connect(transport);
  return {
    client,
    pid: () => server.pid,
    close: async () => {
      await transport.terminateSession().catch(() => {});
      await client.close();
      server.kill('SIGTERM');
      await new Promise((resolve) => server.on('exit', resolve));
    },
  };
}

/// The processes whose command line holds `marker`, other than this one.
function processesWith(marker) {
  const found = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const command = fs.readFileSync(`/proc/${entry}/cmdline`, 'latin1');
      if (command.includes(marker)) found.push(Number(entry));
    } catch (_) { /* gone meanwhile */ }
  }
  return found;
}

const root = path.resolve(__dirname, '..', '..');

const cases = {
  // docs/mcp-server.md's configuration, as a client reads it: psych mcp started from
  // examples/mcp-server/mcp_client_config.json with examples/mcp-server/servers.json, the paths of
  // this machine put in place of the examples' (psych, the server, its directory).
  async config_snippet() {
    const clientConfig = JSON.parse(fs.readFileSync(path.join(root, 'examples/mcp-server/mcp_client_config.json'), 'utf8'));
    const serversConfig = JSON.parse(fs.readFileSync(path.join(root, 'examples/mcp-server/servers.json'), 'utf8'));
    const data = path.join(scratch, 'shared');
    fs.mkdirSync(data);
    fs.writeFileSync(path.join(data, 'hello.txt'), 'hello from the snippet\n');
    serversConfig.mcpServers.fs.command = filesystemServer;
    serversConfig.mcpServers.fs.env = { PSYCH_UPSTREAM_SECRET: 's3cret-upstream-credential' };
    serversConfig.mcpServers.fs.args = serversConfig.mcpServers.fs.args.map((a) => (a === '/srv/shared' ? data : a));
    const serversFile = path.join(scratch, 'servers.json');
    fs.writeFileSync(serversFile, JSON.stringify(serversConfig));
    const entry = clientConfig.mcpServers.psych;
    check(entry.command === 'psych' && entry.args[0] === 'mcp', 'the snippet starts `psych mcp`', entry);
    const args = entry.args.slice(1).map((a) => (a === '/etc/psych/servers.json' ? serversFile : a));
    const server = await connect(args);
    const result = await server.client.callTool({
      name: 'run_code',
      arguments: { program: `got = await fs__read_text_file(path=${JSON.stringify(path.join(data, 'hello.txt'))})\nreturn got["content"][0]["text"].strip()` },
    });
    check(payload(result).value === 'hello from the snippet', 'a program reads the shared file through the configured server',
          result.structuredContent);
    // The upstream server's environment (its credentials) never reaches the program.
    const leak = await server.client.callTool({
      name: 'run_code',
      arguments: { program: 'import os\nreturn sorted(k for k, v in os.environ.items() if "s3cret" in v or "UPSTREAM" in k)' },
    });
    check(JSON.stringify(payload(leak).value) === '[]', "the upstream server's environment is not the program's",
          leak.structuredContent);
    await server.close();
  },


  // tools/list: run_code and read_tool_output, run_code's description made from the catalogue.
  async list_tools() {
    const data = path.join(scratch, 'data');
    fs.mkdirSync(data);
    const server = await connect(['--mcp', `fs=${filesystemServer} ${data}`]);
    const { tools } = await server.client.listTools();
    const names = tools.map((t) => t.name).sort();
    check(JSON.stringify(names) === '["read_tool_output","run_code"]', 'two tools: run_code and read_tool_output', names);
    const runCode = tools.find((t) => t.name === 'run_code');
    check(runCode.description.includes('fs__read_text_file'), 'the description names the upstream tools', runCode.description);
    check(runCode.description.includes('get_tool_info'), 'the description says how to read a schema');
    check(runCode.inputSchema.required.includes('program'), 'the input schema requires program', runCode.inputSchema);
    check(server.client.getServerVersion().name === 'psych', 'serverInfo names psych', server.client.getServerVersion());
    await server.close();
  },

  // One program loops over the filesystem server's tools and returns only what it computed.
  async loop_over_tools() {
    const data = path.join(scratch, 'data');
    fs.mkdirSync(data);
    for (let i = 0; i < 12; ++i) fs.writeFileSync(path.join(data, `note-${i}.txt`), `line\n`.repeat(i + 1));
    const server = await connect(['--mcp', `fs=${filesystemServer} ${data}`]);
    const program = [
      `listing = await fs__list_directory(path=${JSON.stringify(data)})`,
      'names = sorted(line.split("] ", 1)[1] for line in listing["content"][0]["text"].splitlines())',
      'lines = {}',
      'for name in names:',
      `    got = await call_tool("fs__read_text_file", {"path": ${JSON.stringify(data)} + "/" + name})`,
      '    lines[name] = got["content"][0]["text"].count("\\n")',
      'return {"files": len(names), "lines": sum(lines.values()), "largest": max(lines, key=lines.get)}',
    ].join('\n');
    const result = await server.client.callTool({ name: 'run_code', arguments: { program } });
    const got = payload(result);
    check(!result.isError, 'the program succeeded', got);
    check(got.value && got.value.files === 12 && got.value.lines === 78 && got.value.largest === 'note-11.txt',
          'it read every file through the server and returned only the summary', got);
    // A destructive upstream tool (write_file: destructiveHint) is refused in a program.
    const write = await server.client.callTool({
      name: 'run_code',
      arguments: { program: `try:\n    await fs__write_file(path=${JSON.stringify(data)} + "/x", content="x")\nexcept ToolError as e:\n    return e.kind` },
    });
    check(payload(write).value === 'approval_required_in_program', 'a destructive tool is refused in a program',
          write.structuredContent);
    check(!fs.existsSync(path.join(data, 'x')), 'and nothing was written');
    // A traceback comes back as data, with isError.
    const failing = await server.client.callTool({ name: 'run_code', arguments: { program: 'x = 1\nreturn 1 / 0' } });
    const failed = payload(failing);
    check(failing.isError === true && failed.failure && failed.failure.traceback.includes('ZeroDivisionError') &&
          failed.failure.line === 2, 'a failure is a tool result with isError and the traceback', failed);
    await server.close();
  },

  // A cancelled 30-second program: the call is abandoned and nothing of the program survives.
  async cancel() {
    const server = await connect([]);
    const marker = `psych-cancel-${process.pid}-${Date.now()}`;
    const controller = new AbortController();
    const program = `import subprocess, time\nsubprocess.Popen(["sleep", "31"])\nprint("${marker}", flush=True)\ntime.sleep(30)`;
    const progress = [];
    const call = server.client.callTool({ name: 'run_code', arguments: { program: `# ${marker}\n${program}` } }, undefined,
      { signal: controller.signal, onprogress: (p) => progress.push(p), timeout: 60000 });
    const started = Date.now();
    while (!progress.some((p) => (p.message || '').includes(marker)) && Date.now() - started < 20000)
      await new Promise((resolve) => setTimeout(resolve, 50));
    check(progress.some((p) => (p.message || '').includes(marker)), 'live output arrived as progress', progress);
    const sleepers = () => processesWith('sleep\u000031');
    check(sleepers().length >= 1, 'the program and its child are running');
    const abortedAt = Date.now();
    controller.abort('the test cancels');
    let rejected = false;
    try { await call; } catch (_) { rejected = true; }
    check(rejected, 'the cancelled call is abandoned');
    const deadline = Date.now() + 5000;
    while (sleepers().length > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    check(sleepers().length === 0, `no process of the program survives (gone ${Date.now() - abortedAt} ms after the cancel)`,
          sleepers());
    // The session still serves.
    const after = await server.client.callTool({ name: 'run_code', arguments: { program: 'return 2' } });
    check(payload(after).value === 2, 'the session serves the next call');
    await server.close();
  },

  // Two calls at once both run, and a third past --max-concurrent 2 is refused, not queued.
  async concurrent() {
    const server = await connect(['--max-concurrent', '2']);
    const slow = (n) => server.client.callTool({ name: 'run_code', arguments: { program: `import time\ntime.sleep(1.5)\nreturn ${n}` } });
    const began = Date.now();
    const first = slow(1);
    const second = slow(2);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const third = await server.client.callTool({ name: 'run_code', arguments: { program: 'return 3' } });
    const results = await Promise.all([first, second]);
    const took = Date.now() - began;
    check(payload(results[0]).value === 1 && payload(results[1]).value === 2, 'both concurrent calls answered');
    check(took < 2900, `they ran at once (${took} ms for two 1.5 s programs)`);
    const busy = payload(third);
    check(third.isError === true && busy.failure && busy.failure.kind === 'too_many_executions',
          'a third is refused at once with too_many_executions', busy);
    await server.close();
  },

  // The session's budget holds across calls: the second program gets what the first left.
  async session_budget() {
    const data = path.join(scratch, 'data');
    fs.mkdirSync(data);
    fs.writeFileSync(path.join(data, 'a.txt'), 'a');
    const server = await connect(['--mcp', `fs=${filesystemServer} ${data}`, '--max-session-calls', '5']);
    const program = [
      'done = 0',
      'for i in range(4):',
      '    try:',
      `        await fs__list_directory(path=${JSON.stringify(data)})`,
      '        done += 1',
      '    except ToolError as e:',
      '        return {"done": done, "kind": e.kind, "message": str(e)}',
      'return {"done": done}',
    ].join('\n');
    const first = payload(await server.client.callTool({ name: 'run_code', arguments: { program } }));
    check(first.value && first.value.done === 4 && !first.value.kind, 'the first program makes its 4 calls', first);
    const second = payload(await server.client.callTool({ name: 'run_code', arguments: { program } }));
    check(second.value && second.value.done === 1 && second.value.kind === 'budget_exhausted',
          'the second gets the 1 call left of 5, then budget_exhausted', second);
    check(second.value && /of 5 spent in this Run/.test(second.value.message || ''), 'the refusal names the Run', second);
    await server.close();
  },
};

(async () => {
  if (!cases[which]) {
    console.log(`unknown case ${which}; the cases are ${Object.keys(cases).join(', ')}`);
    process.exit(2);
  }
  try {
    await cases[which]();
  } catch (error) {
    failures += 1;
    console.log(`FAILED: ${which} threw: ${error && error.stack ? error.stack : error}`);
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
  process.exit(failures === 0 ? 0 : 1);
})();
