// A bare SMTP client over a socket, for what nodemailer will not do on purpose: pipelining a
// hundred commands, trickling DATA, idling with NOOPs, connecting from a chosen loopback address
// (127.0.0.0/8 is all this machine), and reading every reply as the server wrote it.
import { connect, type Socket } from 'node:net';

export interface SmtpReply {
  code: number;
  /** Every line of the reply, without the code and separator. */
  lines: string[];
  /** The reply as received, lines joined by "\n". */
  text: string;
}

export class SmtpSession {
  readonly socket: Socket;
  readonly #replies: SmtpReply[] = [];
  readonly #waiters: Array<(reply: SmtpReply | null) => void> = [];
  #buffer = '';
  #pending: string[] = [];
  #closed = false;

  private constructor(socket: Socket) {
    this.socket = socket;
    socket.setEncoding('latin1');
    socket.on('data', (text: string) => this.#read(text));
    socket.on('error', () => {});
    socket.on('close', () => {
      this.#closed = true;
      for (const waiter of this.#waiters.splice(0)) waiter(null);
    });
  }

  /** Connects and waits for the greeting (or the refusal the server answers instead). */
  static async open(port: number, options: { localAddress?: string } = {}): Promise<{ session: SmtpSession; greeting: SmtpReply }> {
    const socket = connect({ port, host: '127.0.0.1', localAddress: options.localAddress });
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    const session = new SmtpSession(socket);
    const greeting = await session.reply();
    return { session, greeting };
  }

  /** Writes lines (each ended with CRLF) without waiting for replies. */
  write(...lines: string[]): void {
    this.socket.write(lines.map((line) => `${line}\r\n`).join(''));
  }

  /** The next reply; rejects when the connection closes first. */
  async reply(): Promise<SmtpReply> {
    const next = this.#replies.shift() ?? (this.#closed ? null : await new Promise<SmtpReply | null>((resolve) => this.#waiters.push(resolve)));
    if (!next) throw new Error('the connection closed before a reply');
    return next;
  }

  /** Writes one command and returns its reply. */
  async command(line: string): Promise<SmtpReply> {
    this.write(line);
    return this.reply();
  }

  /** Resolves once the server has closed the connection. */
  closed(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    return new Promise((resolve) => this.socket.once('close', () => resolve()));
  }

  get isClosed(): boolean {
    return this.#closed;
  }

  close(): void {
    this.socket.destroy();
  }

  #read(text: string): void {
    this.#buffer += text;
    let end: number;
    while ((end = this.#buffer.indexOf('\r\n')) >= 0) {
      const line = this.#buffer.slice(0, end);
      this.#buffer = this.#buffer.slice(end + 2);
      this.#pending.push(line);
      if (line[3] === '-') continue;
      const reply: SmtpReply = { code: Number(line.slice(0, 3)), lines: this.#pending.map((l) => l.slice(4)), text: this.#pending.join('\n') };
      this.#pending = [];
      const waiter = this.#waiters.shift();
      if (waiter) waiter(reply);
      else this.#replies.push(reply);
    }
  }
}

/** A report as DATA lines: dot-stuffed, ended with the lone dot. */
export function dataLines(raw: string): string[] {
  return [...raw.replace(/\r?\n$/, '').split(/\r?\n/).map((line) => (line.startsWith('.') ? `.${line}` : line)), '.'];
}
