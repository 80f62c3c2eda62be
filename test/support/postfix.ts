// A private, real Postfix for interoperability tests: its own main.cf and master.cf in a temporary
// directory (`postfix -c <dir> start`), its own queue and data directories, its own log file, no
// chroot, smtpd listening only on 127.0.0.1 at free high ports (one listener per name, each with
// its own `-o` overrides), local delivery by virtual(8) into maildirs the test reads. It never
// reads or writes the system instance's configuration (/etc/postfix/main.cf), so several test
// files can each run one at the same time. Needs Debian's postfix package (`/usr/sbin/postfix`)
// and root (postfix(1) starts master as root, which then runs as the `postfix` user).
import { execFile as execFileCallback, execFileSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { waitUntil } from './eventually.ts';
import { freePort } from './free-port.ts';

const execFile = promisify(execFileCallback);

export const POSTFIX_BINARY = '/usr/sbin/postfix';

/** Why a Postfix suite cannot run here, or undefined when it can. */
export function postfixMissing(): string | undefined {
  if (!existsSync(POSTFIX_BINARY)) return `${POSTFIX_BINARY} is not installed (Debian: apt-get install postfix; .ci/run installs it)`;
  return undefined;
}

export interface PostfixOptions {
  /** myhostname: the name in its greeting, Received headers and bounces. */
  hostname: string;
  /** Addresses with a maildir (virtual(8) delivery); their domains are virtual_mailbox_domains. */
  mailboxes?: string[];
  /**
   * main.cf settings added to (or replacing) the defaults below; `{dir}` in a value is the
   * instance's directory (for maps written with `files`).
   */
  main?: Record<string, string>;
  /** smtpd listeners on 127.0.0.1, by name, each with its `-o` overrides. Default one: `smtp`. */
  listeners?: Record<string, Record<string, string>>;
  /** Ports chosen beforehand for some listeners (a process that must know them before the start); the others get free ones. */
  ports?: Record<string, number>;
  /** Files written under the instance's directory before the start (maps: `texthash:{dir}/name`). */
  files?: Record<string, string>;
  /** smtpd's certificate and key (PEM): STARTTLS is then offered (smtpd_tls_security_level = may). */
  tls?: { cert: string | Buffer; key: string | Buffer };
}

export interface PostfixInstance {
  dir: string;
  hostname: string;
  /** The port of each smtpd listener, by name. */
  ports: Record<string, number>;
  /** The messages delivered to a mailbox so far, oldest first, as stored (Return-Path, Delivered-To and all). */
  mailbox(address: string): Buffer[];
  /** The instance's log so far (maillog_file). */
  log(): string;
  /** Waits until a line of the log matches; returns that line. */
  waitForLog(pattern: RegExp, what: string, timeoutMs?: number): Promise<string>;
  stop(): Promise<void>;
}

const SERVICES = `
pickup    unix  n       -       n       60      1       pickup
cleanup   unix  n       -       n       -       0       cleanup
qmgr      unix  n       -       n       300     1       qmgr
tlsmgr    unix  -       -       n       1000?   1       tlsmgr
rewrite   unix  -       -       n       -       -       trivial-rewrite
bounce    unix  -       -       n       -       0       bounce
defer     unix  -       -       n       -       0       bounce
trace     unix  -       -       n       -       0       bounce
verify    unix  -       -       n       -       1       verify
flush     unix  n       -       n       1000?   0       flush
proxymap  unix  -       -       n       -       -       proxymap
proxywrite unix -       -       n       -       1       proxymap
smtp      unix  -       -       n       -       -       smtp
relay     unix  -       -       n       -       -       smtp
showq     unix  n       -       n       -       -       showq
error     unix  -       -       n       -       -       error
retry     unix  -       -       n       -       -       error
discard   unix  -       -       n       -       -       discard
local     unix  -       n       n       -       -       local
virtual   unix  -       n       n       -       -       virtual
lmtp      unix  -       -       n       -       -       lmtp
anvil     unix  -       -       n       -       1       anvil
scache    unix  -       -       n       -       1       scache
postlog   unix-dgram n  -       n       -       1       postlogd
`;

function idOf(flag: '-u' | '-g', user: string): number {
  return Number(execFileSync('id', [flag, user], { encoding: 'utf8' }).trim());
}

function domainOf(address: string): string {
  return address.slice(address.lastIndexOf('@') + 1).toLowerCase();
}

function localOf(address: string): string {
  return address.slice(0, address.lastIndexOf('@'));
}

/** The 220 greeting on a port: the listener is up. */
function greets(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let data = '';
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(2000, () => done(false));
    socket.on('error', () => done(false));
    socket.on('data', (chunk) => {
      data += chunk.toString('latin1');
      if (data.includes('\n')) {
        socket.write('QUIT\r\n');
        done(data.startsWith('220'));
      }
    });
  });
}

