// A raw SMTP server whose replies a test writes byte for byte, for what smtp-server will not
// do: one reply line of any length, control characters, hundreds of lines, a 421 or a dropped
// connection at a chosen command, a reply held back, a connection closed as the body arrives.
// A reply is written as given, with a CRLF added unless it ends with one; after a 421 the
// connection is closed. Commands not scripted get the usual positive reply; the script may be
// changed between transactions (`server.script = …`).
import net from 'node:net';

/** A reply, `drop` (the connection closed without one) or `silent` (no reply ever). */
export type Answer = string | 'drop' | 'silent';

export interface SmtpScript {
  mail?: Answer;
  rcpt?: Answer;
  /** Default 354: the body follows. */
  data?: Answer;
  /** `drop`: the connection is closed as the first bytes of the body arrive. */
  body?: 'drop';
  /** The reply to the end-of-data dot. Default "250 2.0.0 queued as Q1". */
  endOfData?: Answer;
  rset?: Answer;
  /** Milliseconds a reply waits before it is written: a slow host, answering inside its deadlines. */
  delays?: { mail?: number; rcpt?: number; data?: number; endOfData?: number };
}

export interface ScriptedSmtp {
  port: number;
  script: SmtpScript;
  /** Connections accepted so far. */
  connections: number;
  /** Body bytes received, over every connection. */
  bodyBytes: number;
  /** Messages answered 250 at the end of data. */
  queued: number;
  close(): void;
}

export async function startScriptedSmtp(script: SmtpScript, where: { host?: string; port?: number; name?: string } = {}): Promise<ScriptedSmtp> {
  const name = where.name ?? 'scripted.test';
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    scripted.connections++;
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    socket.write(`220 ${name} ESMTP\r\n`);
    const answer = (reply: Answer, delayMs = 0) => {
      if (delayMs > 0) {
        setTimeout(() => {
          if (!socket.destroyed && !socket.writableEnded) answer(reply);
        }, delayMs);
        return;
      }
      if (reply === 'drop') socket.destroy();
      else if (reply === 'silent') return;
      else {
        const line = reply.endsWith('\r\n') ? reply : `${reply}\r\n`;
        if (reply.startsWith('421')) socket.end(line);
        else socket.write(line);
      }
    };
    let buffered = '';
    let inData = false;
    socket.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('latin1');
      while (!socket.destroyed && !socket.writableEnded) {
        if (inData) {
          if (buffered === '') return;
          const end = buffered.indexOf('\r\n.\r\n');
          scripted.bodyBytes += end < 0 ? buffered.length : end + 2;
          if (scripted.script.body === 'drop') {
            socket.destroy();
            return;
          }
          if (end < 0) {
            // Kept: the end of data may straddle two chunks.
            buffered = buffered.slice(-4);
            scripted.bodyBytes -= buffered.length;
            return;
          }
          buffered = buffered.slice(end + 5);
          inData = false;
          const reply = scripted.script.endOfData ?? '250 2.0.0 queued as Q1';
          if (reply.startsWith('250')) scripted.queued++;
          answer(reply, scripted.script.delays?.endOfData);
          continue;
        }
        const eol = buffered.indexOf('\r\n');
        if (eol < 0) return;
        const verb = buffered.slice(0, 4).toUpperCase();
        buffered = buffered.slice(eol + 2);
        const { mail, rcpt, data, rset, delays } = scripted.script;
        if (verb === 'EHLO') socket.write(`250-${name}\r\n250 8BITMIME\r\n`);
        else if (verb === 'MAIL') answer(mail ?? '250 2.1.0 Ok', delays?.mail);
        else if (verb === 'RCPT') answer(rcpt ?? '250 2.1.5 Ok', delays?.rcpt);
        else if (verb === 'DATA') {
          const reply = data ?? '354 End data with <CR><LF>.<CR><LF>';
          inData = reply.startsWith('354');
          answer(reply, delays?.data);
        } else if (verb === 'RSET' && rset) answer(rset);
        else if (verb === 'QUIT') socket.end('221 2.0.0 Bye\r\n');
        else socket.write('250 2.0.0 Ok\r\n');
      }
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(where.port ?? 0, where.host ?? '127.0.0.1', resolve);
  });
  const scripted: ScriptedSmtp = {
    port: (server.address() as net.AddressInfo).port,
    script,
    connections: 0,
    bodyBytes: 0,
    queued: 0,
    close: () => {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
  return scripted;
}
