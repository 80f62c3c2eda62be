// The password-hashing thread (./scrypt-thread.ts): scrypt computed synchronously, here, on this
// thread's own core, so it never takes a slot of libuv's thread pool.
import { scryptSync } from 'node:crypto';
import { workerTask } from '../threads/worker-queue.ts';
import type { ScryptJob } from './scrypt-thread.ts';

export default workerTask<ScryptJob, Uint8Array>(({ password, salt, length, N, r, p, maxmem }) =>
  // A copy of its own: a small Buffer is a view of Node's shared pool.
  Uint8Array.prototype.slice.call(scryptSync(password, salt, length, { N, r, p, maxmem })));
