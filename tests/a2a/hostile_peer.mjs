// A2A peers that misbehave, for tests/a2a (no SDK: each says exactly what a hostile or broken peer
// would). One mode per process:
//
//   node hostile_peer.mjs MODE --port-file FILE --log FILE
//
// huge_card     the agent card is 1 GiB, streamed as fast as the client reads
// foreign_card  the card sends JSON-RPC requests to another origin
// never_ends    the task stays TASK_STATE_WORKING whatever GetTask is asked; CancelTask is logged
// malformed     SendMessage is answered with bytes that are not JSON
// wrong_id      SendMessage is answered with a task, under another request's id
// echo_401      every JSON-RPC request gets a 401 whose body and header echo the credential
// echo_status   the task fails with a status message that quotes the credential
// drip          SendMessage's answer arrives one byte a second
// huge_answer   GetTask's answer never ends
// v0_3          a well-behaved A2A 0.3 peer: message/send, tasks/get, tasks/cancel, kebab-case states
// endless_event (streaming) SendStreamingMessage's one SSE event never ends
// stream_drip   (streaming) the stream names the task, then drips a byte a second; CancelTask is logged
// stream_cut    (streaming) the stream names the task and closes; GetTask then finds it completed
//
// Listens on 127.0.0.1, port 0, and writes the port to --port-file once listening. Appends
// "METHOD" for each JSON-RPC request and "cancel TASK-ID" for each cancel to --log.
import fs from 'node:fs';
import http from 'node:http';

const mode = process.argv[2];
const option = (name) => process.argv[process.argv.indexOf(name) + 1];
const portFile = option('--port-file');
const logFile = option('--log');
const log = (line) => fs.appendFileSync(logFile, line + '\n');

