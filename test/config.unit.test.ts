// Configuration: documented defaults, and a bad value names its variable.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ConfigError, loadConfig } from '../infra/config.ts';

const test = suite('configuration');

test('defaults: port 3000, ./data, system DNS, development, embedded adapters', () => {
  const config = loadConfig({});
  assert.is(config.port, 3000);
  assert.is(config.dataDir, resolve('./data'));
  assert.equal(config.dnsServers, []);
  assert.is(config.env, 'development');
  assert.is(config.dashboardOrigin, 'http://localhost:3000');
  assert.is(config.eventStoreUrl, null);
  assert.is(config.kafkaBrokers, null);
  assert.is(config.mongodbUrl, null);
  assert.is(config.logNamespace, 'relay');
});

test('values are read from the environment', () => {
  const config = loadConfig({
    PORT: '8080', RELAY_DATA_DIR: '/tmp/relay-x', RELAY_DNS_SERVERS: '127.0.0.1:5353, [::1]:53,9.9.9.9,2001:db8::1',
    RELAY_DASHBOARD_ORIGIN: 'https://dash.example.com/some/path', RELAY_ENV: 'production', RELAY_DELIVERY: 'mx',
    RELAY_KAFKA_BROKERS: 'k1:9092,k2:9092', RELAY_MONGODB_URL: 'mongodb://m:27017/relay', RELAY_EVENTSTORE_URL: 'esdb://e:2113?tls=false',
  });
  assert.is(config.port, 8080);
  assert.is(config.dataDir, '/tmp/relay-x');
  assert.equal(config.dnsServers, ['127.0.0.1:5353', '[::1]:53', '9.9.9.9', '2001:db8::1']);
  assert.is(config.dashboardOrigin, 'https://dash.example.com');
  assert.is(config.env, 'production');
  assert.equal(config.kafkaBrokers, ['k1:9092', 'k2:9092']);
});

test('RELAY_ENV wins over NODE_ENV; NODE_ENV=test means development', () => {
  assert.is(loadConfig({ NODE_ENV: 'production', RELAY_ENV: 'development' }).env, 'development');
  assert.is(loadConfig({ NODE_ENV: 'test' }).env, 'development');
  assert.is(loadConfig({ NODE_ENV: 'production', RELAY_DELIVERY: 'mx' }).env, 'production');
});

