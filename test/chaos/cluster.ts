// The parts of a distributed Relay as separate `relay` processes, each on a port of its own
// that it keeps across restarts (the driver and the senders find the API and the inbound
// server where they were). A kill is a SIGKILL; the part is started again at once.
import { PROCESSORS } from '../../apps/processors/registry.ts';
import { freePort, spawnRelay, waitForReady, type RelayProcess } from '../support/relay-process.ts';

export interface PartSpec {
  name: string;
  args: string[];
  env?: Record<string, string>;
}

/** The API, the forwarder, every processor and the feedback SMTP server. */
export function distributedParts(inboundSmtpPort: number): PartSpec[] {
  return [
    { name: 'api', args: ['api'] },
    { name: 'forwarder', args: ['forwarder'] },
    ...PROCESSORS.map((p) => ({ name: p.name, args: ['processor', p.name] })),
    { name: 'inbound', args: ['inbound'], env: { RELAY_INBOUND_SMTP_PORT: String(inboundSmtpPort) } },
  ];
}

interface Running {
  spec: PartSpec;
  port: number;
  current: RelayProcess;
  /** Output of the incarnations killed so far. */
  earlier: string[];
  restarts: number;
}

export interface Cluster {
  urlOf(part: string): string;
  names(): string[];
  /** SIGKILL, wait for the exit, start it again (not waiting for it to be ready). */
  kill(part: string): Promise<void>;
  /** Waits until every part answers /readyz with 200. */
  allReady(timeoutMs: number): Promise<void>;
  /** Every incarnation's output, by part. */
  logs(): Map<string, string>;
  stop(): Promise<void>;
}

export async function startCluster(specs: PartSpec[], env: Record<string, string>): Promise<Cluster> {
  const parts = new Map<string, Running>();
  const spawn = (spec: PartSpec, port: number) => spawnRelay(spec.args, { ...env, ...spec.env, PORT: String(port) });
  const url = (port: number) => `http://127.0.0.1:${port}`;
  try {
    for (const spec of specs) {
      const port = await freePort();
      parts.set(spec.name, { spec, port, current: spawn(spec, port), earlier: [], restarts: 0 });
    }
    await Promise.all([...parts.values()].map((p) => waitForReady(url(p.port), p.current, 120_000)));
  } catch (error) {
    await Promise.all([...parts.values()].map((p) => p.current.kill()));
    throw error;
  }
  const get = (name: string) => {
    const part = parts.get(name);
    if (!part) throw new Error(`no part ${name}`);
    return part;
  };
  return {
    urlOf: (name) => url(get(name).port),
    names: () => [...parts.keys()],
    async kill(name) {
      const part = get(name);
      await part.current.kill();
      part.earlier.push(part.current.output());
      part.restarts++;
      part.current = spawn(part.spec, part.port);
    },
    async allReady(timeoutMs) {
      await Promise.all([...parts.values()].map((p) => waitForReady(url(p.port), p.current, timeoutMs)));
    },
    logs: () => new Map([...parts.values()].map((p) => [p.spec.name, [...p.earlier, p.current.output()].join('\n--- killed, restarted ---\n')])),
    async stop() {
      await Promise.all([...parts.values()].map((p) => p.current.stop()));
    },
  };
}
