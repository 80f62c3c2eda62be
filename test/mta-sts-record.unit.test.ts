// The `_mta-sts` TXT record grammar of RFC 8461 3.1 as infra/mail/mta-sts-record.ts reads it.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { MAX_STS_RECORD_LENGTH, readStsRecords } from '../infra/mail/mta-sts-record.ts';

const test = suite('_mta-sts records (RFC 8461 3.1)');

test('given a record with an id, blanks around delimiters, extension fields or a trailing delimiter, when read, then its id is the policy id', () => {
  const cases: Array<[string, string]> = [
    ['v=STSv1; id=20160831085700Z;', '20160831085700Z'],
    ['v=STSv1;id=abc', 'abc'],
    ['v=STSv1 ;\tid=a1 ; ext=x:y ;  ', 'a1'],
    ['v=STSv1; ext.name-1_=v; id=1; id=2', '1'],
    [`v=STSv1; id=${'a'.repeat(32)}`, 'a'.repeat(32)],
  ];
  for (const [record, id] of cases) assert.equal(readStsRecords([record]), { kind: 'id', id }, record);
});

test('given a record that breaks the grammar, when read, then it is invalid: the domain has no available policy', () => {
  for (const record of [
    'v=STSv1;', // no id
    'v=STSv1; id=', // an empty id
    'v=STSv1; id=2016-08-31', // an id of letters and digits only
    `v=STSv1; id=${'a'.repeat(33)}`, // 32 at most
    'v=STSv1; id=1;; ext=x', // an empty field
    'v=STSv1; id=1; ext', // a field without "="
    'v=STSv1; id=1; ext=a=b', // "=" in a value
    'v=STSv1; id=1; -ext=x', // a name begins with a letter or digit
    'v=STSv1; id=1; id=2-2', // a repeated id must be well formed too
  ]) {
    assert.equal(readStsRecords([record]), { kind: 'invalid' }, record);
  }
});

test(`given a record longer than ${MAX_STS_RECORD_LENGTH} characters, when read, then it is invalid; one of ${MAX_STS_RECORD_LENGTH} is read`, () => {
  const record = (length: number) => {
    const head = 'v=STSv1; id=1; x=';
    return head + 'y'.repeat(length - head.length);
  };
  assert.equal(readStsRecords([record(MAX_STS_RECORD_LENGTH)]), { kind: 'id', id: '1' });
  assert.equal(readStsRecords([record(MAX_STS_RECORD_LENGTH + 1)]), { kind: 'invalid' });
  assert.equal(readStsRecords([`v=STSv1; id=1; a${' '.repeat(64_000)}x;`]), { kind: 'invalid' });
});

test('given several TXT records, when read, then only those beginning "v=STSv1;" count, and two of them are no policy', () => {
  assert.equal(readStsRecords(['google-site-verification=x', 'v=STSv1; id=1', 'V=STSv1; id=2', ' v=STSv1; id=3']), { kind: 'id', id: '1' });
  assert.equal(readStsRecords(['v=STSv1; id=1', 'v=STSv1 ; id=2']), { kind: 'several', count: 2 });
  assert.equal(readStsRecords(['v=spf1 -all']), { kind: 'none' });
  assert.equal(readStsRecords([]), { kind: 'none' });
});

test.run();
