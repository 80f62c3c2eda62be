// Kafka's own command-line consumer (kafka-console-consumer, the Java client), run as a child
// process: an implementation independent of Relay's kafkajs, the way an analyst outside Node
// reads the events topic. It runs on the Kafka install infra/engines/kafka.sh makes in its cache
// (RELAY_ENGINES_CACHE, by default .cache/relay-engines in the home directory): the broker's jars
// in kafka-<version>/lib and the kafka-tools jar of the same version in kafka-<version>/tools
// (`bash infra/engines/engines.sh install` fetches it, from Maven Central like the broker's).
// Without that jar the suites that need it are skipped with the reason from
// consoleConsumerMissing(). describeTopicConfig runs Kafka's kafka-configs (ConfigCommand, in the
// broker's own jars) the same way.
import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

export interface ConsoleRecord {
  /** The record timestamp (ms) and its type, as the Java client reports them. */
  timestampType: string;
  timestamp: number;
  partition: number;
  offset: number;
  /** Header name → value; a name given twice keeps every value. */
  headers: Array<[string, string]>;
  key: string;
  /** The value's raw bytes. */
  value: Buffer;
}

interface Launcher {
  command: string;
  prefix: string[];
}

const cacheDir = (): string => process.env.RELAY_ENGINES_CACHE ?? join(homedir(), '.cache', 'relay-engines');

/** The Kafka installs of infra/engines/kafka.sh (those with the broker's jars), newest version first. */
function kafkaHomes(): Array<{ home: string; version: string }> {
  const cache = cacheDir();
  if (!existsSync(cache)) return [];
  return readdirSync(cache)
    .map((name) => ({ name, version: /^kafka-(\d[^/]*)$/.exec(name)?.[1] }))
    .filter((h): h is { name: string; version: string } => h.version !== undefined && existsSync(join(cache, h.name, 'lib', `kafka_2.13-${h.version}.jar`)))
    .sort((a, b) => b.version.localeCompare(a.version, 'en', { numeric: true }))
    .map(({ name, version }) => ({ home: join(cache, name), version }));
}

const java = (): string => (process.env.JAVA_HOME ? join(process.env.JAVA_HOME, 'bin', 'java') : 'java');
/** A small heap; log4j without a configuration: the tools log nothing of their own. */
const JVM = ['-Xmx256m', '-Dlog4j.configuration=file:/dev/null'];

function launcher(): Launcher | string {
  const homes = kafkaHomes();
  if (homes.length === 0) return `no Kafka install of infra/engines/kafka.sh in ${cacheDir()} (run: bash infra/engines/engines.sh install)`;
  for (const { home, version } of homes) {
    const tools = join(home, 'tools', `kafka-tools-${version}.jar`);
    if (!existsSync(tools)) continue;
    return { command: java(), prefix: [...JVM, '-cp', `${join(home, 'lib', '*')}:${join(home, 'tools', '*')}`, 'org.apache.kafka.tools.consumer.ConsoleConsumer'] };
  }
  return `the Kafka install in ${homes[0].home} has no kafka-tools jar of its version in tools/, which kafka-console-consumer needs (run: bash infra/engines/engines.sh install)`;
}

/**
 * The topic's configuration as Kafka's own kafka-configs (ConfigCommand: `--describe --all`)
 * reports it: every name with its effective value.
 */
