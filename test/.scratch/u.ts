import { decideCharge, foldUsage, initialUsageState } from '../../domain/usage/quota.ts';
const c = (recipients: number, o = {}) => ({ type: 'ChargeRecipients' as const, month: '2026-11', emailId: 'em_' + Math.random(), fingerprint: 'f', apiKeyId: 'key_live', developmentKey: false, recipients, occurredAt: 'x', ...o });
const dev = foldUsage(decideCharge(c(995, { apiKeyId: 'key_dev', developmentKey: true }), initialUsageState('2026-11')), initialUsageState('2026-11'));
try { decideCharge(c(6, { apiKeyId: 'key_dev', developmentKey: true }), dev); console.log('no throw') } catch (e) { console.log(e) }
