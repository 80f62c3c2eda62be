// infra/compose without Docker (none runs here). First compose.yaml, the Dockerfile and
// .dockerignore are read as files and held to what makes the stack start and keep its data.
// Then the image's command runs the way its container runs it: as a non-root user, in a copy
// of the image's /app (what the Dockerfile COPYs, filtered by .dockerignore, and the
// installed node_modules) that the user may not write, with compose's environment and the
// three URLs on the loopback engines. It must start, answer /healthz and /readyz, and leave
// no file behind; and where it cannot run, say why in one line.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, cpSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, posix, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ALL_PARTS } from '../apps/relay.ts';
import { usesDataDir } from '../apps/runtime.ts';
import { loadConfig } from '../infra/config.ts';
import { copyOperands, dockerIgnores, interpolate, readDockerfile, readYaml, type YamlValue } from './support/compose-file.ts';
import { waitUntil } from './support/eventually.ts';
import { freePort } from './support/relay-process.ts';
import { skippableSuite } from './support/skippable-suite.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const COMPOSE_DIR = join(ROOT, 'infra/compose');
const compose = asMap(readYaml(readFileSync(join(COMPOSE_DIR, 'compose.yaml'), 'utf8')), 'compose.yaml');
const dockerfile = readDockerfile(readFileSync(join(COMPOSE_DIR, 'Dockerfile'), 'utf8'));
const dockerignore = readFileSync(join(ROOT, '.dockerignore'), 'utf8');
const services = asMap(compose.services, 'services');
/** Relay's own services: built from the Dockerfile; the others are the engines' images. */
const relayServices = Object.entries(services).filter(([, s]) => asMap(s, 'service').build !== undefined).map(([name, s]) => [name, asMap(s, name)] as const);
const engines = Object.entries(services).filter(([, s]) => asMap(s, 'service').build === undefined).map(([name, s]) => [name, asMap(s, name)] as const);
/** What an operator must give compose (its `${VAR:?…}`), as compose would read it from .env. */
const OPERATOR_ENV = { RELAY_SECRET_KEY: randomBytes(32).toString('base64'), RELAY_MAIL_HOST: 'mail.example.test' };

function asMap(value: YamlValue | undefined, what: string): Record<string, YamlValue> {
  if (value === null || value === undefined || typeof value !== 'object' || Array.isArray(value)) throw new Error(`${what} is not a mapping`);
  return value;
}

function strings(value: YamlValue | undefined, what: string): string[] {
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) throw new Error(`${what} is not a list of strings`);
  return value as string[];
}

/** A service's environment after compose's interpolation. */
function environmentOf(service: Record<string, YamlValue>, env: Record<string, string | undefined> = OPERATOR_ENV): Record<string, string> {
  return Object.fromEntries(Object.entries(asMap(service.environment, 'environment')).map(([k, v]) => [k, interpolate(v === null ? '' : String(v), env)]));
}

function instruction(keyword: string): string[] {
  return dockerfile.filter((i) => i.keyword === keyword).map((i) => i.args);
}

const CMD = JSON.parse(instruction('CMD').at(-1) ?? 'null') as string[];
const WORKDIR = instruction('WORKDIR').at(-1) ?? '/';

/** Named volumes a service mounts: [volume, path in the container]. */
function namedVolumes(service: Record<string, YamlValue>): Array<[string, string]> {
  return strings(service.volumes ?? [], 'volumes').map((v) => v.split(':')).filter(([source]) => !/^[./~]/.test(source)).map(([source, target]) => [source, target]);
}

/** A version tag (1.2.3, optionally with a suffix), or a digest. */
function pinned(image: string): boolean {
  const match = /^([^\s@]+?)(?::([\w][\w.-]*))?(@sha256:[0-9a-f]{64})?$/.exec(image);
  return match !== null && (match[3] !== undefined || (match[2] !== undefined && /^\d+\.\d+\.\d+([.-]|$)/.test(match[2])));
}

const files = suite('compose: compose.yaml, Dockerfile and .dockerignore');