export async function describeTopicConfig(brokers: string, topic: string): Promise<Record<string, string>> {
  const found = kafkaHomes()[0];
  if (!found) throw new Error(`no Kafka install of infra/engines/kafka.sh in ${cacheDir()}`);
  const prefix = [...JVM, '-cp', join(found.home, 'lib', '*'), 'kafka.admin.ConfigCommand'];
  const child = spawn(java(), [...prefix, '--bootstrap-server', brokers, '--describe', '--entity-type', 'topics', '--entity-name', topic, '--all'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
  if (code !== 0) throw new Error(`kafka-configs --describe ${topic}: exit ${code}: ${err.slice(-2000)}`);
  // Lines like "  retention.ms=604800000 sensitive=false synonyms={...}".
  const config: Record<string, string> = {};
  for (const line of out.split('\n')) {
    const match = /^\s+([a-z0-9.]+)=(\S*) sensitive=/.exec(line);
    if (match) config[match[1]] = match[2];
  }
  if (Object.keys(config).length === 0) throw new Error(`kafka-configs --describe ${topic} printed no configuration:\n${out}${err}`);
  return config;
}

/** Why the console consumer cannot run here, or undefined when it can. */
export function consoleConsumerMissing(): string | undefined {
  const found = launcher();
  return typeof found === 'string' ? found : undefined;
}

export interface ConsumeOptions {
  brokers: string;
  topic: string;
  group: string;
  isolationLevel: 'read_committed' | 'read_uncommitted';
  /** Stops after this many records (the positive marker that all that was expected came). */
  maxMessages: number;
  /** Gives up (and fails) after this long. Default 90 s. */
  timeoutMs?: number;
  /** --from-beginning. Default true. */
  fromBeginning?: boolean;
  /** --timeout-ms: stops once no record came for this long, and returns what came (maxMessages is then an upper bound). */
  idleMs?: number;
}

const SEPARATOR = '\u0001';
const HEADER_SEPARATOR = '\u0003';

/** Reads records with kafka-console-consumer and parses what it prints (key, headers, partition, offset, timestamp, value). */
export async function consoleConsume(options: ConsumeOptions): Promise<ConsoleRecord[]> {
  const found = launcher();
  if (typeof found === 'string') throw new Error(found);
  const args = [
    ...found.prefix,
    '--bootstrap-server', options.brokers,
    '--topic', options.topic,
    '--group', options.group,
    '--isolation-level', options.isolationLevel,
    '--max-messages', String(options.maxMessages),
    ...(options.fromBeginning ?? true ? ['--from-beginning'] : []),
    ...(options.idleMs !== undefined ? ['--timeout-ms', String(options.idleMs)] : []),
    '--property', 'print.timestamp=true',
    '--property', 'print.partition=true',
    '--property', 'print.offset=true',
    '--property', 'print.headers=true',
    '--property', 'print.key=true',
    '--property', `key.separator=${SEPARATOR}`,
    '--property', `headers.separator=${HEADER_SEPARATOR}`,
    '--property', 'line.separator=\u0002\n',
  ];
  const child = spawn(found.command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const out: Buffer[] = [];
  let err = '';
  child.stdout.on('data', (d: Buffer) => out.push(d));
  child.stderr.on('data', (d) => (err += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 90_000);
  const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
  clearTimeout(timer);
  const stdout = Buffer.concat(out);
  const records = parse(stdout);
  if (records.length < options.maxMessages && (options.idleMs === undefined || code !== 0)) {
    throw new Error(`kafka-console-consumer (exit ${code}) printed ${records.length} of ${options.maxMessages} records on ${options.topic}:\n${err.slice(-2000)}`);
  }
  return records;
}

function parse(stdout: Buffer): ConsoleRecord[] {
  const records: ConsoleRecord[] = [];
  const end = Buffer.from('\u0002\n');
  let at = 0;
  for (;;) {
    const stop = stdout.indexOf(end, at);
    if (stop < 0) break;
    const line = stdout.subarray(at, stop);
    at = stop + end.length;
    // The fields before the value are ASCII; the value is everything after the fifth separator.
    const fields: Buffer[] = [];
    let from = 0;
    for (let i = 0; i < 5; i++) {
      const next = line.indexOf(SEPARATOR.charCodeAt(0), from);
      if (next < 0) throw new Error(`unexpected console consumer line: ${line.toString('latin1').slice(0, 300)}`);
      fields.push(line.subarray(from, next));
      from = next + 1;
    }
    const [stamp, partition, offset, headers, key] = fields.map((f) => f.toString('latin1'));
    const [timestampType, timestamp] = stamp.split(':');
    const headerPairs: Array<[string, string]> = headers === 'NO_HEADERS' ? [] : headers.split(HEADER_SEPARATOR).map((h) => {
      const eq = h.indexOf(':'); // the console consumer's name/value separator
      return [h.slice(0, eq), h.slice(eq + 1)];
    });
    records.push({
      timestampType,
      timestamp: Number(timestamp),
      partition: Number(partition.replace('Partition:', '')),
      offset: Number(offset.replace('Offset:', '')),
      headers: headerPairs,
      key,
      value: Buffer.from(line.subarray(from)),
    });
  }
  return records;
}
