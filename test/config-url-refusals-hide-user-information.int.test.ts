// A start refused for a store or smarthost URL (exit 78, the message on stderr) never repeats the
// URL's user information, also when an unescaped "?", "#" or "/" in a user name or password cuts
// it short: the WHATWG parser then reads "user:4711?<rest>@host" as host "user", port 4711 and
// the query "<rest>@host", and the refusal quotes no query key or value, fragment, host or port
// of such a URL; it says an "@" follows the host and which characters to percent-encode. Covered:
// RELAY_SMTP_URL (a "?" in the password or the user name, a "#" in the password, a scheme other
// than smtp), RELAY_EVENTSTORE_URL (a "?" in the password), RELAY_MONGODB_URL (a "?" in the user
// name, which the driver's own message quotes) and RELAY_KAFKA_BROKERS given a URL with user
// information. What is printed on stderr goes to the service manager's journal, the container
// log, the CI log (docs/configuration.md: a refusal never repeats a URL variable's value).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { describeOutcome, startOutcome } from './support/start-outcome.ts';

const test = suite('a refused store or smarthost URL never repeats its user information');

/** Parts of the secret a refusal must never show (any 6 characters of it would already be a leak). */
function leakedParts(output: string, secret: string): string[] {
  const parts: string[] = [];
  for (let at = 0; at + 6 <= secret.length; at++) {
    const part = secret.slice(at, at + 6);
    if (output.includes(part)) parts.push(part);
  }
  return parts;
}

async function refusal(env: Record<string, string>): Promise<string> {
  const result = await startOutcome(['api'], env);
  assert.is(result.outcome, 'exited', describeOutcome(result));
  if (result.outcome !== 'exited') return '';
  assert.is(result.code, 78, describeOutcome(result));
  return result.output;
}

const cases: Array<[string, string, string, string, RegExp]> = [
  // [what, variable, value, secret that must not show, what the refusal says]
  ['a "?" in the password', 'RELAY_SMTP_URL', 'smtp://relay:4711?Qm8vT2xkLzNpRkc@smtp.example.net:587', '4711?Qm8vT2xkLzNpRkc', /"@" after its host.*percent-encoded/],
  ['a "?" in the user name', 'RELAY_SMTP_URL', 'smtp://mail?sender:Zx9kWq3LmTr7Vb@smtp.example.net:587', 'mail?sender:Zx9kWq3LmTr7Vb', /"@" after its host.*percent-encoded/],
  ['a "#" in the password', 'RELAY_SMTP_URL', 'smtp://relay:4711#Kd83nVq2PxTe@smtp.example.net:587', '4711#Kd83nVq2PxTe', /"@" after its host.*percent-encoded/],
  ['a "?" in the password and another scheme', 'RELAY_SMTP_URL', 'smtpx://mailer:47119?Wm2RtXq8Ln@smtp.example.net:587', 'mailer:47119?Wm2RtXq8Ln', /must use smtp or smtps.*"@" after its host/],
  ['a "?" in the password', 'RELAY_EVENTSTORE_URL', 'esdb://admin:2113?Hq7RtYp4WsNe@esdb.example.net:2113', '2113?Hq7RtYp4WsNe', /"@" after its host.*percent-encoded/],
  ['a "?" in the user name', 'RELAY_MONGODB_URL', 'mongodb://rel?ay-admin:Tq4WnXp7ZkRe@mongo.example.net:27017/relay', 'rel?ay-admin:Tq4WnXp7ZkRe', /unescaped characters.*percent-encoded/],
  ['a URL with user information', 'RELAY_KAFKA_BROKERS', 'kafka://kafkauser:Pz5XcVb9NmQw@kafka.example.net:9092', 'kafkauser:Pz5XcVb9NmQw', /no URL scheme or user information/],
];

for (const [what, variable, value, secret, says] of cases) {
  test(`${variable} with ${what}: the refusal names the variable and repeats none of its user information`, async () => {
    const output = await refusal({ [variable]: value });
    assert.match(output, new RegExp(`${variable}: `), output);
    assert.equal(leakedParts(output, secret), [], `the refusal repeats the user information of ${variable}:\n${output}`);
    assert.match(output, says, output);
  });
}

test.run();