files('every part of Relay has its service, built from the Dockerfile, on the three URLs', () => {
  assert.ok(Array.isArray(CMD) && CMD.length >= 2, 'the Dockerfile has a CMD in exec form');
  const parts: string[] = [];
  for (const [name, service] of relayServices) {
    const build = asMap(service.build, `${name}.build`);
    assert.is(resolve(COMPOSE_DIR, String(build.context)), resolve(ROOT), `${name} builds from the repository root`);
    assert.is(build.dockerfile, 'infra/compose/Dockerfile', name);
    assert.is(service.user, undefined, `${name} keeps the image's user`);
    const command = strings(service.command, `${name}.command`);
    assert.equal(command.slice(0, 2), CMD.slice(0, 2), `${name} runs the image's program`);
    const args = command.slice(2);
    parts.push(args[0] === 'processor' ? args[1] : args[0]);

    const env = environmentOf(service);
    const config = loadConfig(env);
    assert.ok(config.eventStoreUrl && config.kafkaBrokers && config.mongodbUrl, `${name} has the three URLs`);
    assert.not.ok(usesDataDir(config), `${name} needs no data directory`);
    assert.ok(config.secretKey, `${name} has RELAY_SECRET_KEY`);
    assert.is(config.mailHost, OPERATOR_ENV.RELAY_MAIL_HOST, `${name} has RELAY_MAIL_HOST`);
    const hosts = [new URL(config.eventStoreUrl!).hostname, ...config.kafkaBrokers!.map((b) => b.replace(/:\d+$/, '')), new URL(config.mongodbUrl!).hostname];
    const dependsOn = asMap(service.depends_on, `${name}.depends_on`);
    for (const host of hosts) {
      assert.ok(host in services, `${name}: ${host} is a service of the file`);
      assert.is(asMap(dependsOn[host], `${name}.depends_on.${host}`).condition, 'service_healthy', `${name} waits for ${host}`);
    }
    const check = strings(asMap(service.healthcheck, `${name}.healthcheck`).test, 'test').join(' ');
    assert.ok(check.includes(`:${config.port}/readyz`), `${name}'s healthcheck asks its own /readyz`);
  }
  assert.equal([...parts].sort(), [...ALL_PARTS].sort(), 'one service per part');
});

files('compose refuses to run without RELAY_SECRET_KEY or RELAY_MAIL_HOST', () => {
  const [, api] = relayServices.find(([name]) => name === 'api')!;
  for (const missing of Object.keys(OPERATOR_ENV)) {
    const env = { ...OPERATOR_ENV, [missing]: undefined };
    assert.throws(() => environmentOf(api, env), new RegExp(`^${missing}: set ${missing}`));
  }
});

files('Relay runs as a non-root user; every image is pinned to a version', () => {
  const user = instruction('USER').at(-1);
  assert.ok(user, 'the Dockerfile names a USER');
  assert.not.ok(/^(root|0)(:|$)/.test(user!), `USER ${user} is not root`);
  const last = (keyword: string) => dockerfile.findLastIndex((i) => i.keyword === keyword);
  assert.ok(last('USER') > Math.max(last('RUN'), last('COPY')), 'USER comes after the last RUN and COPY');
  for (const from of instruction('FROM')) assert.ok(pinned(from.split(/\s+/)[0]), `FROM ${from}`);
  for (const [name, service] of engines) assert.ok(typeof service.image === 'string' && pinned(service.image), `${name}: ${String(service.image)}`);
  assert.not.ok(/:latest\b/.test(readFileSync(join(COMPOSE_DIR, 'compose.yaml'), 'utf8')), 'no :latest');
});

files('the engines keep their data in declared volumes; Kafka its log dirs, under a fixed cluster id', () => {
  const declared = Object.keys(asMap(compose.volumes, 'volumes'));
  const used = new Set<string>();
  for (const [name, service] of [...engines, ...relayServices]) {
    for (const [volume] of namedVolumes(service)) {
      assert.ok(declared.includes(volume), `${name}: volume ${volume} is declared`);
      used.add(volume);
    }
  }
  assert.equal([...used].sort(), [...declared].sort(), 'every declared volume is used');
  for (const [name, service] of engines) assert.ok(namedVolumes(service).length > 0, `${name} has a volume`);
  for (const [name, service] of relayServices) assert.is(namedVolumes(service).length, 0, `${name} needs no volume`);

  const kafka = asMap(services.kafka, 'kafka');
  const env = environmentOf(kafka);
  const mounts = namedVolumes(kafka).map(([, target]) => target);
  const logDirs = (env.KAFKA_LOG_DIRS ?? '').split(',').filter(Boolean);
  assert.ok(logDirs.length > 0, 'KAFKA_LOG_DIRS is set (the image defaults to /tmp)');
  for (const dir of logDirs) assert.ok(mounts.some((m) => dir === m || dir.startsWith(`${m}/`)), `${dir} is in a volume (${mounts.join(', ')})`);
  assert.match(env.CLUSTER_ID ?? '', /^[A-Za-z0-9_-]{22}$/, 'a fixed CLUSTER_ID (base64url of 16 bytes)');
});

