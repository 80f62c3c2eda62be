// A Kafka broker or a FerretDB server of the test's own, for tests that stop and restart an
// engine: the shared engines (RELAY_KAFKA_BROKERS, RELAY_MONGODB_URL) serve every test file and
// every engineer at once and must never be stopped. This one runs from the same cached install
// (infra/engines/*.sh) on free ports, with its run directory (pid file, config, data, log) in a
// temporary directory, and is stopped and deleted by stop().
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from './relay-process.ts';

const ENGINES = fileURLToPath(new URL('../../infra/engines/', import.meta.url));

export interface PrivateEngine {
  /** The broker address (host:port) or the MongoDB URL. */
  address: string;
  /** Stops the server and keeps its data: it went away. */
  halt(): Promise<void>;
  /** Starts it again on its data. */
  resume(): Promise<void>;
  /** Stops it and deletes everything it had. */
  stop(): Promise<void>;
}

function run(script: string, command: string, env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [join(ENGINES, script), command], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code === 0) resolve(stdout.trim().split('\n').at(-1) ?? '');
      else reject(new Error(`${script} ${command} exited with ${code}:\n${stderr}`));
    });
  });
}

async function privateEngine(script: string, ports: (env: Record<string, string>) => Promise<void>, extra: Record<string, string> = {}): Promise<PrivateEngine> {
  const runDir = mkdtempSync(join(tmpdir(), `relay-${script.replace('.sh', '')}-`));
  const env: Record<string, string> = { RELAY_ENGINES_RUN: runDir, ...extra };
  await ports(env);
  let address: string;
  try {
    address = await run(script, 'start', env);
  } catch (error) {
    await run(script, 'stop', env).catch(() => {});
    rmSync(runDir, { recursive: true, force: true });
    throw error;
  }
  return {
    address,
    halt: async () => void await run(script, 'halt', env),
    resume: async () => void await run(script, 'resume', env),
    async stop() {
      try {
        await run(script, 'stop', env);
      } finally {
        rmSync(runDir, { recursive: true, force: true });
      }
    },
  };
}

/** A single-node Kafka (KRaft) on two free ports. */
export function startPrivateKafka(): Promise<PrivateEngine> {
  return privateEngine('kafka.sh', async (env) => {
    env.RELAY_KAFKA_PORT = String(await freePort());
    env.RELAY_KAFKA_CONTROLLER_PORT = String(await freePort());
  }, { RELAY_KAFKA_HEAP: '256m' });
}

/** FerretDB on its SQLite backend (no PostgreSQL of its own to start), on a free port. */
export function startPrivateFerretDb(): Promise<PrivateEngine> {
  return privateEngine('ferretdb.sh', async (env) => {
    env.RELAY_FERRETDB_PORT = String(await freePort());
  }, { RELAY_FERRETDB_BACKEND: 'sqlite' });
}
