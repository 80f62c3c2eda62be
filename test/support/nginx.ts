// A private nginx in front of a Relay, as operators deploy it: its own prefix directory, config,
// temporary paths and pid file (no system service, nothing of the machine's nginx is touched),
// listening on a loopback port, terminating TLS with a certificate of a test CA (or plain HTTP)
// and proxying to Relay's HTTP port with the usual headers. Debian's `nginx-light` (or `nginx`)
// provides /usr/sbin/nginx; without it the suites that need it are skipped (`nginxMissing`).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitUntil } from './eventually.ts';
import { freePort } from './free-port.ts';

export const NGINX_BINARY = '/usr/sbin/nginx';

/** Why suites with nginx cannot run here, or undefined when they can. */
export const nginxMissing = (): string | undefined =>
  existsSync(NGINX_BINARY) ? undefined : `${NGINX_BINARY} is missing (apt-get install nginx-light)`;

export interface NginxOptions {
  /** Relay's HTTP port on 127.0.0.1. */
  upstreamPort: number;
  /** PEM key and certificate: the server listens with TLS and HTTP/2; without them, plain HTTP/1.1. */
  tls?: { key: string; cert: string };
  /** Lines added inside `http { }` (e.g. gzip). */
  httpExtra?: string;
  /** Lines added inside the proxying `location / { }`. */
  locationExtra?: string;
  /** The port to listen on (a public origin named before nginx starts); a free one by default. */
  port?: number;
}

export interface NginxInstance {
  port: number;
  /** The error log so far (why a request failed, when one does). */
  errorLog(): string;
  stop(): Promise<void>;
}

const waitForPort = (port: number) => waitUntil(() => new Promise<boolean>((resolve) => {
  const socket = connect(port, '127.0.0.1');
  socket.once('connect', () => { socket.destroy(); resolve(true); });
  socket.once('error', () => resolve(false));
}), `nginx listening on ${port}`, 10_000);

export async function startNginx(options: NginxOptions): Promise<NginxInstance> {
  const prefix = mkdtempSync(join(tmpdir(), 'relay-nginx-'));
  for (const dir of ['logs', 'tmp']) mkdirSync(join(prefix, dir));
  const port = options.port ?? await freePort();
  let listen = `listen 127.0.0.1:${port};`;
  if (options.tls) {
    writeFileSync(join(prefix, 'server.key'), options.tls.key);
    writeFileSync(join(prefix, 'server.pem'), options.tls.cert);
    listen = `listen 127.0.0.1:${port} ssl http2;\n    ssl_certificate ${join(prefix, 'server.pem')};\n    ssl_certificate_key ${join(prefix, 'server.key')};`;
  }
  const config = `
daemon off;
master_process off;
worker_processes 1;
pid ${join(prefix, 'nginx.pid')};
error_log ${join(prefix, 'logs', 'error.log')} info;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path ${join(prefix, 'tmp', 'body')};
  proxy_temp_path ${join(prefix, 'tmp', 'proxy')};
  fastcgi_temp_path ${join(prefix, 'tmp', 'fastcgi')};
  uwsgi_temp_path ${join(prefix, 'tmp', 'uwsgi')};
  scgi_temp_path ${join(prefix, 'tmp', 'scgi')};
  ${options.httpExtra ?? ''}
  upstream relay { server 127.0.0.1:${options.upstreamPort}; keepalive 8; }
  server {
    ${listen}
    client_max_body_size 11m;
    location / {
      proxy_pass http://relay;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
      ${options.locationExtra ?? ''}
    }
  }
}
`;
  const configFile = join(prefix, 'nginx.conf');
  writeFileSync(configFile, config);
  const check = spawnSync(NGINX_BINARY, ['-p', prefix, '-c', configFile, '-t'], { encoding: 'utf8' });
  if (check.status !== 0) throw new Error(`nginx refused its configuration: ${check.stderr}`);
  // In the foreground (daemon off, no master): the child is nginx itself, stopped by its pid.
  const child = spawn(NGINX_BINARY, ['-p', prefix, '-c', configFile], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    await waitForPort(port);
  } catch (error) {
    child.kill('SIGKILL');
    throw new Error(`${(error as Error).message}: ${stderr}`);
  }
  const errorLogFile = join(prefix, 'logs', 'error.log');
  return {
    port,
    errorLog: () => (existsSync(errorLogFile) ? readFileSync(errorLogFile, 'utf8') : '') + stderr,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGQUIT');
      await exited;
      rmSync(prefix, { recursive: true, force: true });
    },
  };
}
