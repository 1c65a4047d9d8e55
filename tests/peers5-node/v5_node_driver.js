// Drive the official RocketMQ 5 Node.js client (rocketmq-client-nodejs 1.0.8, gRPC) for the tests.
//
// Run with NODE_PATH=<dir>/node_modules (the directory of tests/peers5-node/install.sh), through
// tests/helpers/v5_node.py:
//
//     node tests/peers5-node/v5_node_driver.js <subcommand> --endpoint HOST:PORT ...
//
// The subcommands, options and events are those of tests/peers5/v5_python_driver.py (one JSON
// object per line and event, {"event": ..., "t": <unix s>, ...}, ending with `done` (exit 0) or
// `error` (a message; exit 2, or 3 when --timeout-s passed: a watchdog ends the process whatever
// the client is doing). Every loop is bounded in count and time.
//
//   subcommand      events
//   --------------  -------------------------------------------------------------------------
//   produce         `sent` per message (message_id, transaction_id, body, tag, keys,
//                   message_group, delivery_timestamp in ms), `committed` / `rolled_back` per
//                   transaction ended by the client, `checked` per check-back the checker
//                   answered (--transaction unknown)
//   simple-consume  `received` per message (message_id, body, attempt, tag, keys,
//                   message_group, properties, ...), `acked`, `changed` (a new invisible
//                   duration), `receive_error` / `ack_error` / `change_error`
//   push-consume    `consuming` when the listener is called (message_id, attempt), `consumed`
//                   when it returns (the message's fields, `result` SUCCESS or FAILURE)
//
// Durations on the command line are seconds; the client takes milliseconds. The client logs to
// ~/logs/rocketmq/node-client.log (the wrapper sets HOME to the test's directory) through a logger
// of ours: the client's default one (egg-logger) is closed by shutdown() before its last lines.
'use strict';

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { format, parseArgs } = require('node:util');
const {
  ConsumeResult,
  FilterExpression,
  Producer,
  PushConsumer,
  SimpleConsumer,
} = require('rocketmq-client-nodejs');
const { FilterType, TransactionResolution } = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');

const MAX_RECEIVE_ERRORS = 5; // in a row: a server that refuses the request ends the run

function emit(event, fields = {}) {
  process.stdout.write(JSON.stringify({ event, t: Math.round(Date.now()) / 1000, ...fields }) + '\n');
}

function fail(message, code = 2) {
  emit('error', { message });
  process.stderr.write(`v5_node_driver: ${message}\n`);
  process.exit(code); // stdout is a pipe: its writes are synchronous, nothing is lost
}

