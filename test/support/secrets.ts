// Relay's secret as the processes on a data directory load it (the key file they share), for
// fixtures that seal what those processes must open (DKIM keys of domains made by tests).
import { loadSecretKeys, SecretBox } from '../../infra/secrets/secret-box.ts';

export async function secretsOf(dataDir: string): Promise<SecretBox> {
  return new SecretBox(await loadSecretKeys({ dataDir }));
}
