// The `relay` command given bad arguments or a bad environment, run as the real CLI process:
// a clear message on stderr, never a stack trace, and the exit code scripts rely on
// (2 usage, 78 configuration, 1 refused or failed).
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openStores } from '../apps/runtime.ts';
import { workspacesOf } from '../apps/services/management/workspaces.ts';
import { loadConfig } from '../infra/config.ts';

const MAIN = fileURLToPath(new URL('../apps/cli/main.ts', import.meta.url));
const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');
const PASSWORD = 'a long enough password';

interface Run { args: string[]; code: number | null; stdout: string; stderr: string }

function relay(args: string[], env: Record<string, string> = {}): Promise<Run> {
  // Only what the test says: no RELAY_*, PORT or HOST from the shell that runs the tests.
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('RELAY_') && !['PORT', 'HOST', 'NODE_ENV'].includes(k)));
  const child = spawn(process.execPath, [MAIN, ...args], { env: { ...base, RELAY_LOG_LEVEL: 'silent', RELAY_INBOUND_SMTP_PORT: '0', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  return new Promise((resolve) => child.on('close', (code) => resolve({ args, code, stdout, stderr })));
}

/** Runs at most `width` commands at a time, in order. */
async function all<T, R>(items: T[], work: (item: T) => Promise<R>, width = 6): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await work(items[i]);
    }
  }));
  return results;
}

const where = (run: Run) => `relay ${run.args.join(' ')} → exit ${run.code}\nstdout: ${run.stdout}\nstderr: ${run.stderr}`;

