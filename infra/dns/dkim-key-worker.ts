// The DKIM key thread (./dkim-keys.ts generateDkimKeyPairOnThread): the RSA key made
// synchronously, here, on this thread's own core, so it never takes a slot of libuv's thread pool.
import { generateKeyPairSync } from 'node:crypto';
import { workerTask } from '../threads/worker-queue.ts';
import { rsaKeyOptions, type DkimKeyHalves, type DkimKeyJob } from './dkim-keys.ts';

export default workerTask<DkimKeyJob, DkimKeyHalves>(({ modulusLength }) => {
  const { publicKey, privateKey } = generateKeyPairSync('rsa', rsaKeyOptions(modulusLength));
  return { privateKeyPem: privateKey, publicKeyBase64: publicKey.toString('base64') };
});