files('the MongoDB healthcheck initiates the replica set and passes only with a writable primary', () => {
  const mongodb = asMap(services.mongodb, 'mongodb');
  const command = strings(mongodb.command, 'mongodb.command');
  const replSet = command[command.indexOf('--replSet') + 1];
  assert.ok(command.includes('--replSet') && replSet, 'mongod runs as a replica set');
  const test = strings(asMap(mongodb.healthcheck, 'mongodb.healthcheck').test, 'test');
  const script = test[test.indexOf('--eval') + 1] ?? test.at(-1)!;
  const relayUrl = new URL(environmentOf(relayServices[0][1]).RELAY_MONGODB_URL);
  assert.match(script, new RegExp(`rs\\.initiate\\(\\{\\s*_id:\\s*'${replSet}'.*host:\\s*'${relayUrl.hostname}:${relayUrl.port || '27017'}'`), 'initiates the set Relay reaches');
  // The exit status is the primary check, not rs.status().ok (which an initiated set with no
  // primary yet also answers).
  assert.match(script, /quit\((db\.hello\(\)\.isWritablePrimary|rs\.status\(\)\.myState === 1) \? 0 : 1\)/);
});

files('.dockerignore keeps data, secrets and installed packages out, and lets in what the image copies', () => {
  for (const path of ['node_modules', 'apps/node_modules', '.git', 'data', 'data/secret.key', 'data/outbox/em_1.eml', 'setup.json', 'sent.json', 'infra/compose/.env', 'test', '.cache', 'relay.log']) {
    assert.ok(dockerIgnores(dockerignore, path), `${path} is ignored`);
  }
  for (const copy of dockerfile.filter((i) => i.keyword === 'COPY')) {
    for (const source of copyOperands(copy).sources) assert.not.ok(dockerIgnores(dockerignore, posix.normalize(source)), `${source} reaches the image`);
  }
  assert.not.ok(dockerIgnores(dockerignore, 'apps/cli/main.ts'));
});

files.run();

// ---- The image's command, run as its container runs it ------------------------------------

const NOBODY = ['--reuid=65534', '--regid=65534', '--clear-groups'];

/** The installed packages (the image's `RUN npm ci`) and the node that runs them. */
interface Install { nodeModules: string; node: string }

const CHECKOUT_INSTALL: Install = { nodeModules: join(ROOT, 'node_modules'), node: process.execPath };

/** How to run as a non-root user here, with an install that user can read, or why it cannot be done. */
function nonRootUser(): { prefix: string[]; install: Install; reason?: string } {
  if (process.getuid?.() !== 0) return { prefix: [], install: CHECKOUT_INSTALL }; // already not root
  const probe = spawnSync('setpriv', ['--version']);
  if (probe.error) return { prefix: [], install: CHECKOUT_INSTALL, reason: 'running as root without setpriv (util-linux) to become another user' };
  let failure = canRead(CHECKOUT_INSTALL);
  if (failure === null) return { prefix: ['setpriv', ...NOBODY], install: CHECKOUT_INSTALL };
  // A checkout under a directory others cannot enter (mktemp -d makes it 0700): the same files,
  // hard-linked into a directory they can.
  const mirror = mirroredInstall();
  if (mirror !== null) {
    failure = canRead(mirror);
    if (failure === null) return { prefix: ['setpriv', ...NOBODY], install: mirror };
  }
  return { prefix: [], install: CHECKOUT_INSTALL, reason: `${failure}; the checkout must be world-readable` };
}

/** Null when user 65534 can run the install's node and read its packages; else why not. */
function canRead(install: Install): string | null {
  const fastify = join(install.nodeModules, relative(CHECKOUT_INSTALL.nodeModules, createRequire(join(ROOT, 'package.json')).resolve('fastify')));
  const read = spawnSync('setpriv', [...NOBODY, install.node, '-e', `require('node:fs').accessSync(${JSON.stringify(fastify)}, require('node:fs').constants.R_OK)`], { encoding: 'utf8' });
  if (read.status === 0) return null;
  return `user 65534 cannot run ${install.node} or read ${fastify} (${(read.stderr || String(read.error)).split('\n').find((l) => /Error|EACCES/.test(l)) ?? 'exit ' + read.status})`;
}

/** The checkout's node_modules hard-linked into a fresh 0755 directory (removed at exit); null where links cannot be made. */
function mirroredInstall(): Install | null {
  const dir = mkdtempSync(join(tmpdir(), 'relay-install-'));
  chmodSync(dir, 0o755);
  const linked = spawnSync('cp', ['-al', CHECKOUT_INSTALL.nodeModules, join(dir, 'node_modules')]);
  if (linked.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    return null;
  }
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  const node = relative(CHECKOUT_INSTALL.nodeModules, process.execPath);
  return { nodeModules: join(dir, 'node_modules'), node: node.startsWith('..') ? process.execPath : join(dir, 'node_modules', node) };
}

