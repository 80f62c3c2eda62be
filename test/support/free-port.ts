// A port for a child process (or a server started later) to listen on.
//
// A port the kernel hands out for listen(0) comes from its ephemeral range; once the probe closes
// it, any outgoing connection on the machine (a Kafka client, an HTTP request of another test) may
// take it as its source port before the child binds it, and the child fails with EADDRINUSE. Ports
// just below that range are never handed out as source ports: only another listener can take one.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/** The engines' fixed ports (infra/engines/engines.sh) that fall inside the window. */
const ENGINE_PORTS = new Set([27018, 27019]);
const WINDOW = 12_000;

function ephemeralRangeStart(): number | null {
  try {
    const [low] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    return Number.isInteger(low) && low > WINDOW + 1024 ? low : null;
  } catch {
    return null;
  }
}

const rangeStart = ephemeralRangeStart();

function listenOn(port: number): Promise<number | null> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(null));
    server.listen(port, '127.0.0.1', () => {
      const { port: bound } = server.address() as { port: number };
      server.close(() => resolve(bound));
    });
  });
}

export async function freePort(): Promise<number> {
  if (rangeStart !== null) {
    for (let attempt = 0; attempt < 100; attempt++) {
      const port = rangeStart - 1 - Math.floor(Math.random() * WINDOW);
      if (ENGINE_PORTS.has(port)) continue;
      if (await listenOn(port) === port) return port;
    }
  }
  // No Linux range to stay below (or a crowded window): the kernel's choice.
  const port = await listenOn(0);
  if (port === null) throw new Error('could not find a free port');
  return port;
}