export async function startPostfix(options: PostfixOptions): Promise<PostfixInstance> {
  const dir = mkdtempSync(join(tmpdir(), 'relay-postfix-'));
  // master and its daemons run as the postfix user: they must reach every directory below.
  chmodSync(dir, 0o755);
  const postfixUid = idOf('-u', 'postfix');
  const postfixGid = idOf('-g', 'postfix');
  const conf = join(dir, 'conf');
  const queue = join(dir, 'queue');
  const data = join(dir, 'data');
  const mail = join(dir, 'mail');
  for (const sub of [conf, queue, data, mail]) mkdirSync(sub, { mode: 0o755 });
  chownSync(data, postfixUid, postfixGid);
  // virtual(8) writes the maildirs as this user (virtual_uid_maps).
  chownSync(mail, postfixUid, postfixGid);
  const maillog = join(dir, 'maillog');
  const expand = (value: string) => value.replaceAll('{dir}', dir);
  for (const [name, content] of Object.entries(options.files ?? {})) writeFileSync(join(dir, name), content);

  const mailboxes = options.mailboxes ?? [];
  writeFileSync(join(dir, 'mailboxes'), mailboxes.map((a) => `${a.toLowerCase()} ${domainOf(a)}/${localOf(a)}/\n`).join(''));
  const main: Record<string, string> = {
    compatibility_level: '3.6',
    queue_directory: queue,
    data_directory: data,
    maillog_file: maillog,
    maillog_file_prefixes: dir,
    inet_interfaces: '127.0.0.1',
    inet_protocols: 'ipv4',
    myhostname: options.hostname,
    mydomain: options.hostname.split('.').slice(1).join('.') || options.hostname,
    myorigin: '$myhostname',
    mydestination: '',
    mynetworks: '127.0.0.0/8',
    smtpd_banner: '$myhostname ESMTP Postfix',
    biff: 'no',
    alias_maps: '',
    alias_database: '',
    virtual_mailbox_domains: [...new Set(mailboxes.map(domainOf))].join(' '),
    virtual_mailbox_base: mail,
    virtual_mailbox_maps: `texthash:${join(dir, 'mailboxes')}`,
    virtual_uid_maps: `static:${postfixUid}`,
    virtual_gid_maps: `static:${postfixGid}`,
    // Nothing leaves this instance except where a test's transport_maps sends it.
    default_transport: 'error:5.4.4 this test Postfix delivers nowhere else',
    // A message waits in the deferred queue only seconds between tries.
    queue_run_delay: '1s',
    minimal_backoff_time: '1s',
    maximal_backoff_time: '2s',
  };
  if (options.tls) {
    mkdirSync(join(dir, 'tls'), { mode: 0o755 });
    writeFileSync(join(dir, 'tls', 'cert.pem'), options.tls.cert);
    writeFileSync(join(dir, 'tls', 'key.pem'), options.tls.key, { mode: 0o600 });
    Object.assign(main, {
      smtpd_tls_security_level: 'may',
      smtpd_tls_cert_file: join(dir, 'tls', 'cert.pem'),
      smtpd_tls_key_file: join(dir, 'tls', 'key.pem'),
      smtpd_tls_loglevel: '1',
      smtpd_tls_received_header: 'yes',
    });
  }
  for (const [key, value] of Object.entries(options.main ?? {})) main[key] = expand(value);
  writeFileSync(join(conf, 'main.cf'), Object.entries(main).map(([k, v]) => `${k} = ${v}\n`).join(''));

  const ports: Record<string, number> = {};
  const listeners = options.listeners ?? { smtp: {} };
  let master = '';
  for (const [name, overrides] of Object.entries(listeners)) {
    const port = options.ports?.[name] ?? await freePort();
    ports[name] = port;
    master += `127.0.0.1:${port} inet n - n - - smtpd\n  -o syslog_name=postfix/${name}\n`;
    for (const [key, value] of Object.entries(overrides)) master += `  -o ${key}=${expand(value)}\n`;
  }
  writeFileSync(join(conf, 'master.cf'), master + SERVICES);

  const instance: PostfixInstance = {
    dir,
    hostname: options.hostname,
    ports,
    mailbox(address) {
      const box = join(mail, domainOf(address), localOf(address));
      const files: string[] = [];
      for (const sub of ['new', 'cur']) {
        const at = join(box, sub);
        if (!existsSync(at)) continue;
        for (const name of readdirSync(at)) files.push(join(at, name));
      }
      // Maildir names start with the delivery time in seconds and a sequence: sorted, oldest first.
      return files.sort().map((file) => readFileSync(file));
    },
    log: () => (existsSync(maillog) ? readFileSync(maillog, 'utf8') : ''),
    async waitForLog(pattern, what, timeoutMs = 20_000) {
      let line: string | undefined;
      try {
        await waitUntil(() => (line = instance.log().split('\n').find((l) => pattern.test(l))) !== undefined, `the Postfix log shows ${what}`, timeoutMs);
      } catch (error) {
        throw new Error(`${(error as Error).message}; log:\n${instance.log().split('\n').slice(-30).join('\n')}`);
      }
      return line!;
    },
    async stop() {
      const pidFile = join(queue, 'pid', 'master.pid');
      const pid = existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8').trim()) : NaN;
      await execFile(POSTFIX_BINARY, ['-c', conf, 'stop']).catch(() => {});
      const alive = () => {
        try {
          process.kill(pid, 0);
          return true;
        } catch {
          return false;
        }
      };
      if (Number.isInteger(pid) && pid > 0) await waitUntil(() => !alive(), `Postfix master ${pid} exited`, 20_000).catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };

  try {
    await execFile(POSTFIX_BINARY, ['-c', conf, 'start']);
  } catch (error) {
    const log = instance.log();
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`postfix -c ${conf} start failed: ${(error as Error).message}\n${log}`);
  }
  try {
    for (const port of Object.values(ports)) await waitUntil(() => greets(port), `Postfix answers on port ${port}`, 20_000);
  } catch (error) {
    const log = instance.log();
    await instance.stop();
    throw new Error(`${(error as Error).message}\n${log}`);
  }
  return instance;
}