const runner = nonRootUser();
const brokers = process.env.RELAY_KAFKA_BROKERS?.trim();
const mongoUrl = process.env.RELAY_MONGODB_URL?.trim();
const engineReason = brokers && mongoUrl ? undefined : 'RELAY_KAFKA_BROKERS and RELAY_MONGODB_URL are not set (start them with: eval "$(bash infra/engines/engines.sh up)")';

interface Image { root: string; home: string; listing(): string[] }

/** /app as the Dockerfile builds it, owned by the test's user and not writable by the child's. */
function buildImage(): Image {
  const root = mkdtempSync(join(tmpdir(), 'relay-image-'));
  const app = join(root, WORKDIR.replace(/^\/+/, ''));
  mkdirSync(app, { recursive: true });
  for (const copy of dockerfile.filter((i) => i.keyword === 'COPY')) {
    const { sources, destination } = copyOperands(copy);
    for (const source of sources) {
      const target = destination.endsWith('/') ? join(app, destination, posix.basename(source)) : join(app, destination);
      cpSync(join(ROOT, source), target, { recursive: true, filter: (path) => path === join(ROOT, source) || !dockerIgnores(dockerignore, relative(ROOT, path).split('\\').join('/')) });
    }
  }
  symlinkSync(runner.install.nodeModules, join(app, 'node_modules')); // RUN npm ci
  const home = join(root, 'home');
  mkdirSync(home);
  // Read-only for everyone but the owner; when the child runs as ourselves, for us too.
  const dirMode = runner.prefix.length > 0 ? 0o755 : 0o555;
  const walk = (path: string) => {
    const info = lstatSync(path);
    if (info.isSymbolicLink()) return;
    if (info.isDirectory()) {
      for (const name of readdirSync(path)) walk(join(path, name));
      chmodSync(path, dirMode);
    } else chmodSync(path, 0o444);
  };
  walk(root);
  const listing = (): string[] => {
    const out: string[] = [];
    const list = (path: string) => {
      for (const name of readdirSync(path)) {
        const full = join(path, name);
        out.push(relative(root, full));
        if (!lstatSync(full).isSymbolicLink() && lstatSync(full).isDirectory()) list(full);
      }
    };
    list(root);
    return out.sort();
  };
  return { root: app, home, listing };
}

function removeImage(image: Image): void {
  const top = dirname(image.home);
  const walk = (path: string) => {
    if (lstatSync(path).isSymbolicLink() || !lstatSync(path).isDirectory()) return;
    chmodSync(path, 0o755);
    for (const name of readdirSync(path)) walk(join(path, name));
  };
  walk(top);
  rmSync(top, { recursive: true, force: true });
}

interface Run { code: number | null; stdout: string; stderr: string }