function assertNoStack(run: Run): void {
  const both = run.stdout + run.stderr;
  assert.not.match(both, /\n\s+at \S/, `stack trace in ${where(run)}`);
  assert.not.match(both, /node:internal|file:\/\//, `stack trace in ${where(run)}`);
  assert.not.ok(both.includes(REPO_ROOT), `source path in ${where(run)}`);
}

interface Ctx { dataDir: string }
const cli = suite<Ctx>('relay CLI: bad arguments and environments');

cli.before.each((ctx) => {
  ctx.dataDir = mkdtempSync(join(tmpdir(), 'relay-cli-args-'));
});
cli.after.each((ctx) => {
  rmSync(ctx.dataDir, { recursive: true, force: true });
});

cli('relay --help, -h and help print the usage on stdout and exit 0', async () => {
  for (const run of await all([['--help'], ['-h'], ['help']], (args) => relay(args))) {
    assert.is(run.code, 0, where(run));
    assert.match(run.stdout, /^usage: relay <command>/, where(run));
    assert.match(run.stdout, /\bsetup\b[\s\S]*\bstart\b[\s\S]*\bevents\b/, 'every command is listed');
  }
});

cli('every command given --help or -h, wherever it stands, prints its own usage on stdout and exits 0', async ({ dataDir }) => {
  // The commands as `relay --help` lists them, so that a new command is covered too.
  const listing = (await relay(['--help'])).stdout;
  const names = [...listing.matchAll(/^ {2}(\S+) {2,}/gm)].map((m) => m[1]);
  assert.ok(names.length >= 15 && names.includes('events') && names.includes('setup'), listing);
  // Help runs nothing: the data directory is never created.
  const env = { RELAY_DATA_DIR: join(dataDir, 'never-created') };
  const asks = [
    ...names.flatMap((name) => [[name, '--help'], [name, '-h']]),
    ...names.map((name) => ['help', name]),
    ['events', '--stream', 'em_x', '--help'], ['projections', 'rebuild', 'emails', '-h'], ['processor', 'projector', '--help'],
    ['user', 'create', '--email', 'a@b.test', '--help'], ['outbox', 'show', 'em_x', '-h'], ['parked', 'list', '--json', '--help'],
  ];
  const runs = await all(asks, (args) => relay(args, env));
  runs.forEach((run) => {
    const name = run.args[0] === 'help' ? run.args[1] : run.args[0];
    assert.is(run.code, 0, where(run));
    assert.match(run.stdout, new RegExp(`^usage: relay ${name}\\b`), where(run));
    assert.is(run.stderr, '', where(run));
  });
  assert.not.ok(existsSync(env.RELAY_DATA_DIR), 'no command ran');
  // After `--`, `--help` is an argument like any other.
  const literal = await relay(['events', '--', '--help'], env);
  assert.is(literal.code, 2, where(literal));
  assert.match(literal.stderr, /unexpected argument "--help"/, where(literal));
  const unknown = await relay(['help', 'bogus'], env);
  assert.is(unknown.code, 2, where(unknown));
  assert.match(unknown.stderr, /unknown command "bogus"/, where(unknown));
});

cli('relay without a command, and an unknown command, exit 2 with the usage on stderr', async ({ dataDir }) => {
  for (const run of await all([[], ['bogus'], ['--version'], ['-x'], ['START']], (args) => relay(args, { RELAY_DATA_DIR: dataDir }))) {
    assert.is(run.code, 2, where(run));
    assert.is(run.stdout, '', where(run));
    assert.match(run.stderr, /usage: relay <command>/, where(run));
    if (run.args.length) assert.match(run.stderr, new RegExp(`unknown command "${run.args[0]}"`), where(run));
    assertNoStack(run);
  }
});

/** [arguments, what stderr must say]: each a usage mistake, so exit 2 before anything is opened. */
const USAGE_MISTAKES: Array<[string[], RegExp]> = [
  [['start', 'extra'], /usage: relay start/],
  [['api', '--port', '80'], /usage: relay api/],
  [['forwarder', 'x'], /usage: relay forwarder/],
  [['retention', 'x'], /usage: relay retention/],
  [['inbound', 'x'], /usage: relay inbound/],
  [['outbox'], /usage: relay outbox list/],
  [['outbox', 'show'], /usage: relay outbox list/],
  [['outbox', 'show', '../etc/passwd'], /usage: relay outbox list/],
  [['outbox', 'list', '--limit', 'zero'], /usage: relay outbox list/],
  [['webhooks'], /usage: relay webhooks list <projectId>/],
  [['webhooks', 'list'], /usage: relay webhooks list <projectId>/],
  [['webhooks', 'list', 'prj/../x'], /usage: relay webhooks list <projectId>/],
  [['webhooks', 'list', 'prj_1', '--bogus'], /usage: relay webhooks list <projectId>/],
  [['processor'], /usage: relay processor <projector\|deliverability\|sender\|suppressor\|webhooks>/],
  [['processor', 'nope'], /usage: relay processor <projector\|deliverability\|sender\|suppressor\|webhooks>/],
  [['processor', 'projector', 'extra'], /usage: relay processor/],
  [['projections'], /usage: relay projections rebuild/],
  [['projections', 'rebuild'], /usage: relay projections rebuild/],
  [['projections', 'rebuild', 'nope'], /usage: relay projections rebuild/],
  [['projections', 'rebuild', 'emails', '--bogus'], /Unknown option '--bogus'[\s\S]*usage: relay projections/],
  [['projections', 'rebuild', 'emails', '--into'], /--into <value>' argument missing/],
  [['projections', 'rebuild', 'emails', '--into', 'Bad Name!'], /--into must be 1 to 64 lower-case letters/],
  [['projections', 'rebuild', 'emails', '--into', 'api_keys'], /--into api_keys is one of Relay's own collections/],
  [['projections', 'rebuild', 'emails', '--into', 'emails'], /--into emails is one of Relay's own collections/],
  [['events', 'extra'], /unexpected argument "extra"[\s\S]*usage: relay events/],
  [['events', '--bogus'], /Unknown option '--bogus'/],
  [['events', '--stream'], /--stream <value>' argument missing/],
  [['events', '--stream', ''], /--stream needs a stream id/],
  [['events', '--limit', 'abc'], /--limit must be a whole number/],
  [['events', '--limit', '0'], /--limit must be a whole number/],
  [['events', '--limit', '1.5'], /--limit must be a whole number/],
  [['events', '--limit', '1e400'], /--limit must be a whole number/],
  [['events', '--stream', 'x', '--from', 'abc'], /--from must be a stream revision/],
  [['events', '--stream', 'x', '--from=-1'], /--from must be a stream revision/],
  [['events', '--from', '3'], /--from goes with --stream/],
  [['events', '--stream', 'x', '--follow'], /--stream reads one stream/],
  [['events', '--after', '-5'], /--after' argument is ambiguous/],
  [['user'], /expected: user create[\s\S]*usage: relay user create/],
  [['user', 'delete', '--email', 'a@b.test'], /expected: user create/],
  [['user', 'create'], /--email is required/],
  [['user', 'create', '--email'], /--email <value>' argument missing/],
  [['user', 'create', '--email', 'a@b.test', '--bogus'], /Unknown option '--bogus'/],
  [['workspace'], /expected: workspace activate\|deactivate/],
  [['workspace', 'frobnicate', 'ws_x'], /expected: workspace activate\|deactivate/],
  [['workspace', 'activate'], /expected: workspace activate\|deactivate/],
  [['workspace', 'activate', 'a', 'b'], /expected: workspace activate\|deactivate/],
  [['domain'], /expected: domain verify\|mark-verified/],
  [['domain', 'verify'], /expected: domain verify\|mark-verified/],
  [['domain', 'verify', '--json'], /expected: domain verify\|mark-verified/],
  [['domain', 'nuke', 'dom_x'], /unknown action "nuke"/],
  [['domain', 'mark-verified', 'dom_x'], /--reason is required/],
  [['domain', 'mark-verified', 'dom_x', '--reason', '  '], /--reason is required/],
  [['setup', 'extra'], /unexpected argument "extra"[\s\S]*usage: relay setup/],
  [['setup', '--environment', 'staging'], /--environment must be development or production/],
  [['setup', '--email'], /--email <value>' argument missing/],
  [['setup', '--trust-domain=yes'], /--trust-domain' does not take an argument/],
];

cli('every command given bad arguments says what is wrong on stderr and exits 2', async ({ dataDir }) => {
  const runs = await all(USAGE_MISTAKES, ([args]) => relay(args, { RELAY_DATA_DIR: dataDir }));
  runs.forEach((run, i) => {
    assert.is(run.code, 2, where(run));
    assert.match(run.stderr, USAGE_MISTAKES[i][1], where(run));
    assert.is(run.stdout, '', where(run));
    assertNoStack(run);
  });
});

/** Makes the data directory's stores, as any Relay process does at its first start. */
async function makeStores(dataDir: string): Promise<void> {
  await (await openStores(loadConfig({ RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'silent' }))).close();
}

cli('events --after with a position the store never handed out is a usage error, not a crash', async ({ dataDir }) => {
  await makeStores(dataDir);
  const run = await relay(['events', '--after', 'junk'], { RELAY_DATA_DIR: dataDir });
  assert.is(run.code, 2, where(run));
  assert.match(run.stderr, /"junk" is not a position/, where(run));
  assertNoStack(run);
  const fine = await relay(['events', '--limit', '2'], { RELAY_DATA_DIR: dataDir });
  assert.is(fine.code, 0, where(fine));
});

cli('events --stream that finds nothing says so on stderr and names the stream to ask for', async ({ dataDir }) => {
  const env = { RELAY_DATA_DIR: dataDir };
  const stores = await openStores(loadConfig({ RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'silent' }));
  try {
    await stores.events.append('email-em_known', [{ id: randomUUID(), type: 'Probe', data: {} }], { expectedRevision: 'no_stream' });
  } finally {
    await stores.close();
  }
  const found = await relay(['events', '--stream', 'em_known'], env);
  assert.is(found.code, 0, where(found));
  assert.is(JSON.parse(found.stdout).streamId, 'email-em_known', where(found));
  const cases: Array<[string[], number, RegExp]> = [
    [['events', '--stream', 'em_nope'], 1, /^relay: no email em_nope here: its stream email-em_nope has no events\n$/],
    [['events', '--stream', 'ws_abc'], 1, /a workspace's streams are usage-ws_abc-<YYYY-MM> \(usage\) and suppressions-ws_abc: relay events --prefix usage-ws_abc-\n$/],
    [['events', '--stream', 'prj_abc'], 1, /prj_abc is not a stream: .*email-<emailId> \(or just the email id\), usage-<workspaceId>-<YYYY-MM> and suppressions-<workspaceId>/],
    [['events', '--stream', 'emails-em_known'], 1, /stream "emails-em_known" has no events; streams are email-<emailId>/],
    [['events', '--stream', 'em_known', '--from', '5'], 0, /^\(stream email-em_known has no events from revision 5\)\n$/],
  ];
  for (const [args, code, message] of cases) {
    const run = await relay(args, env);
    assert.is(run.code, code, where(run));
    assert.is(run.stdout, '', where(run));
    assert.match(run.stderr, message, where(run));
    assertNoStack(run);
  }
});

/** [environment, variable the message must name]: each stops the process before it starts. */
const BAD_ENVIRONMENTS: Array<[Record<string, string>, string]> = [
  [{ PORT: 'abc' }, 'PORT'],
  [{ PORT: '99999' }, 'PORT'],
  [{ PORT: '-1' }, 'PORT'],
  [{ PORT: '80.5' }, 'PORT'],
  [{ RELAY_ENV: 'staging' }, 'RELAY_ENV'],
  [{ RELAY_ENV: 'prod' }, 'RELAY_ENV'],
  [{ NODE_ENV: 'staging' }, 'NODE_ENV'],
  [{ RELAY_LOG_LEVEL: 'loud' }, 'RELAY_LOG_LEVEL'],
  [{ RELAY_DASHBOARD_ORIGIN: 'not a url' }, 'RELAY_DASHBOARD_ORIGIN'],
  [{ RELAY_MONGODB_URL: 'http://x' }, 'RELAY_MONGODB_URL'],
  // The smarthost is Relay's own feedback SMTP server.
  [{ RELAY_SMTP_URL: 'smtp://127.0.0.1:2525?tls=none', RELAY_INBOUND_SMTP_PORT: '2525' }, 'RELAY_SMTP_URL'],
];

cli('relay start (and api, setup) with an invalid PORT, RELAY_ENV or other variable exits 78 naming it', async ({ dataDir }) => {
  const cases = [
    ...BAD_ENVIRONMENTS.map(([env, variable]) => ({ args: ['start'], env, variable })),
    ...[['api'], ['forwarder'], ['processor', 'projector'], ['setup', '--json'], ['user', 'create', '--email', 'a@b.test']].map((args) => ({ args, env: { PORT: 'abc' }, variable: 'PORT' })),
  ];
  const runs = await all(cases, ({ args, env }) => relay(args, { RELAY_DATA_DIR: dataDir, ...env }));
  runs.forEach((run, i) => {
    assert.is(run.code, 78, where(run));
    assert.match(run.stderr, new RegExp(`^relay: invalid configuration: ${cases[i].variable}: `), where(run));
    assert.is(run.stdout, '', where(run));
    assertNoStack(run);
  });
});

cli('relay start on a port that is taken exits 1 naming PORT, without a stack trace', async ({ dataDir }) => {
  const taken: Server = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  try {
    const port = (taken.address() as { port: number }).port;
    const run = await relay(['start'], { RELAY_DATA_DIR: dataDir, PORT: String(port) });
    assert.is(run.code, 1, where(run));
    assert.match(run.stderr, new RegExp(`^relay: the HTTP server cannot listen on 127\\.0\\.0\\.1:${port}: the port is already in use \\(EADDRINUSE\\); set PORT to a free port\\n$`), where(run));
    assertNoStack(run);
  } finally {
    await new Promise((resolve) => taken.close(resolve));
  }
});

cli('a failure nobody anticipated is one line without a stack; RELAY_LOG_LEVEL=debug shows the stack', async ({ dataDir }) => {
  // The embedded stores' file is a directory: sqlite cannot open it. (A data directory that is
  // itself a file, or below one, is a configuration error naming RELAY_DATA_DIR.)
  const blocked = join(dataDir, 'relay-db-is-a-directory');
  mkdirSync(join(blocked, 'relay.db'), { recursive: true });
  const run = await relay(['user', 'create', '--email', 'a@b.test', '--password', PASSWORD], { RELAY_DATA_DIR: blocked });
  assert.is(run.code, 1, where(run));
  assert.match(run.stderr, /^relay: EISDIR: illegal operation on a directory/, where(run));
  assertNoStack(run);
  const debug = await relay(['user', 'create', '--email', 'a@b.test', '--password', PASSWORD], { RELAY_DATA_DIR: blocked, RELAY_LOG_LEVEL: 'debug' });
  assert.is(debug.code, 1, where(debug));
  assert.match(debug.stderr, /\n\s+at /, 'the stack, when asked for');
});

cli('refused operator tasks exit 1 with the error code and message', async ({ dataDir }) => {
  const env = { RELAY_DATA_DIR: dataDir };
  const cases: Array<[string[], RegExp]> = [
    [['user', 'create', '--email', 'not-an-address', '--password', PASSWORD], /validation_error: email "not-an-address" is not an email address/],
    [['user', 'create', '--email', 'a\u0001b@x.test', '--password', PASSWORD], /validation_error: email "a\\u0001b@x\.test" is not an email address/],
    [['user', 'create', '--email', 'a@b.test', '--password', 'short'], /validation_error: password must be at least 12 characters/],
    [['user', 'create', '--email', 'a@b.test'], /validation_error: password must be at least 12 characters/], // empty stdin
    [['workspace', 'activate', 'ws_nope'], /not_found: workspace ws_nope not found/],
    [['domain', 'verify', 'dom_nope'], /not_found: domain dom_nope not found/],
    [['domain', 'mark-verified', 'dom_nope', '--reason', 'local'], /not_found: domain dom_nope not found/],
  ];
  for (const [args, message] of cases) {
    const run = await relay(args, env);
    assert.is(run.code, 1, where(run));
    assert.match(run.stderr, message, where(run));
    assertNoStack(run);
  }
});

cli('setup checks every flag before writing anything: a bad --domain, or one too long for its records, leaves no user behind', async ({ dataDir }) => {
  const env = { RELAY_DATA_DIR: dataDir };
  const setup = (extra: string[]) => relay(['setup', '--json', '--trust-domain', '--email', 'ops@acme.test', '--password', PASSWORD, ...extra], env);
  const refusals: Array<[string[], RegExp]> = [
    [['--domain', 'not a domain'], /validation_error: --domain "not a domain"/],
    [['--domain', '192.0.2.1'], /validation_error: --domain "192\.0\.2\.1" looks like an IP address/],
    // A DNS name whose record names (<selector>._domainkey.<domain>, 16-character selectors) would not be.
    [['--domain', `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(26)}.example`], /validation_error: --domain is 226 characters; a sending domain may have at most 225/],
    [['--workspace', '   '], /validation_error: --workspace must be 1 to 100 characters/],
    [['--project', 'p'.repeat(101)], /validation_error: --project must be 1 to 100 characters/],
    [['--workspace', 'Evil\u001b[2J'], /validation_error: --workspace must not contain control characters/],
  ];
  for (const [extra, message] of refusals) {
    const run = await setup(extra);
    assert.is(run.code, 1, where(run));
    assert.match(run.stderr, message, where(run));
    assert.not.match(run.stderr, /created/, `nothing is created: ${where(run)}`);
    assertNoStack(run);
  }
  // The user does not exist yet: creating it now succeeds.
  const user = await relay(['user', 'create', '--email', 'ops@acme.test', '--password', PASSWORD], env);
  assert.is(user.code, 0, where(user));
});

cli('projections rebuild --into refuses the collections Relay keeps data in, which the rebuild would drop', async ({ dataDir }) => {
  const env = { RELAY_DATA_DIR: dataDir };
  const created = await relay(['user', 'create', '--email', 'keep@acme.test', '--password', PASSWORD], env);
  assert.is(created.code, 0, where(created));
  for (const into of ['users', 'api_keys', 'sessions']) {
    const run = await relay(['projections', 'rebuild', 'emails', '--into', into], env);
    assert.is(run.code, 2, where(run));
  }
  // The user is still there (a second create is a conflict), and a scratch collection works.
  const again = await relay(['user', 'create', '--email', 'keep@acme.test', '--password', PASSWORD], env);
  assert.is(again.code, 1, where(again));
  assert.match(again.stderr, /conflict: a user with email keep@acme\.test already exists/);
  const scratch = await relay(['projections', 'rebuild', 'emails', '--into', 'emails_check', '--json'], env);
  assert.is(scratch.code, 0, where(scratch));
  assert.is(JSON.parse(scratch.stdout).collection, 'emails_check');
});

cli('names from the store reach the operator terminal with control characters escaped', async ({ dataDir }) => {
  // A workspace stored before names were checked (or written by another tool).
  const stores = await openStores(loadConfig({ RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'silent' }));
  try {
    await workspacesOf(stores.documents).insert({ _id: 'ws_legacy', name: 'Acme\u001b[2J\u001b]0;pwned\u0007', activated: false, activatedAt: null, createdAt: new Date().toISOString() });
  } finally {
    await stores.close();
  }
  const run = await relay(['workspace', 'activate', 'ws_legacy'], { RELAY_DATA_DIR: dataDir });
  assert.is(run.code, 0, where(run));
  assert.not.match(run.stderr, /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/, 'no raw control characters');
  assert.match(run.stderr, /workspace Acme\\x1b\[2J\\x1b\]0;pwned\\x07 \(ws_legacy\) is activated/);
});

// A URL variable may carry a password: an unparsable one (a "/" in the password, a bad port)
// is refused naming the variable and the expected form, never echoing the value.
for (const [variable, value] of [
  ['RELAY_SMTP_URL', 'smtp://relay:hunter2/Zq9@smtp.example.net:587'],
  ['RELAY_MONGODB_URL', 'mongodb://admin:hunter2/Zq9@db.internal:27017/relay'],
  ['RELAY_EVENTSTORE_URL', 'esdb://admin:hunter2/Zq9@esdb.internal:2113'],
  ['RELAY_SMTP_URL', 'http://relay:hunter2/Zq9x@smtp.example.net:587'],
] as const) {
  cli(`an invalid ${variable} (${value.split(':')[0]}) is refused with exit 78 without printing its password`, async ({ dataDir }) => {
    const run = await relay(['setup', '--json'], { RELAY_DATA_DIR: dataDir, [variable]: value });
    assert.is(run.code, 78, where(run));
    assert.match(run.stderr, new RegExp(`^relay: invalid configuration: ${variable}: `), where(run));
    assert.not.ok((run.stdout + run.stderr).includes('hunter2'), `the password reaches the terminal: ${where(run)}`);
    assertNoStack(run);
  });
}

// RELAY_KAFKA_BROKERS is checked like every variable: a port above 65535, or a list with no
// broker in it, is a configuration error naming it (exit 78), not a failure inside kafkajs.
cli('RELAY_KAFKA_BROKERS with a port above 65535 or no broker in it exits 78 naming the variable', async ({ dataDir }) => {
  for (const brokers of ['kafka.internal:99999', ',']) {
    const run = await relay(['parked', 'list'], { RELAY_DATA_DIR: dataDir, RELAY_KAFKA_BROKERS: brokers });
    assert.is(run.code, 78, where(run));
    assert.match(run.stderr, /^relay: invalid configuration: RELAY_KAFKA_BROKERS: /, where(run));
    assertNoStack(run);
  }
});

// `relay projections run MODULE`: a path that names no file is a one-line usage error (exit 2);
// a module that throws as it loads is named with its message (exit 1); neither shows Relay's paths.
cli('projections run: a missing module is a one-line usage error, a throwing one names the file', async ({ dataDir }) => {
  const missing = await relay(['projections', 'run', join(dataDir, 'no-such-projection.mjs')], { RELAY_DATA_DIR: dataDir });
  assert.is(missing.code, 2, where(missing));
  assert.is(missing.stderr.trim().split('\n').length, 1, where(missing));
  assert.match(missing.stderr, /no-such-projection\.mjs is not a file/, where(missing));
  assertNoStack(missing);
  const throwing = join(dataDir, 'throws.mjs');
  writeFileSync(throwing, "throw new Error('cannot start: no API token');\n");
  const failed = await relay(['projections', 'run', throwing], { RELAY_DATA_DIR: dataDir });
  assert.is(failed.code, 1, where(failed));
  assert.is(failed.stderr, `relay: ${throwing}: cannot start: no API token\n`, where(failed));
  assertNoStack(failed);
});

cli.run();
