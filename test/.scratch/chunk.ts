import Fastify from 'fastify';
import { connect } from 'node:net';
const app = Fastify({ bodyLimit: 10 * 1024 * 1024 });
app.post('/x', async () => ({ ok: true }));
const url = await app.listen({ port: 0, host: '127.0.0.1' });
const port = Number(new URL(url).port);
const s = connect(port, '127.0.0.1');
let written = 0; let text = '';
s.on('data', (d) => { text += d; console.log('data after', written, JSON.stringify(String(d).slice(0, 200))); });
s.on('error', (e) => console.log('error', e.message, 'written', written));
s.on('close', () => { console.log('close; written', written, 'text', text.length); app.close(); });
s.on('connect', () => {
  s.write('POST /x HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n');
  const chunk = Buffer.alloc(256 * 1024, 'a');
  const pump = () => { while (written < 20 * 1024 * 1024 && !s.destroyed) { written += chunk.length; if (!s.write(`${chunk.length.toString(16)}\r\n${chunk.toString('latin1')}\r\n`)) return void s.once('drain', () => setTimeout(pump, 5)); } };
  pump();
});
