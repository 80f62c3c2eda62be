// An instance's name (RELAY_INSTANCE_ID, else the host name): the same across the instance's
// restarts, distinct between instances of one part. It ends the Kafka client id
// (`relay/<instance>`), which the broker shows for each member of a consumer group, so that a
// restarted instance recognises the member its crashed predecessor left behind
// (infra/kafka/log.ts, waitForEarlierSelf). Apart from the adapter, so that reading the
// configuration does not load kafkajs.
import { hostname } from 'node:os';

/** What a name may be: 1 to 128 letters, digits, '.', '_', '@' and '-', starting with a letter or digit. */
export const INSTANCE_NAME = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$/;

/** What RELAY_INSTANCE_ID accepts, said in its refusal. */
export const INSTANCE_NAME_RULE = '1 to 128 letters, digits, ".", "_", "@" and "-", starting with a letter or digit';

/**
 * The host name as an instance name: a restarted container keeps its pod's (or its container's)
 * host name, a restarted systemd unit its host's. Characters a name may not hold become '-'.
 */
export function defaultInstanceName(host: string = hostname()): string {
  const name = host.replace(/[^A-Za-z0-9._@-]/g, '-').replace(/^[^A-Za-z0-9]+/, '').slice(0, 128);
  return name === '' ? 'relay' : name;
}