const cases: Array<[string, Record<string, string>]> = [
  ['PORT', { PORT: 'abc' }],
  ['PORT', { PORT: '70000' }],
  ['RELAY_ENV', { RELAY_ENV: 'staging' }],
  ['NODE_ENV', { NODE_ENV: 'staging' }],
  ['RELAY_DNS_SERVERS', { RELAY_DNS_SERVERS: '1.2.3.4,not a host' }],
  ['RELAY_DNS_SERVERS', { RELAY_DNS_SERVERS: 'dns.google' }],
  ['RELAY_DNS_SERVERS', { RELAY_DNS_SERVERS: '1.2.3.4:53x' }],
  // A resolver's port is from 1 to 65535, in either form.
  ['RELAY_DNS_SERVERS', { RELAY_DNS_SERVERS: '9.9.9.9,127.0.0.1:65536' }],
  ['RELAY_DNS_SERVERS', { RELAY_DNS_SERVERS: '127.0.0.1:99999' }],
  ['RELAY_DNS_SERVERS', { RELAY_DNS_SERVERS: '127.0.0.1:0' }],
  ['RELAY_DNS_SERVERS', { RELAY_DNS_SERVERS: '[::1]:65536' }],
  ['RELAY_DNS_SERVERS', { RELAY_DNS_SERVERS: '[::1]:0' }],
  ['RELAY_DNS_SERVERS', { RELAY_DNS_SERVERS: '[2001:db8::53]:123456' }],
  ['RELAY_DNSSEC_RESOLVER', { RELAY_DNSSEC_RESOLVER: '[::1]:70000' }],
  ['RELAY_DASHBOARD_ORIGIN', { RELAY_DASHBOARD_ORIGIN: 'dashboard' }],
  ['RELAY_DASHBOARD_ORIGIN', { RELAY_DASHBOARD_ORIGIN: 'ftp://x.example' }],
  ['RELAY_MONGODB_URL', { RELAY_MONGODB_URL: 'http://x' }],
  ['RELAY_EVENTSTORE_URL', { RELAY_EVENTSTORE_URL: 'tcp://x' }],
  ['RELAY_LOG_LEVEL', { RELAY_LOG_LEVEL: 'loud' }],
  ['RELAY_LOG_NAMESPACE', { RELAY_LOG_NAMESPACE: 'has space' }],
  ['RELAY_DELIVERY', { RELAY_DELIVERY: 'carrier-pigeon' }],
  // The outbox sends nothing: production must say how to send.
  ['RELAY_DELIVERY', { RELAY_ENV: 'production' }],
  ['RELAY_SMTP_URL', { RELAY_DELIVERY: 'smtp' }],
  ['RELAY_SMTP_URL', { RELAY_SMTP_URL: 'http://mail.example.com' }],
  // Plain text only to loopback; STARTTLS otherwise.
  ['RELAY_SMTP_URL', { RELAY_SMTP_URL: 'smtp://mail.example.com:25?tls=none' }],
  // The feedback SMTP server (default port 2525) on this machine is not a smarthost.
  ['RELAY_SMTP_URL', { RELAY_SMTP_URL: 'smtp://127.0.0.1:2525?tls=none' }],
  ['RELAY_SMTP_URL', { RELAY_SMTP_URL: 'smtp://localhost:2525?tls=none' }],
  ['RELAY_SMTP_URL', { RELAY_SMTP_URL: 'smtp://[::1]:2525?tls=none' }],
  ['RELAY_SMTP_URL', { RELAY_SMTP_URL: 'smtp://user:pass@mail.example.com:2626', RELAY_INBOUND_SMTP_HOST: 'mail.example.com', RELAY_INBOUND_SMTP_PORT: '2626' }],
  ['RELAY_SMTP_URL', { RELAY_SMTP_URL: 'smtps://user:pass@127.0.0.1:2465', RELAY_INBOUND_SMTP_PORT: '2465' }],
  ['RELAY_MX_PORT', { RELAY_ENV: 'production', RELAY_DELIVERY: 'mx', RELAY_MX_PORT: '2525' }],
  ['RELAY_MX_ALLOW', { RELAY_ENV: 'production', RELAY_DELIVERY: 'mx', RELAY_MX_ALLOW: '127.0.0.1' }],
  ['RELAY_MX_ALLOW', { RELAY_MX_ALLOW: 'localhost' }],
  ['RELAY_MTA_STS_PORT', { RELAY_ENV: 'production', RELAY_DELIVERY: 'mx', RELAY_MTA_STS_PORT: '8443' }],
  ['RELAY_MTA_STS', { RELAY_MTA_STS: 'maybe' }],
  ['RELAY_DNSSEC_RESOLVER', { RELAY_DNSSEC_RESOLVER: 'resolver.example' }],
  ['RELAY_TLSRPT_FROM', { RELAY_TLSRPT_FROM: 'not an address' }],
  ['RELAY_DELIVERY_RETRY_SCALE', { RELAY_ENV: 'production', RELAY_DELIVERY: 'mx', RELAY_DELIVERY_RETRY_SCALE: '0.01' }],
  ['RELAY_DELIVERY_RETRY_SCALE', { RELAY_DELIVERY_RETRY_SCALE: '2' }],
  ['RELAY_WEBHOOK_ALLOW', { RELAY_ENV: 'production', RELAY_DELIVERY: 'mx', RELAY_WEBHOOK_ALLOW: 'hooks.test:8443' }],
  ['RELAY_WEBHOOK_ALLOW', { RELAY_WEBHOOK_ALLOW: 'hooks.test' }],
  ['RELAY_WEBHOOK_RETRY_SCALE', { RELAY_ENV: 'production', RELAY_DELIVERY: 'mx', RELAY_WEBHOOK_RETRY_SCALE: '0.5' }],
  ['RELAY_INBOUND_TLS_KEY', { RELAY_INBOUND_TLS_CERT: '/etc/cert.pem' }],
  ['RELAY_SEND_RATE', { RELAY_SEND_RATE: '0' }],
  ['RELAY_SEND_RATE', { RELAY_SEND_RATE: '1.5' }],
  ['RELAY_COMPOSE_THREADS', { RELAY_COMPOSE_THREADS: '-1' }],
  ['RELAY_COMPOSE_THREADS', { RELAY_COMPOSE_THREADS: '65' }],
  ['RELAY_COMPOSE_THREADS', { RELAY_COMPOSE_THREADS: 'two' }],
  ['RELAY_TEMPLATE_TIME_LIMIT_MS', { RELAY_TEMPLATE_TIME_LIMIT_MS: '9' }],
  ['RELAY_TEMPLATE_TIME_LIMIT_MS', { RELAY_TEMPLATE_TIME_LIMIT_MS: '60001' }],
  ['RELAY_TEMPLATE_TIME_LIMIT_MS', { RELAY_TEMPLATE_TIME_LIMIT_MS: '1.5' }],
  ['RELAY_PIPELINE_THREAD', { RELAY_PIPELINE_THREAD: 'yes' }],
  ['RELAY_ADMISSION_BACKLOG', { RELAY_ADMISSION_BACKLOG: '-1' }],
  ['RELAY_ADMISSION_BACKLOG', { RELAY_ADMISSION_BACKLOG: 'lots' }],
  ['RELAY_ADMISSION_MAX_WAIT_MS', { RELAY_ADMISSION_MAX_WAIT_MS: '0' }],
  ['RELAY_ADMISSION_MAX_WAIT_MS', { RELAY_ADMISSION_MAX_WAIT_MS: '10001' }],
  ['RELAY_ADMISSION_BACKLOG_GROUPS', { RELAY_ADMISSION_BACKLOG_GROUPS: 'projector,Sender!' }],
  ['RELAY_INBOUND_MAX_CONNECTIONS_PER_CLIENT', { RELAY_INBOUND_MAX_CONNECTIONS_PER_CLIENT: '0' }],
  ['RELAY_INBOUND_MAX_CONNECTIONS_PER_CLIENT', { RELAY_INBOUND_MAX_CONNECTIONS_PER_CLIENT: '201' }],
  ['RELAY_INBOUND_MAX_CONNECTIONS_PER_CLIENT', { RELAY_INBOUND_MAX_CONNECTIONS_PER_CLIENT: 'many' }],
  // Number forms Number() would read but that are not written as whole numbers.
  ['RELAY_SEND_RATE', { RELAY_SEND_RATE: '0x10' }],
  ['RELAY_INBOUND_MAX_CONNECTIONS_PER_CLIENT', { RELAY_INBOUND_MAX_CONNECTIONS_PER_CLIENT: '1e2' }],
  ['RELAY_DELIVERY_RETRY_SCALE', { RELAY_DELIVERY_RETRY_SCALE: '0x1' }],
  ['RELAY_DELIVERY_RETRY_SCALE', { RELAY_DELIVERY_RETRY_SCALE: '1e-3' }],
  ['RELAY_WEBHOOK_RETRY_SCALE', { RELAY_WEBHOOK_RETRY_SCALE: '0' }],
  ['RELAY_WEBHOOK_RETRY_SCALE', { RELAY_WEBHOOK_RETRY_SCALE: 'Infinity' }],
  // Ports Relay connects to: 0 reaches nothing.
  ['RELAY_MX_PORT', { RELAY_MX_PORT: '0' }],
  ['RELAY_MTA_STS_PORT', { RELAY_MTA_STS_PORT: '65536' }],
  ['RELAY_WEBHOOK_ALLOW', { RELAY_WEBHOOK_ALLOW: 'hooks.test:8443,[::1]:0' }],
  // Without its own listener, the metrics host would be ignored.
  ['RELAY_METRICS_HOST', { RELAY_METRICS_HOST: '10.0.0.5' }],
  ['RELAY_METRICS_HOST', { RELAY_METRICS_HOST: '10.0.0.5', RELAY_METRICS_PORT: 'off' }],
  ['RELAY_MAIL_HOST', { RELAY_MAIL_HOST: 'mail.example-.com' }],
  ['RELAY_MAIL_HOST', { RELAY_MAIL_HOST: `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(63)}.example` }], // 260 characters
  ['RELAY_MAIL_HOST', { RELAY_MAIL_HOST: 'mail.example.com..' }],
  ['RELAY_MAIL_HOST', { RELAY_MAIL_HOST: '192.0.2.25' }],
];

