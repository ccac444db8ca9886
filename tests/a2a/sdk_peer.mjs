// An A2A peer built on the official JavaScript SDK (@a2a-js/sdk, protocol 1.0, JSON-RPC binding),
// for tests/a2a. Skills: `echo` (a task whose artifacts are a text part and a data part), `slow`
// (works for `seconds`, until cancelled), `ask` (stops at TASK_STATE_INPUT_REQUIRED), `refuse`
// (ends TASK_STATE_FAILED with a message) and `word-count` (an id that is no identifier).
//
//   node sdk_peer.mjs --modules DIR --port-file FILE --log FILE [--token TOKEN] [--streaming]
//
// Listens on 127.0.0.1, port 0; writes the port to --port-file once listening. Appends one line per
// event the test checks to --log: "rpc METHOD", "call SKILL ARGUMENTS-JSON", "cancel TASK-ID". With --token, every
// request (the card too) needs "Authorization: Bearer TOKEN", else 401.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { randomUUID } from 'node:crypto';

function option(name, fallback) {
  const i = process.argv.indexOf(name);
  if (i < 0) {
    if (fallback !== undefined) return fallback;
    throw new Error(`${name} is required`);
  }
  return process.argv[i + 1];
}
const modules = path.resolve(option('--modules'));
const portFile = option('--port-file');
const logFile = option('--log');
const token = option('--token', '');
const streaming = process.argv.includes('--streaming');

const require = createRequire(path.join(modules, 'package.json'));
const express = require('express');
const sdkDir = path.join(modules, 'node_modules', '@a2a-js', 'sdk', 'dist');
const a2a = await import(pathToFileURL(path.join(sdkDir, 'index.js')));
const server = await import(pathToFileURL(path.join(sdkDir, 'server', 'index.js')));
const serverExpress = await import(pathToFileURL(path.join(sdkDir, 'server', 'express', 'index.js')));

const log = (line) => fs.appendFileSync(logFile, line + '\n');

function status(taskId, contextId, state, text) {
  const json = { taskId, contextId, status: { state } };
  if (text !== undefined)
    json.status.message = { messageId: randomUUID(), role: 'ROLE_AGENT', parts: [{ text }] };
  return { kind: 'statusUpdate', data: a2a.TaskStatusUpdateEvent.fromJSON(json) };
}

/// The arguments the host sent: the data part of the user's message.
function argumentsOf(message) {
  const data = message.parts.find((p) => p.content?.$case === 'data');
  return data ? data.content.value : undefined;
}

const cancelled = new Set();
const executor = {
  async execute(context, bus) {
    const { taskId, contextId } = context;
    const skill = context.userMessage.metadata?.skill ?? '';
    const args = argumentsOf(context.userMessage) ?? {};
    log(`call ${skill} ${JSON.stringify(args)}`);
    bus.publish({ kind: 'task', data: a2a.Task.fromJSON({ id: taskId, contextId, status: { state: 'TASK_STATE_SUBMITTED' } }) });
    bus.publish(status(taskId, contextId, 'TASK_STATE_WORKING'));
    if (skill === 'echo' || skill === 'word-count') {
      const text = String(args.text ?? '');
      const artifact = skill === 'echo'
        ? { artifactId: randomUUID(), name: 'echo', parts: [{ text: `echo: ${text}` }, { data: { echoed: args, length: text.length } }] }
        : { artifactId: randomUUID(), name: 'count', parts: [{ data: { words: text.split(/\s+/).filter(Boolean).length } }] };
      bus.publish({ kind: 'artifactUpdate', data: a2a.TaskArtifactUpdateEvent.fromJSON({ taskId, contextId, artifact, lastChunk: true }) });
      bus.publish(status(taskId, contextId, 'TASK_STATE_COMPLETED'));
    } else if (skill === 'slow') {
      const until = Date.now() + 1000 * Number(args.seconds ?? 60);
      while (Date.now() < until && !cancelled.has(taskId)) await new Promise((r) => setTimeout(r, 50));
      if (cancelled.has(taskId)) return;  // cancelTask published the final state
      bus.publish({ kind: 'artifactUpdate', data: a2a.TaskArtifactUpdateEvent.fromJSON({ taskId, contextId, artifact: { artifactId: randomUUID(), parts: [{ text: 'done' }] }, lastChunk: true }) });
      bus.publish(status(taskId, contextId, 'TASK_STATE_COMPLETED'));
    } else if (skill === 'ask') {
      bus.publish(status(taskId, contextId, 'TASK_STATE_INPUT_REQUIRED', 'which city do you mean?'));
    } else {
      bus.publish(status(taskId, contextId, 'TASK_STATE_FAILED', `no skill ${skill} here`));
    }
    bus.finished();
  },
  async cancelTask(taskId, bus) {
    log(`cancel ${taskId}`);
    cancelled.add(taskId);
    bus.publish(status(taskId, '', 'TASK_STATE_CANCELED'));
    bus.finished();
  },
};

const skill = (id, description) => ({ id, name: id, description, tags: ['test'] });
const cardJson = {
  name: 'psych test peer',
  description: 'An A2A peer for psych tests',
  version: '1.0.0',
  supportedInterfaces: [],  // set once the port is known
  capabilities: { streaming, pushNotifications: false },
  defaultInputModes: ['application/json', 'text/plain'],
  defaultOutputModes: ['application/json', 'text/plain'],
  skills: [
    skill('echo', 'Echoes its arguments as a text part and a data part.'),
    skill('slow', 'Works for `seconds` seconds, unless cancelled.'),
    skill('ask', 'Always needs more input.'),
    skill('refuse', 'Always fails.'),
    skill('word-count', 'Counts the words of `text`.'),
  ],
};

const app = express();
app.use((req, res, next) => {
  if (token && req.headers.authorization !== `Bearer ${token}`) return res.status(401).json({ error: 'unauthorized' });
  next();
});
const listener = app.listen(0, '127.0.0.1', () => {
  const port = listener.address().port;
  cardJson.supportedInterfaces = [{ url: `http://127.0.0.1:${port}/a2a`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' }];
  const card = a2a.AgentCard.fromJSON(cardJson);
  const handler = new server.DefaultRequestHandler(card, new server.InMemoryTaskStore(), executor);
  app.use('/.well-known/agent-card.json', serverExpress.agentCardHandler({ agentCardProvider: handler }));
  const logMethod = (req, res, next) => { log(`rpc ${req.body?.method}`); next(); };
  app.use('/a2a', express.json({ limit: '4mb' }), logMethod, serverExpress.jsonRpcHandler({ requestHandler: handler, userBuilder: serverExpress.UserBuilder.noAuthentication }));
  fs.writeFileSync(portFile + '.tmp', String(port));
  fs.renameSync(portFile + '.tmp', portFile);
});
process.on('SIGTERM', () => { listener.close(); process.exit(0); });
