// domain/email/refusals.ts: one reading of a next hop's permanent refusal for every transport.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { condemnsAddress, nextHopOf, refusalStatus } from '../domain/email/refusals.ts';

const test = suite('refusals from the next hop');

test('given an unknown-user reply at RCPT TO, then the address is condemned whoever the next hop is', () => {
  const reply = { smtpCode: 550, enhancedCode: '5.1.1', response: '550 5.1.1 <ann@example.test>: Recipient address rejected: User unknown', stage: 'rcpt_to' };
  assert.is(refusalStatus(reply, nextHopOf('mx')), 'hard_bounced');
  assert.is(refusalStatus(reply, nextHopOf('smtp')), 'hard_bounced');
});

test('given a class 4 code, a refusal before RCPT or a content refusal after DATA, then the address is not condemned', () => {
  assert.not.ok(condemnsAddress({ smtpCode: 450, enhancedCode: '4.1.1', response: '450 4.1.1 User unknown (soft_bounce)', stage: 'rcpt_to' }));
  assert.not.ok(condemnsAddress({ smtpCode: 553, enhancedCode: null, response: '553 user unknown', stage: 'mail_from' }));
  assert.not.ok(condemnsAddress({ smtpCode: 550, enhancedCode: null, response: '550 no such user', stage: 'data' }));
  assert.ok(condemnsAddress({ smtpCode: 550, enhancedCode: '5.1.1', response: '550 5.1.1 no such user', stage: 'data' }));
});

test('given a reply code apart from its text, then both are read', () => {
  assert.ok(condemnsAddress({ smtpCode: 550, enhancedCode: null, response: 'No such user here', stage: 'rcpt_to' }));
});

test.run();