test('a smarthost at the feedback server\'s address is refused with a message naming both; another port, or a host elsewhere on that port, is accepted', () => {
  assert.throws(() => loadConfig({ RELAY_SMTP_URL: 'smtp://localhost:2525?tls=none' }), (e: ConfigError) =>
    /Relay's own feedback SMTP server \(RELAY_INBOUND_SMTP_PORT=2525\)/.test(e.message) && /587/.test(e.message) && e.variable === 'RELAY_SMTP_URL');
  assert.is(loadConfig({ RELAY_SMTP_URL: 'smtp://127.0.0.1:1025?tls=none' }).smtpUrl, 'smtp://127.0.0.1:1025?tls=none');
  assert.is(loadConfig({ RELAY_SMTP_URL: 'smtp://127.0.0.1:2525?tls=none', RELAY_INBOUND_SMTP_PORT: '2626' }).delivery, 'smtp', 'the feedback server moved');
  assert.is(loadConfig({ RELAY_SMTP_URL: 'smtp://user:pass@smtp.example.com:2525' }).delivery, 'smtp', 'a smarthost elsewhere may use 2525');
  assert.is(loadConfig({ RELAY_SMTP_URL: 'smtp://127.0.0.1:2525?tls=none', RELAY_DELIVERY: 'mx' }).delivery, 'mx', 'not used for delivery: not checked');
});

test('delivery defaults: the outbox in development; smtp when a smarthost is given; production takes an explicit choice', () => {
  assert.is(loadConfig({}).delivery, 'outbox');
  assert.is(loadConfig({ RELAY_SMTP_URL: 'smtp://user:pass@mail.example.com:587' }).delivery, 'smtp');
  assert.is(loadConfig({ RELAY_ENV: 'production', RELAY_DELIVERY: 'outbox' }).delivery, 'outbox');
  assert.is(loadConfig({ RELAY_ENV: 'production', RELAY_DELIVERY: 'mx' }).deliveryRetryScale, 1);
  assert.is(loadConfig({ RELAY_MX_PORT: '2525' }).mxPort, 2525);
  assert.equal([...loadConfig({ RELAY_MX_ALLOW: '127.0.0.1, ::1' }).mxAllow], ['127.0.0.1', '::1']);
  assert.equal([...loadConfig({}).mxAllow], []);
  assert.equal([loadConfig({}).dnssecResolvers, loadConfig({ RELAY_DNSSEC_RESOLVER: '127.0.0.1:53' }).dnssecResolvers], [null, ['127.0.0.1:53']]);
  assert.equal([loadConfig({}).tlsRptFrom, loadConfig({ RELAY_TLSRPT_FROM: 'tlsrpt@mail.example.com' }).tlsRptFrom], [null, 'tlsrpt@mail.example.com']);
  assert.equal([loadConfig({}).mtaSts, loadConfig({ RELAY_MTA_STS: 'off' }).mtaSts, loadConfig({ RELAY_MTA_STS_PORT: '8443' }).mtaStsPort], [true, false, 8443]);
  assert.is(loadConfig({}).sendRate, null);
});
test('templates: each compilation or rendering may take 2 s by default; RELAY_TEMPLATE_TIME_LIMIT_MS sets it', () => {
  assert.is(loadConfig({}).templateTimeLimitMs, 2000);
  assert.is(loadConfig({ RELAY_TEMPLATE_TIME_LIMIT_MS: '10' }).templateTimeLimitMs, 10);
});

test('admission flow control: sends wait while the watched groups are over 500 records behind, at most 1 s; 0 turns it off', () => {
  assert.equal(loadConfig({}).admissionFlow, { maxBacklog: 500, maxWaitMs: 1000, groups: null });
  assert.equal(loadConfig({ RELAY_ADMISSION_BACKLOG: '0', RELAY_ADMISSION_MAX_WAIT_MS: '250', RELAY_ADMISSION_BACKLOG_GROUPS: 'projector, sender' }).admissionFlow,
    { maxBacklog: 0, maxWaitMs: 250, groups: ['projector', 'sender'] });
});

test('message composition: one worker thread by default; RELAY_COMPOSE_THREADS=0 composes on the event loop', () => {
  assert.is(loadConfig({}).composeThreads, 1);
  assert.is(loadConfig({ RELAY_COMPOSE_THREADS: '0' }).composeThreads, 0);
  assert.is(loadConfig({ RELAY_COMPOSE_THREADS: '4' }).composeThreads, 4);
});
test('the feedback server: 20 connections per client address unless RELAY_INBOUND_MAX_CONNECTIONS_PER_CLIENT says otherwise (up to the 200 in all)', () => {
  assert.is(loadConfig({}).inbound.maxConnectionsPerClient, 20);
  assert.is(loadConfig({ RELAY_INBOUND_MAX_CONNECTIONS_PER_CLIENT: '200' }).inbound.maxConnectionsPerClient, 200);
});
test('relay start runs the pipeline on a thread of its own by default, on its one event loop with RELAY_PIPELINE_THREAD=off', () => {
  assert.is(loadConfig({}).pipelineThread, true);
  assert.is(loadConfig({ RELAY_PIPELINE_THREAD: 'ON' }).pipelineThread, true);
  assert.is(loadConfig({ RELAY_PIPELINE_THREAD: 'OFF' }).pipelineThread, false);
});
test('/metrics: on PORT by default, on its own listener with RELAY_METRICS_PORT (host RELAY_METRICS_HOST, else HOST), or off', () => {
  assert.equal(loadConfig({}).metrics, { enabled: true, host: '127.0.0.1', port: null });
  assert.equal(loadConfig({ HOST: '0.0.0.0', RELAY_METRICS_PORT: '9464' }).metrics, { enabled: true, host: '0.0.0.0', port: 9464 });
  assert.equal(loadConfig({ RELAY_METRICS_PORT: '9464', RELAY_METRICS_HOST: '10.0.0.5' }).metrics, { enabled: true, host: '10.0.0.5', port: 9464 });
  assert.is(loadConfig({ RELAY_METRICS_PORT: 'off' }).metrics.enabled, false);
  assert.throws(() => loadConfig({ RELAY_METRICS_PORT: 'nine' }), (error: Error) => error instanceof ConfigError && error.variable === 'RELAY_METRICS_PORT');
});
test('RELAY_SHAPING_FILE is read and checked at start: a bad line stops the process naming the file and the line', () => {
  const dir = mkdtempSync(join(tmpdir(), 'relay-shaping-'));
  try {
    const good = join(dir, 'good.conf');
    writeFileSync(good, '# limits per MX host\n*.google.com connections=10 messages_per_minute=1200\n');
    assert.equal(loadConfig({ RELAY_SHAPING_FILE: good }).shaping.map((r) => [r.pattern, r.limits]), [['*.google.com', { connections: 10, messagesPerMinute: 1200 }]]);
    const bad = join(dir, 'bad.conf');
    writeFileSync(bad, '*.google.com connections=10\n*.outlook.com per_minute=5\n');
    assert.throws(() => loadConfig({ RELAY_SHAPING_FILE: bad }), (error: Error) =>
      error instanceof ConfigError && error.variable === 'RELAY_SHAPING_FILE' && error.message === `RELAY_SHAPING_FILE: ${bad} line 2: "per_minute=5" is not a setting (connections=N, messages_per_connection=N, messages_per_minute=N)`);
    assert.throws(() => loadConfig({ RELAY_SHAPING_FILE: join(dir, 'missing.conf') }), (error: Error) => error instanceof ConfigError && /cannot read .*missing\.conf \(ENOENT\)/.test(error.message));
    assert.equal(loadConfig({}).shaping, []);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

for (const [variable, env] of cases) {
  test(`invalid ${variable} (${Object.entries(env).map(([k, v]) => `${k}=${v}`).join(' ')}) is refused naming it`, () => {
    try {
      loadConfig(env);
      assert.unreachable('should have thrown');
    } catch (error) {
      assert.instance(error, ConfigError);
      assert.is((error as ConfigError).variable, variable);
      assert.ok((error as Error).message.startsWith(`${variable}:`));
    }
  });
}

test('number forms: whole numbers and decimal factors as written are read; ports Relay connects to from 1 to 65535', () => {
  const config = loadConfig({
    RELAY_SEND_RATE: '100000', RELAY_DELIVERY_RETRY_SCALE: '.5', RELAY_WEBHOOK_RETRY_SCALE: '0.00001', RELAY_MX_PORT: '1', RELAY_MTA_STS_PORT: '65535',
    RELAY_WEBHOOK_ALLOW: 'LocalHost:8443, [::1]:1',
  });
  assert.equal([config.sendRate, config.deliveryRetryScale, config.webhookRetryScale, config.mxPort, config.mtaStsPort], [100000, 0.5, 0.00001, 1, 65535]);
  assert.equal([...config.webhookAllow], ['localhost:8443', '[::1]:1']);
  assert.equal([loadConfig({}).mxPort, loadConfig({}).mtaStsPort], [null, null]);
  // Listeners may ask for any free port.
  assert.equal([loadConfig({ PORT: '0' }).port, loadConfig({ RELAY_METRICS_PORT: '0' }).metrics.port, loadConfig({ RELAY_INBOUND_SMTP_PORT: '0' }).inbound.port], [0, 0, 0]);
  assert.throws(() => loadConfig({ RELAY_SEND_RATE: '1e3' }), (e: unknown) => e instanceof ConfigError
    && e.message === 'RELAY_SEND_RATE: must be a whole number of messages per second from 1 to 100000, got "1e3"');
});

test('RELAY_MAIL_HOST: a host name by RFC 1123 (one label too, a trailing dot), as written', () => {
  for (const name of ['localhost', 'mail.example.com.', 'MX-1.Example.COM', `${'a'.repeat(63)}.example.com`, '1mail.2example.com']) {
    assert.is(loadConfig({ RELAY_MAIL_HOST: name }).mailHost, name);
  }
  assert.throws(() => loadConfig({ RELAY_MAIL_HOST: 'mail..example.com' }), (e: unknown) => e instanceof ConfigError
    && /^RELAY_MAIL_HOST: "mail\.\.example\.com" is not a host name \(empty label/.test(e.message));
});

test('RELAY_MONGODB_URL: a number option the driver would misread with parseInt is refused, whatever the case of its name or its encoding', () => {
  const url = (query: string) => `mongodb://admin:s3cret@db.internal:27017/relay?${query}`;
  for (const [query, problem] of [
    ['socketTimeoutMS=10s', /^RELAY_MONGODB_URL: socketTimeoutMS: expected a whole number of milliseconds from 0, without a unit; got "10s", which the driver would read as 10 milliseconds$/],
    ['SOCKETTIMEOUTMS=10s', /socketTimeoutMS: .*got "10s"/],
    ['socketTimeoutMS=%31%30s', /socketTimeoutMS: .*got "10s"/],
    ['maxPoolSize=1.5', /maxPoolSize: expected a whole number of connections from 0, .*got "1\.5", which the driver would read as 1 connections/],
    ['maxConnecting=0', /maxConnecting: expected a whole number of connections from 1, without a unit; got "0"$/],
    ['w=majority&wtimeoutMS=5s', /wtimeoutMS: .*got "5s"/],
    ['zlibCompressionLevel=-2', /zlibCompressionLevel: expected a whole number from -1 \(-1: the default\)/],
  ] as const) {
    assert.throws(() => loadConfig({ RELAY_MONGODB_URL: url(query) }), (e: unknown) => e instanceof ConfigError && problem.test(e.message) && !e.message.includes('s3cret'), query);
  }
  assert.throws(() => loadConfig({ RELAY_MONGODB_URL: 'mongodb://m1:27017,m2:27017/relay?replicaSet=rs0&serverSelectionTimeoutMS=30s' }),
    (e: unknown) => e instanceof ConfigError && /serverSelectionTimeoutMS: .*read as 30 milliseconds/.test(e.message));
  const accepted = url('socketTimeoutMS=60000&maxPoolSize=50&zlibCompressionLevel=-1&w=majority&appName=relay-1');
  assert.is(loadConfig({ RELAY_MONGODB_URL: accepted }).mongodbUrl, accepted);
});

test('a resolver at the ends of the port range, in either form, is accepted as written', () => {
  assert.equal(loadConfig({ RELAY_DNS_SERVERS: '127.0.0.1:1,127.0.0.1:65535,[::1]:5353,[::1]' }).dnsServers, ['127.0.0.1:1', '127.0.0.1:65535', '[::1]:5353', '[::1]']);
  assert.throws(() => loadConfig({ RELAY_DNS_SERVERS: '[::1]:65536' }), (e: unknown) => e instanceof ConfigError && e.message === 'RELAY_DNS_SERVERS: "[::1]:65536": the port must be from 1 to 65535');
});

test('list variables: a port above 65535 or a list with no item left is an error naming the variable', () => {
  for (const [env, variable] of [
    [{ RELAY_KAFKA_BROKERS: 'kafka.internal:99999' }, 'RELAY_KAFKA_BROKERS'],
    [{ RELAY_KAFKA_BROKERS: ',' }, 'RELAY_KAFKA_BROKERS'],
    [{ RELAY_KAFKA_BROKERS: ' , , ' }, 'RELAY_KAFKA_BROKERS'],
    [{ RELAY_TRUST_PROXY: ',' }, 'RELAY_TRUST_PROXY'],
    [{ RELAY_DNS_SERVERS: ',' }, 'RELAY_DNS_SERVERS'],
    [{ RELAY_ADMISSION_BACKLOG_GROUPS: ',' }, 'RELAY_ADMISSION_BACKLOG_GROUPS'],
  ] as const) {
    assert.throws(() => loadConfig(env), (e: unknown) => e instanceof ConfigError && e.variable === variable, JSON.stringify(env));
  }
  assert.equal(loadConfig({ RELAY_KAFKA_BROKERS: 'k1:65535, ,k2' }).kafkaBrokers, ['k1:65535', 'k2:9092']);
});

test('RELAY_KAFKA_BROKERS: port 0 and IPv6 literals (which the Kafka client splits at their first colon) are refused; a broker without a port is on 9092', () => {
  for (const brokers of ['k1:0', 'k1:9092,k2:0', '[::1]:9092', '::1', '10.0.0.1:']) {
    assert.throws(() => loadConfig({ RELAY_KAFKA_BROKERS: brokers }), (e: unknown) => e instanceof ConfigError && e.variable === 'RELAY_KAFKA_BROKERS', brokers);
  }
  assert.equal(loadConfig({ RELAY_KAFKA_BROKERS: '10.0.0.1,kafka-0.internal:19092' }).kafkaBrokers, ['10.0.0.1:9092', 'kafka-0.internal:19092']);
});

test('an unparsable or wrong-scheme URL variable never shows its value, only scheme and host', () => {
  const cases = [
    ['RELAY_SMTP_URL', 'smtp://relay:s3cret#x@smtp.example.net:587'],
    ['RELAY_MONGODB_URL', 'mongodb://admin:s3cret?x@db:27017/relay'],
    ['RELAY_EVENTSTORE_URL', 'esdb://admin:s3cret@esdb:99999'],
    ['RELAY_MONGODB_URL', 'http://admin:s3cret@db.internal/relay'],
  ] as const;
  for (const [variable, value] of cases) {
    let message = '';
    try {
      loadConfig({ [variable]: value });
    } catch (error) {
      message = (error as Error).message;
    }
    assert.ok(message.startsWith(`${variable}: `), message);
    assert.not.ok(message.includes('s3cret'), message);
  }
  assert.throws(() => loadConfig({ RELAY_MONGODB_URL: 'http://admin:s3cret@db.internal/relay' }), /got "http:\/\/\*\*\*@db\.internal"/);
});

test('a store URL naming several hosts (a replica set, a cluster) is read by its adapter, not refused', () => {
  const config = loadConfig({ RELAY_MONGODB_URL: 'mongodb://relay:pw@m1:27017,m2:27017,m3:27017/relay?replicaSet=rs0', RELAY_EVENTSTORE_URL: 'esdb://admin:pw@e1:2113,e2:2113,e3:2113?tls=false' });
  assert.is(config.mongodbUrl, 'mongodb://relay:pw@m1:27017,m2:27017,m3:27017/relay?replicaSet=rs0');
  assert.is(config.eventStoreUrl, 'esdb://admin:pw@e1:2113,e2:2113,e3:2113?tls=false');
  for (const [variable, value, problem] of [
    ['RELAY_MONGODB_URL', 'http://m1:27017,m2:27017/relay', /must use mongodb or mongodb\+srv/],
    ['RELAY_MONGODB_URL', 'mongodb://relay:s3cret@m1:27017,m2:27017/relay?bogusOption=1', /bogusoption/i],
    ['RELAY_EVENTSTORE_URL', 'esdb://admin:s3cret@e1:2113,e2:2113?tsl=false', /unknown option "tsl"/],
  ] as const) {
    let message = '';
    try {
      loadConfig({ [variable]: value });
    } catch (error) {
      message = (error as Error).message;
    }
    assert.ok(message.startsWith(`${variable}: `) && problem.test(message), message);
    assert.not.ok(message.includes('s3cret'), message);
  }
});

test.run();
