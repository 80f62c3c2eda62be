// A raw SMTP server on loopback whose replies a test writes byte for byte, for replies
// smtp-server will not send: one line of any length, control characters, hundreds of lines.
// Every command not scripted is answered "250 ok"; DATA takes the message whole.
import net from 'node:net';

export interface SmtpScript {
  /** The reply to RCPT TO, CRLFs included. */
  rcpt?: string;
  /** The reply to the end-of-data dot. Default "250 2.0.0 queued as Q1". */
  endOfData?: string;
  /** The reply to RSET. */
  rset?: string;
}

export interface ScriptedSmtp {
  port: number;
  /** Connections accepted so far. */
  connections(): number;
  close(): void;
}

export async function startScriptedSmtp(script: SmtpScript): Promise<ScriptedSmtp> {
  const sockets = new Set<net.Socket>();
  let connections = 0;
  const server = net.createServer((socket) => {
    connections++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    socket.write('220 scripted.test ESMTP\r\n');
    let inData = false;
    let buffered = '';
    socket.on('data', (chunk) => {
      buffered += chunk.toString('latin1');
      for (;;) {
        if (inData) {
          const end = buffered.indexOf('\r\n.\r\n');
          if (end < 0) return;
          buffered = buffered.slice(end + 5);
          inData = false;
          socket.write(script.endOfData ?? '250 2.0.0 queued as Q1\r\n');
          continue;
        }
        const eol = buffered.indexOf('\r\n');
        if (eol < 0) return;
        const verb = buffered.slice(0, 4).toUpperCase();
        buffered = buffered.slice(eol + 2);
        if (verb === 'EHLO') socket.write('250-scripted.test\r\n250 8BITMIME\r\n');
        else if (verb === 'DATA') {
          inData = true;
          socket.write('354 go ahead\r\n');
        } else if (verb === 'RCPT' && script.rcpt) socket.write(script.rcpt);
        else if (verb === 'RSET' && script.rset) socket.write(script.rset);
        else if (verb === 'QUIT') socket.end('221 bye\r\n');
        else socket.write('250 ok\r\n');
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    connections: () => connections,
    close: () => {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}
