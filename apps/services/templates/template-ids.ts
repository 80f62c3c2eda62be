// Template ids sort by creation time: the list is newest first by `_id` alone, so a cursor is
// just the last id seen and stays valid even after that template is deleted.
import { randomBytes } from 'node:crypto';

// Crockford's alphabet is in ASCII order, so the text sorts as the number does.
const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';
const RANDOM_BITS = 80n;

function encode(value: bigint, length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) {
    out = ALPHABET[Number(value & 31n)] + out;
    value >>= 5n;
  }
  return out;
}

let lastTime = -1;
let lastRandom = 0n;

/**
 * "tpl_" + 10 characters of milliseconds + 16 characters (80 bits) that are random for a new
 * millisecond and one higher for each further id in the same one, so ids made by one process
 * keep their order even within a millisecond (or when the clock steps back).
 */
export function newTemplateId(now: Date): string {
  let time = now.getTime();
  let random: bigint;
  if (time <= lastTime) {
    time = lastTime;
    random = lastRandom + 1n;
    if (random >> RANDOM_BITS) {
      time += 1;
      random = BigInt(`0x${randomBytes(10).toString('hex')}`) >> 1n;
    }
  } else {
    // Top bit clear: room to count up within the millisecond.
    random = BigInt(`0x${randomBytes(10).toString('hex')}`) >> 1n;
  }
  lastTime = time;
  lastRandom = random;
  return `tpl_${encode(BigInt(time), 10)}${encode(random, 16)}`;
}
