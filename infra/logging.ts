// The process's logger: one JSON object per line for log collectors, or, on a terminal,
// human-readable lines (pino-pretty, in-process and synchronous, so a line is out before the
// process exits). Fields that could carry credentials are censored whatever logs them: the
// code logs none on purpose (test/log-secrets.e2e.test.ts checks a whole lifecycle), and this is
// the net under it.
import pino, { type Logger } from 'pino';
import pretty from 'pino-pretty';
import type { LogFormat } from './config.ts';

export type { Logger };

/** Paths pino censors wherever a log call puts them. */
const REDACTED = [
  'req.headers.authorization', 'req.headers.cookie', 'res.headers["set-cookie"]',
  'headers.authorization', 'headers.cookie', '*.password', 'password', '*.pass', '*.secret', 'secret', '*.apiKey', 'apiKey', '*.token', 'token',
];

export function createLogger(options: { level: string; format: LogFormat; base?: Record<string, unknown> }): Logger {
  const settings = { level: options.level, base: { service: 'relay', ...options.base }, redact: { paths: REDACTED, censor: '[redacted]' } };
  if (options.format === 'json') return pino(settings);
  return pino(settings, pretty({
    sync: true,
    // Colours left to pino-pretty: only on a terminal, and never with NO_COLOR (no-color.org),
    // so `relay start | tee relay.log` writes plain text.
    translateTime: 'SYS:HH:MM:ss.l',
    // The same on every line of a process: noise on a terminal.
    ignore: 'pid,hostname,service',
  }));
}