function describe(e) {
  return `${(e && e.name) || typeof e}: ${(e && e.message) || e}`;
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

function messageFields(m) {
  const ms = d => (d ? d.getTime() : null);
  return {
    message_id: m.messageId,
    topic: m.topic,
    body: (m.body || Buffer.alloc(0)).toString('utf8'),
    attempt: m.deliveryAttempt ?? null,
    tag: m.tag ?? null,
    keys: [ ...(m.keys || []) ].sort(),
    message_group: m.messageGroup ?? null,
    delivery_timestamp: ms(m.deliveryTimestamp),
    born_timestamp: ms(m.bornTimestamp),
    properties: Object.fromEntries(m.properties || []),
    corrupted: Boolean(m.corrupted),
  };
}

const LOG_FILE = path.join(os.homedir(), 'logs', 'rocketmq', 'node-client.log');

function log(level) {
  return (...args) => fs.appendFileSync(LOG_FILE, `${new Date().toISOString()} ${level} ${format(...args)}\n`);
}

const LOGGER = { debug() {}, info: log('INFO'), warn: log('WARN'), error: log('ERROR') };

function clientOptions(args) {
  const options = {
    logger: LOGGER,
    endpoints: args.endpoint,
    namespace: args.namespace,
    requestTimeout: Math.round(args['request-timeout-s'] * 1000),
    sslEnabled: args.tls,
  };
  if (args.ak) options.sessionCredentials = { accessKey: args.ak, accessSecret: args.sk };
  return options;
}

function filterExpression(args) {
  if (args.sql !== undefined) return new FilterExpression(args.sql, FilterType.SQL);
  return new FilterExpression(args['tag-expr'], FilterType.TAG);
}

const SHUTDOWN_WAIT_MS = 3000;

async function shutdown(client) {
  // bounded: a PushConsumer's shutdown waits for its long polls (up to the request timeout plus the
  // server's long polling timeout, 20-30 s); the events so far stand either way
  let timer;
  const late = new Promise(resolve => { timer = setTimeout(() => resolve('late'), SHUTDOWN_WAIT_MS); });
  try {
    if (await Promise.race([ client.shutdown(), late ]) === 'late') emit('shutdown_late', { waited_s: SHUTDOWN_WAIT_MS / 1000 });
  } catch (e) { // reported, not fatal
    emit('shutdown_error', { message: describe(e) });
  } finally {
    clearTimeout(timer);
  }
}

// -- produce --

function checker(answer) {
  const state = { calls: 0, waiters: [] };
  state.check = async message => {
    emit('checked', { answer, ...messageFields(message) });
    state.calls += 1;
    state.waiters.splice(0).forEach(wake => wake());
    return answer === 'commit' ? TransactionResolution.COMMIT : TransactionResolution.ROLLBACK;
  };
  return state;
}

async function produce(args) {
  const bodies = args.body.length ? args.body : Array.from({ length: args.count }, (_, i) => `${args['body-prefix']}${i}`);
  const check = args.transaction ? checker(args['check-answer']) : null;
  const producer = new Producer({ ...clientOptions(args), topic: args.topic, checker: check ? { check: check.check } : undefined });
  await producer.startup();
  try {
    for (const body of bodies) {
      const properties = new Map(args.property.map(kv => {
        const at = kv.indexOf('=');
        return at < 0 ? [ kv, '' ] : [ kv.slice(0, at), kv.slice(at + 1) ];
      }));
      const msg = { topic: args.topic, body: Buffer.from(body) };
      if (args.tag) msg.tag = args.tag;
      if (args.keys.length) msg.keys = args.keys;
      if (properties.size) msg.properties = properties;
      if (args['message-group']) msg.messageGroup = args['message-group'];
      if (args['delay-s'] !== undefined) msg.deliveryTimestamp = new Date(Date.now() + args['delay-s'] * 1000);
      const tx = args.transaction ? producer.beginTransaction() : undefined;
      let receipt;
      try {
        receipt = await producer.send(msg, tx);
      } catch (e) {
        fail(`send of ${JSON.stringify(body)} to ${args.topic} failed: ${describe(e)}`);
      }
      emit('sent', {
        message_id: receipt.messageId, transaction_id: receipt.transactionId || null, body,
        tag: args.tag ?? null, keys: [ ...args.keys ].sort(), message_group: args['message-group'] ?? null,
        delivery_timestamp: msg.deliveryTimestamp ? msg.deliveryTimestamp.getTime() : null,
        offset: receipt.offset ?? null,
      });
      if (tx && (args.transaction === 'commit' || args.transaction === 'rollback')) {
        try {
          await (args.transaction === 'commit' ? tx.commit() : tx.rollback());
        } catch (e) {
          fail(`${args.transaction} of ${receipt.messageId} failed: ${describe(e)}`);
        }
        emit(args.transaction === 'commit' ? 'committed' : 'rolled_back', { message_id: receipt.messageId });
      }
      if (args['interval-s']) await sleep(args['interval-s'] * 1000);
    }
    if (check && args.transaction === 'unknown') {
      const want = args['await-checks'] ?? bodies.length;
      const deadline = Date.now() + args['check-wait-s'] * 1000;
      while (check.calls < want && Date.now() < deadline) {
        await Promise.race([ new Promise(wake => check.waiters.push(wake)), sleep(deadline - Date.now()) ]);
      }
      if (check.calls < want) fail(`${check.calls} check-backs of ${want} within ${args['check-wait-s']}s`);
      await sleep(args['linger-s'] * 1000); // the EndTransaction of the last answer goes out after check()
    }
    emit('done', { sent: bodies.length, checks: check ? check.calls : 0 });
  } finally {
    await shutdown(producer);
  }
}

// -- simple-consume --

async function simpleConsume(args) {
  const consumer = new SimpleConsumer({
    ...clientOptions(args),
    consumerGroup: args.group,
    subscriptions: new Map([[ args.topic, filterExpression(args) ]]),
    awaitDuration: args['await-s'] * 1000,
  });
  await consumer.startup();
  let received = 0;
  let acked = 0;
  let errors = 0;
  const seen = new Set();
  try {
    const deadline = Date.now() + args['max-s'] * 1000;
    let lingerEnd = null;
    while (Date.now() < (lingerEnd ?? deadline)) {
      if (lingerEnd === null && received >= args.count) {
        lingerEnd = Date.now() + args['linger-s'] * 1000;
        continue;
      }
      let messages;
      try {
        messages = await consumer.receive(args.batch, args['invisible-s'] * 1000);
        errors = 0;
      } catch (e) {
        errors += 1;
        emit('receive_error', { message: describe(e) });
        if (errors >= MAX_RECEIVE_ERRORS) fail(`${errors} receive errors in a row, the last: ${describe(e)}`);
        await sleep(500);
        continue;
      }
      for (const m of messages || []) {
        received += 1;
        emit('received', { group: args.group, ...messageFields(m) });
        const attempt = m.deliveryAttempt || 0;
        if (args.ack && attempt >= args['ack-from-attempt']) {
          try {
            await consumer.ack(m);
            acked += 1;
            emit('acked', { message_id: m.messageId, attempt });
          } catch (e) {
            emit('ack_error', { message_id: m.messageId, message: describe(e) });
          }
        } else if (args['change-invisible-s'] !== undefined && !seen.has(m.messageId)) {
          try {
            await consumer.changeInvisibleDuration(m, args['change-invisible-s'] * 1000);
            emit('changed', { message_id: m.messageId, invisible_s: args['change-invisible-s'] });
          } catch (e) {
            emit('change_error', { message_id: m.messageId, message: describe(e) });
          }
        }
        seen.add(m.messageId);
      }
    }
    if (received < args.count && !args['allow-fewer']) fail(`received ${received} of ${args.count} messages within ${args['max-s']}s`);
    emit('done', { received, acked });
  } finally {
    await shutdown(consumer);
  }
}

// -- push-consume --

async function pushConsume(args) {
  const state = { calls: 0, successes: 0, waiters: [] };
  const listener = {
    async consume(message) {
      emit('consuming', { group: args.group, message_id: message.messageId, attempt: message.deliveryAttempt ?? null });
      if (args['consume-s']) await sleep(args['consume-s'] * 1000); // a slow listener
      state.calls += 1;
      const ok = state.calls > args['fail-first'];
      if (ok) state.successes += 1;
      emit('consumed', { group: args.group, result: ok ? 'SUCCESS' : 'FAILURE', ...messageFields(message) });
      state.waiters.splice(0).forEach(wake => wake());
      return ok ? ConsumeResult.SUCCESS : ConsumeResult.FAILURE;
    },
  };
  const consumer = new PushConsumer({
    ...clientOptions(args),
    consumerGroup: args.group,
    subscriptions: new Map([[ args.topic, filterExpression(args) ]]),
    messageListener: listener,
  });
  await consumer.startup();
  try {
    const deadline = Date.now() + args['max-s'] * 1000;
    while (state.successes < args.count && Date.now() < deadline) {
      await Promise.race([ new Promise(wake => state.waiters.push(wake)), sleep(deadline - Date.now()) ]);
    }
    await sleep(args['linger-s'] * 1000); // more calls (duplicates, redeliveries) are reported too
    if (state.successes < args.count && !args['allow-fewer']) {
      fail(`${state.successes} successful consumptions of ${args.count} within ${args['max-s']}s`);
    }
    emit('done', { calls: state.calls, successes: state.successes });
  } finally {
    await shutdown(consumer);
  }
}

// -- the command line --

const COMMON = {
  endpoint: { type: 'string' },
  topic: { type: 'string' },
  ak: { type: 'string', default: '' },
  sk: { type: 'string', default: '' },
  namespace: { type: 'string', default: '' },
  'request-timeout-s': { type: 'string', default: '3' },
  'timeout-s': { type: 'string', default: '120' },
  'linger-s': { type: 'string', default: '0' },
  tls: { type: 'boolean', default: false },
};
const FILTER = { 'tag-expr': { type: 'string', default: '*' }, sql: { type: 'string' } };
const OPTIONS = {
  produce: {
    ...COMMON,
    count: { type: 'string', default: '1' },
    'body-prefix': { type: 'string', default: 'm' },
    body: { type: 'string', multiple: true, default: [] },
    tag: { type: 'string' },
    keys: { type: 'string', multiple: true, default: [] },
    property: { type: 'string', multiple: true, default: [] },
    'message-group': { type: 'string' },
    'delay-s': { type: 'string' },
    transaction: { type: 'string' },
    'check-answer': { type: 'string', default: 'commit' },
    'await-checks': { type: 'string' },
    'check-wait-s': { type: 'string', default: '60' },
    'interval-s': { type: 'string', default: '0' },
  },
  'simple-consume': {
    ...COMMON, ...FILTER,
    group: { type: 'string' },
    count: { type: 'string', default: '1' },
    'invisible-s': { type: 'string', default: '20' },
    'await-s': { type: 'string', default: '5' },
    batch: { type: 'string', default: '16' },
    'no-ack': { type: 'boolean', default: false },
    'ack-from-attempt': { type: 'string', default: '1' },
    'change-invisible-s': { type: 'string' },
    'max-s': { type: 'string', default: '60' },
    'allow-fewer': { type: 'boolean', default: false },
  },
  'push-consume': {
    ...COMMON, ...FILTER,
    group: { type: 'string' },
    count: { type: 'string', default: '1' },
    'fail-first': { type: 'string', default: '0' },
    'consume-s': { type: 'string', default: '0' },
    'max-s': { type: 'string', default: '60' },
    'allow-fewer': { type: 'boolean', default: false },
  },
};
const BOOLEANS = new Set([ 'tls', 'no-ack', 'allow-fewer' ]);
const LISTS = new Set([ 'body', 'keys', 'property' ]);
const CHOICES = { transaction: [ 'commit', 'rollback', 'unknown' ], 'check-answer': [ 'commit', 'rollback' ] };

function parse(argv) {
  const [ command, ...rest ] = argv;
  const options = OPTIONS[command];
  if (!options) throw new Error(`a subcommand first: ${Object.keys(OPTIONS).join(', ')}`);
  const { values } = parseArgs({ args: rest, options, strict: true });
  const args = { command };
  for (const [ name, value ] of Object.entries(values)) {
    if (BOOLEANS.has(name) || LISTS.has(name) || value === undefined || name in CHOICES
        || [ 'endpoint', 'topic', 'ak', 'sk', 'namespace', 'group', 'tag', 'message-group', 'tag-expr', 'sql', 'body-prefix' ].includes(name)) {
      args[name] = value;
    } else {
      const n = Number(value);
      if (!Number.isFinite(n)) throw new Error(`--${name} takes a number, not ${JSON.stringify(value)}`);
      args[name] = n;
    }
  }
  for (const name of [ 'endpoint', 'topic', ...(command === 'produce' ? [] : [ 'group' ]) ]) {
    if (!args[name]) throw new Error(`--${name} is required`);
  }
  for (const [ name, allowed ] of Object.entries(CHOICES)) {
    if (args[name] !== undefined && !allowed.includes(args[name])) throw new Error(`--${name}: one of ${allowed.join(', ')}`);
  }
  if (args.sql !== undefined && values['tag-expr'] !== '*') throw new Error('--sql and --tag-expr exclude each other');
  args.ack = !args['no-ack'];
  return args;
}

async function main() {
  fs.mkdirSync(path.dirname(LOG_FILE), { recursive: true });
  let args;
  try {
    args = parse(process.argv.slice(2));
  } catch (e) {
    fail(`bad arguments: ${e.message}`);
  }
  setTimeout(() => fail(`timed out after ${args['timeout-s']}s (${args.command})`, 3), args['timeout-s'] * 1000);
  const run = { produce, 'simple-consume': simpleConsume, 'push-consume': pushConsume }[args.command];
  try {
    await run(args);
  } catch (e) {
    fail(`${args.command}: ${describe(e)}`);
  }
  process.exit(0); // the client's timers (route updates, heartbeats) need not be waited for
}

main();
