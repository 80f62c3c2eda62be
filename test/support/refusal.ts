// Catching the RelayError a piece of domain code must throw, to assert on its code and message.
import * as assert from 'uvu/assert';
import { RelayError } from '../../domain/errors.ts';

export function refusal(work: () => unknown): RelayError {
  try {
    work();
  } catch (error) {
    assert.instance(error, RelayError);
    return error as RelayError;
  }
  assert.unreachable('expected a RelayError');
  throw new Error('unreachable');
}