let port = 0;
const v03 = mode === 'v0_3';
const streams = ['endless_event', 'stream_drip', 'stream_cut'].includes(mode);
function card() {
  const skills = [{ id: 'work', name: 'work', description: 'Does some work.' }, { id: 'ask', name: 'ask', description: 'Asks.' }];
  if (v03)
    return { name: 'old peer', protocolVersion: '0.3.0', url: `http://127.0.0.1:${port}/rpc`, preferredTransport: 'JSONRPC',
             capabilities: {}, skills };
  const url = mode === 'foreign_card' ? 'http://127.0.0.1:1/rpc' : `http://127.0.0.1:${port}/rpc`;
  return { name: 'hostile peer', supportedInterfaces: [{ url, protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
           capabilities: { streaming: streams }, skills };
}

const task = (id, state, extra = {}) => ({ id, contextId: 'c', status: { state, ...extra } });
const answer = (res, id, result) => {
  res.writeHead(200, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', id, result }));
};

// 0.3's tasks: "work" completes at its second tasks/get, "ask" wants input.
const tasks03 = new Map();

function rpc(req, res, request) {
  const { id, method, params } = request;
  log(method);
  const auth = req.headers.authorization ?? '';
  switch (mode) {
    case 'never_ends':
      if (method === 'SendMessage') return answer(res, id, { task: task('t-never', 'TASK_STATE_SUBMITTED') });
      if (method === 'GetTask') return answer(res, id, task('t-never', 'TASK_STATE_WORKING'));
      if (method === 'CancelTask') { log(`cancel ${params.id}`); return answer(res, id, task(params.id, 'TASK_STATE_CANCELED')); }
      break;
    case 'malformed':
      res.writeHead(200, { 'Content-Type': 'application/json' });
      return res.end('{"jsonrpc":"2.0","id":' + id + ',"result":{"task":');
    case 'wrong_id':
      return answer(res, id + 1000, { task: task('t-other', 'TASK_STATE_COMPLETED') });
    case 'echo_401':
      res.writeHead(401, { 'Content-Type': 'text/plain', 'WWW-Authenticate': `Bearer error="${auth}"` });
      return res.end(`you sent ${auth}, which will not do`);
    case 'echo_status':
      return answer(res, id, { task: task('t-echo', 'TASK_STATE_FAILED',
        { message: { messageId: 'm', role: 'ROLE_AGENT', parts: [{ text: `refused: ${auth}` }] } }) });
    case 'drip': {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      const body = JSON.stringify({ jsonrpc: '2.0', id, result: { task: task('t-drip', 'TASK_STATE_COMPLETED') } });
      let i = 0;
      const timer = setInterval(() => { if (i < body.length) res.write(body[i++]); else { clearInterval(timer); res.end(); } }, 1000);
      res.on('close', () => clearInterval(timer));
      return;
    }
    case 'huge_answer':
      if (method === 'SendMessage') return answer(res, id, { task: task('t-huge', 'TASK_STATE_SUBMITTED') });
      if (method === 'CancelTask') { log(`cancel ${params.id}`); return answer(res, id, task(params.id, 'TASK_STATE_CANCELED')); }
      return flood(res, `{"jsonrpc":"2.0","id":${id},"result":{"id":"t-huge","status":{"state":"TASK_STATE_COMPLETED"},"artifacts":[{"parts":[{"text":"`);
    case 'endless_event':
      if (method !== 'SendStreamingMessage') break;
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      return flood(res, 'data: {"jsonrpc":"2.0","id":' + id + ',"result":{"task":{"id":"', false);
    case 'stream_drip':
    case 'stream_cut': {
      const tid = `t-${mode}`;
      if (method === 'CancelTask') { log(`cancel ${params.id}`); return answer(res, id, task(params.id, 'TASK_STATE_CANCELED')); }
      if (method === 'GetTask')
        return answer(res, id, { ...task(tid, 'TASK_STATE_COMPLETED'), artifacts: [{ artifactId: 'a', parts: [{ text: 'after the cut' }] }] });
      if (method !== 'SendStreamingMessage') break;
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      res.write(`data: ${JSON.stringify({ jsonrpc: '2.0', id, result: { task: task(tid, 'TASK_STATE_SUBMITTED') } })}\n\n`);
      if (mode === 'stream_cut') return res.end();
      const timer = setInterval(() => res.write(':'), 1000);
      res.on('close', () => clearInterval(timer));
      return;
    }
    case 'v0_3': {
      if (method === 'message/send') {
        const skill = params.message.metadata?.skill;
        const data = params.message.parts.find((p) => p.kind === 'data')?.data;
        const tid = `t03-${tasks03.size}`;
        tasks03.set(tid, { skill, data, polls: 0 });
        return answer(res, id, { kind: 'task', ...task(tid, 'submitted') });
      }
      if (method === 'tasks/get') {
        const t = tasks03.get(params.id);
        if (!t) break;
        if (t.skill === 'ask')
          return answer(res, id, { kind: 'task', ...task(params.id, 'input-required',
            { message: { kind: 'message', role: 'agent', messageId: 'q', parts: [{ kind: 'text', text: 'which one?' }] } }) });
        if (++t.polls < 2) return answer(res, id, { kind: 'task', ...task(params.id, 'working') });
        return answer(res, id, { kind: 'task', ...task(params.id, 'completed'), artifacts: [{ artifactId: 'a', name: 'result',
          parts: [{ kind: 'text', text: 'done' }, { kind: 'data', data: { got: t.data } },
                  { kind: 'file', file: { name: 'r.txt', mimeType: 'text/plain', uri: 'https://example.com/r.txt' } }] }] });
      }
      if (method === 'tasks/cancel') { log(`cancel ${params.id}`); return answer(res, id, { kind: 'task', ...task(params.id, 'canceled') }); }
      break;
    }
  }
  res.writeHead(200, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', id, error: { code: -32601, message: `no ${method} here` } }));
}

/// Writes `prefix` then 'x' until 1 GiB is written or the client goes away, at the client's pace.
function flood(res, prefix, head = true) {
  if (head) res.writeHead(200, { 'Content-Type': 'application/json' });
  const chunk = Buffer.alloc(64 * 1024, 'x');
  let written = 0;
  res.write(prefix);
  const more = () => {
    while (written < 1024 ** 3) {
      written += chunk.length;
      if (!res.write(chunk)) return res.once('drain', more);
    }
    res.end();
  };
  res.on('close', () => log(`flood stopped after ${written} bytes`));
  more();
}

const server = http.createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/.well-known/agent-card.json') {
    if (mode === 'huge_card') return flood(res, '{"name":"');
    res.writeHead(200, { 'Content-Type': 'application/json' });
    return res.end(JSON.stringify(card()));
  }
  if (req.method === 'POST' && req.url === '/rpc') {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      let request;
      try { request = JSON.parse(body); } catch { res.writeHead(400); return res.end(); }
      rpc(req, res, request);
    });
    return;
  }
  res.writeHead(404);
  res.end();
});
server.listen(0, '127.0.0.1', () => {
  port = server.address().port;
  fs.writeFileSync(portFile + '.tmp', String(port));
  fs.renameSync(portFile + '.tmp', portFile);
});
process.on('SIGTERM', () => process.exit(0));
