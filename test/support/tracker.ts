// A plain HTTP server that counts the requests it gets by path: the evidence that a remote
// image was (or was not) fetched, or that a script in a message ran.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** The smallest transparent PNG. */
const PIXEL = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64');

export interface Tracker {
  base: string;
  count(path: string): number;
  close(): Promise<void>;
}

export async function startTracker(): Promise<Tracker> {
  const counts = new Map<string, number>();
  const server = createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    counts.set(path, (counts.get(path) ?? 0) + 1);
    if (path.endsWith('.png')) response.writeHead(200, { 'content-type': 'image/png', 'cache-control': 'no-store' }).end(PIXEL);
    else response.writeHead(204).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    count: (path) => counts.get(path) ?? 0,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