/** The api service's command in the image's /app, with compose's environment and `env` on top. */
function runApi(image: Image, env: Record<string, string | undefined>, whileRunning?: (child: { output(): string; running(): boolean }) => Promise<void>): Promise<Run> {
  const [, api] = relayServices.find(([name]) => name === 'api')!;
  const command = strings(api.command, 'api.command');
  const program = command[0] === 'node' ? runner.install.node : command[0];
  const childEnv = Object.fromEntries(Object.entries({ PATH: process.env.PATH, HOME: image.home, ...environmentOf(api), ...env }).filter(([, v]) => v !== undefined)) as Record<string, string>;
  const [file, ...args] = [...runner.prefix, program, ...command.slice(1)];
  const child = spawn(file, args, { cwd: image.root, env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
  return (async () => {
    if (whileRunning) {
      try {
        await whileRunning({ output: () => `${stdout}${stderr}`, running: () => child.exitCode === null && child.signalCode === null });
      } finally {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      }
    }
    // A process that should have stopped but hangs fails the test instead of outliving it.
    await waitUntil(() => child.exitCode !== null || child.signalCode !== null, 'relay exits', 60_000).catch((error: Error) => {
      child.kill('SIGKILL');
      throw new Error(`${error.message}:\n${stdout}${stderr}`);
    });
    return { code: await exited, stdout, stderr };
  })();
}

/**
 * Relay's own lines of stderr: without the process warnings node prints for a dependency
 * (kafkajs on Node 24 sets a negative timeout on disconnect: TimeoutNegativeWarning).
 */
function relayLines(stderr: string): string[] {
  return stderr.replace(/^\(node:\d+\) \w+: .*\n(?:(?!relay: |\(node:\d+\) ).*\n)*/gm, '').trim().split('\n');
}

function assertOneLine(run: Run, pattern: RegExp): void {
  const lines = relayLines(run.stderr);
  assert.is(lines.length, 1, `one line on stderr:\n${run.stderr}`);
  assert.match(lines[0], pattern);
  assert.not.match(run.stderr, /\n\s+at /, 'no stack trace');
}

const embedded = skippableSuite<{ image: Image }>('compose: the image as a non-root user, without the URLs', runner.reason);
embedded.before.each((ctx) => {
  ctx.image = buildImage();
});
embedded.after.each((ctx) => removeImage(ctx.image));

embedded('without the three URLs the embedded stores need a data dir: one line naming RELAY_DATA_DIR', async ({ image }) => {
  const before = image.listing();
  const run = await runApi(image, { RELAY_EVENTSTORE_URL: undefined, RELAY_KAFKA_BROKERS: undefined, RELAY_MONGODB_URL: undefined, HOST: '127.0.0.1', PORT: '0' });
  assert.is(run.code, 78, run.stderr);
  assertOneLine(run, /^relay: invalid configuration: RELAY_DATA_DIR: cannot create \S+\/data \(EACCES\)/);
  assert.equal(image.listing(), before, 'nothing was created');
});

embedded.run();

const distributed = skippableSuite<{ image: Image; database: string; env: Record<string, string> }>('compose: the image as a non-root user, on the engines', runner.reason ?? engineReason);

distributed.before.each(async (ctx) => {
  ctx.image = buildImage();
  const run = randomBytes(4).toString('hex');
  const database = new URL(mongoUrl!);
  database.pathname = `/relay_compose_${run}`;
  ctx.database = database.toString();
  ctx.env = {
    HOST: '127.0.0.1',
    PORT: String(await freePort()),
    RELAY_KAFKA_BROKERS: brokers!,
    RELAY_MONGODB_URL: ctx.database,
    // No EventStoreDB runs here unless one is configured: the client connects lazily, so the
    // API still starts, and /readyz reports the event store as down.
    RELAY_EVENTSTORE_URL: process.env.RELAY_EVENTSTORE_URL?.trim() || `esdb://127.0.0.1:${await freePort()}?tls=false`,
    RELAY_LOG_NAMESPACE: `compose_${run}`,
    RELAY_LOG_LEVEL: 'warn',
  };
});

distributed.after.each(async (ctx) => {
  removeImage(ctx.image);
  const { MongoClient } = await import('mongodb');
  const client = new MongoClient(ctx.database);
  try {
    await client.db().dropDatabase();
  } finally {
    await client.close();
  }
});

distributed('the api starts with the three URLs and RELAY_SECRET_KEY, answers /healthz and /readyz, and writes no file', async ({ image, env }) => {
  const before = image.listing();
  const base = `http://127.0.0.1:${env.PORT}`;
  const seen: { ready?: { status: number; body: { checks: Record<string, boolean> } } } = {};
  const run = await runApi(image, env, async (child) => {
    await waitUntil(async () => {
      if (!child.running()) throw new Error(`relay exited early:\n${child.output()}`);
      return fetch(`${base}/healthz`).then((r) => r.ok, () => false);
    }, `${base}/healthz answers`, 60_000);
    assert.is((await fetch(`${base}/healthz`)).status, 200);
    const response = await fetch(`${base}/readyz`);
    seen.ready = { status: response.status, body: (await response.json()) as { checks: Record<string, boolean> } };
  });
  const { ready } = seen;
  assert.ok(ready, `it started:\n${run.stdout}${run.stderr}`);
  assert.is(ready.body.checks.documentStore, true, 'it reached MongoDB');
  if (process.env.RELAY_EVENTSTORE_URL?.trim()) assert.is(ready.status, 200, JSON.stringify(ready.body));
  assert.is(run.code, 0, `a clean stop on SIGTERM:\n${run.stderr}`);
  assert.equal(image.listing(), before, 'no data dir, no file: nothing was created in /app or HOME');
});

distributed('without RELAY_SECRET_KEY and nowhere to keep a key file: one line naming RELAY_SECRET_KEY', async ({ image, env }) => {
  const before = image.listing();
  const run = await runApi(image, { ...env, RELAY_SECRET_KEY: '' });
  assert.is(run.code, 78, run.stderr);
  assertOneLine(run, /^relay: invalid configuration: RELAY_SECRET_KEY: is not set, and the key file cannot be kept in \S+\/data \(EACCES\); set RELAY_SECRET_KEY/);
  assert.equal(image.listing(), before, 'nothing was created');
});

distributed.run();
