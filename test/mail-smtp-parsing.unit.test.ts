// RELAY_SMTP_URL rules and the reading of SMTP replies (codes, enhanced codes, queue ids).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { parseQueueId, parseSmtpReply, peerTextForLog } from '../infra/mail/smtp-replies.ts';
import { isLoopbackHost, parseSmtpUrl } from '../infra/mail/smtp-transport.ts';

const url = suite('RELAY_SMTP_URL');

url('smtp:// means STARTTLS required, default port 587, credentials percent-decoded', () => {
  assert.equal(parseSmtpUrl('smtp://us%40er:p%3Ass%2Fw%20rd@smtp.example.com'), {
    host: 'smtp.example.com', port: 587, tls: 'starttls', user: 'us@er', pass: 'p:ss/w rd',
  });
  assert.equal(parseSmtpUrl('smtp://mail.example.com:2587').port, 2587);
});

url('smtps:// means TLS from the first byte, default port 465', () => {
  assert.equal(parseSmtpUrl('smtps://relay.example.com'), { host: 'relay.example.com', port: 465, tls: 'implicit', user: null, pass: null });
});

url('tls=none is plain text, allowed only to a loopback host', () => {
  for (const host of ['127.0.0.1', '127.9.8.7', 'localhost', '[::1]']) {
    assert.is(parseSmtpUrl(`smtp://${host}:2525?tls=none`).tls, 'none', host);
  }
  for (const host of ['10.0.0.1', 'smtp.example.com', '[2001:db8::1]', '128.0.0.1', 'localhost.example.com']) {
    assert.throws(() => parseSmtpUrl(`smtp://${host}:25?tls=none`), /RELAY_SMTP_URL.*only allowed to a loopback host/, host);
  }
});

url('a loopback host without tls=none still requires STARTTLS', () => {
  assert.is(parseSmtpUrl('smtp://127.0.0.1:2525').tls, 'starttls');
});

url('refusals name RELAY_SMTP_URL and never echo the password', () => {
  const cases = [
    'http://user:s3cret@host',
    'smtps://user:s3cret@127.0.0.1?tls=none',
    'smtp://user:s3cret@host?tls=off',
    'smtp://user:s3cret@host?foo=bar',
    'smtp://user:s3cret@host/path',
    'not a url s3cret',
  ];
  for (const value of cases) {
    try {
      parseSmtpUrl(value);
      assert.unreachable(value);
    } catch (error) {
      const message = (error as Error).message;
      assert.match(message, /^RELAY_SMTP_URL /, value);
      assert.not.match(message, /s3cret/, value);
    }
  }
});

url('loopback detection', () => {
  assert.ok(isLoopbackHost('127.0.0.1'));
  assert.ok(isLoopbackHost('::1'));
  assert.ok(isLoopbackHost('[::ffff:7f00:1]'));
  assert.ok(isLoopbackHost('LOCALHOST'));
  assert.not.ok(isLoopbackHost('192.168.1.1'));
  assert.not.ok(isLoopbackHost('::2'));
});

url.run();

const replies = suite('SMTP replies');

replies('code and enhanced status code', () => {
  assert.equal(parseSmtpReply('550 5.1.1 <x@y> User unknown'), { code: 550, enhancedCode: '5.1.1', text: '550 5.1.1 <x@y> User unknown' });
  assert.equal(parseSmtpReply('451 Try again later'), { code: 451, enhancedCode: null, text: '451 Try again later' });
  assert.equal(parseSmtpReply('550-5.7.1 first line\n550 5.7.1 second line').enhancedCode, '5.7.1');
  assert.equal(parseSmtpReply('250 2.0.0 Ok').code, 250);
  assert.equal(parseSmtpReply('connection refused'), { code: null, enhancedCode: null, text: 'connection refused' });
});

replies('lines, blank lines and indents folded into one line; whitespace within a line kept', () => {
  assert.is(parseSmtpReply('  550-5.7.1 first line   \r\n550-\r\n\r\n   \n550-   \t indented\r\n550 5.7.1 last \r\n').text, '550-5.7.1 first line 550- 550-   \t indented 550 5.7.1 last');
  assert.is(parseSmtpReply('550 a\rb').text, '550 a\rb');
});

replies('only the first few KB of a reply are read, however it is shaped', () => {
  const spaces = ' '.repeat(1024 * 1024);
  const parsed = parseSmtpReply(`550 5.1.1 <ann@x.test>${spaces}User unknown\r\n`);
  assert.equal({ code: parsed.code, enhancedCode: parsed.enhancedCode, text: parsed.text }, { code: 550, enhancedCode: '5.1.1', text: '550 5.1.1 <ann@x.test>' });
  const lines = parseSmtpReply(`451-4.7.1 ${'x'.repeat(990)}\n`.repeat(1000) + '451 4.7.1 end');
  assert.is(lines.enhancedCode, '4.7.1');
  assert.ok(lines.text.length <= 4096, `${lines.text.length} characters of text`);
});

replies('a peer\'s text for a log field: bounded, control characters made spaces', () => {
  assert.is(peerTextForLog('550 5.1.1 no such user'), '550 5.1.1 no such user');
  assert.is(peerTextForLog('554-a\n554-{"msg":"forged"}\r\n\u001b[31mred\u0085\u2028\u202e'), '554-a 554-{"msg":"forged"}   [31mred   ');
  const long = peerTextForLog(`554 ${'A'.repeat(100_000)}`);
  assert.is(long.length, 301);
  assert.ok(long.endsWith('A…'));
  // A pair cut in two leaves no lone surrogate.
  assert.is(peerTextForLog(`${'a'.repeat(299)}😀😀`), `${'a'.repeat(299)}…`);
});

replies('queue ids named in common 250 replies', () => {
  const cases: Array<[string, string | null]> = [
    ['250 2.0.0 Ok: queued as 4F2A1B', '4F2A1B'],
    ['250 Ok: queued as 3XyZ12bCdz4', '3XyZ12bCdz4'],
    ['250 OK id=1rABCD-0004xY-1Z', '1rABCD-0004xY-1Z'],
    ['250 2.0.0 <20240101.abc@mail.example> Message accepted for delivery', '20240101.abc@mail.example'],
    ['250 2.0.0 OK <AB12@BN8PR.prod.outlook.com> [Hostname=BN8PR]', 'AB12@BN8PR.prod.outlook.com'],
    ['250 2.0.0 u7SKj3Gx012345 Message accepted for delivery', 'u7SKj3Gx012345'],
    ['250 Ok 0100018b5c3c0a4f-1b2c3d4e-000000', '0100018b5c3c0a4f-1b2c3d4e-000000'],
    ['250 OK: message queued', null],
    ['250 Accepted', null],
    ['451 4.3.0 queued as NOPE', null],
  ];
  for (const [reply, id] of cases) assert.is(parseQueueId(reply), id, reply);
});

replies.run();
